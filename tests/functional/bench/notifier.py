# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Ironic's versioned notifications, straight into the broker, cheaply.

The benchmarks' stand-in for Ironic's conductors. The message is what
oslo.messaging's ``messagingv2`` notifier sends
(oslo_messaging/notify/messaging.py, _drivers/amqpdriver.py ``_send`` and
_drivers/common.py ``serialize_msg``): the notification as JSON in an
``oslo.message`` envelope, published to Ironic's exchange (its control
exchange, ``ironic``) with the key ``<topic>.<priority>``
(_drivers/impl_rabbit.py ``notify_send``), persistent and as JSON, as
kombu's producer marks it.

In a cloud the conductors run on other machines; here they share the
benchmark's. So each message goes out with one ``basic.publish`` of
py-amqp, not through kombu's producer: about 30 µs of CPU a message here
against kombu's 110 (and oslo.messaging's own notifier sends only a few
hundred a second). A burst can be built before it starts (``bodies``),
which leaves only the publishing inside it.

``python -m tests.functional.bench.notifier URL FIRST LAST START COUNT``
publishes one burst, built first, of ``COUNT`` events naming the nodes
with integer UUIDs ``FIRST + 1`` to ``LAST`` (from the ``START``-th),
at the lowest priority (``priority``): ``select_burst``'s publisher.
"""
from __future__ import annotations

import datetime
import json
import socket
import sys
import time
import uuid as uuidlib
from typing import Any

import amqp
import kombu

from tests.functional.services import priority

EXCHANGE = "ironic"
ROUTING_KEY = "ironic_versioned_notifications.info"
EVENT_TYPE = "baremetal.node.maintenance_set.end"
#: Where a payload's publish time goes (``storm_process`` reads it back).
STAMP = "t="


def payload(node: str, stamp: float | None = None) -> dict[str, Any]:
    """A node's NodePayload 1.17 with every field the view reads; with
    ``stamp``, the publish time in its maintenance reason."""
    return {"ironic_object.name": "NodePayload",
            "ironic_object.namespace": "ironic",
            "ironic_object.version": "1.17",
            "ironic_object.data": {
                "uuid": node, "name": None, "provision_state": "available",
                "power_state": "power off", "maintenance": True,
                "maintenance_reason": (None if stamp is None
                                       else f"{STAMP}{stamp:.6f}"),
                "retired": False, "retired_reason": None, "fault": None,
                "instance_uuid": None, "traits": []}}


def envelope(event_type: str, body: dict[str, Any]) -> bytes:
    """One notification as oslo.messaging's rabbit driver sends it."""
    message = {"message_id": str(uuidlib.uuid4()),
               "publisher_id": "ironic-conductor.bench",
               "event_type": event_type, "priority": "INFO",
               "payload": body, "timestamp": str(
                   datetime.datetime.now(datetime.timezone.utc).replace(
                       tzinfo=None)),
               "_unique_id": uuidlib.uuid4().hex}
    return json.dumps({"oslo.version": "2.0",
                       "oslo.message": json.dumps(message)}).encode()


def bodies(nodes: list[str], count: int, start: int) -> list[bytes]:
    """A burst built ahead: ``count`` events, one node each, in turn."""
    return [envelope(EVENT_TYPE, payload(nodes[(start + i) % len(nodes)]))
            for i in range(count)]


class Notifier:
    """One connection to the broker, publishing on its default channel."""

    def __init__(self, transport_url: str) -> None:
        # py-amqp sets TCP_USER_TIMEOUT to 1 s (amqp/transport.py
        # DEFAULT_SOCKET_SETTINGS): a broker that holds the publisher back
        # (flow control stops reading its socket) for longer drops the
        # connection, with what sat in the socket's buffers. oslo.messaging
        # sets it to the heartbeat timeout, 60 s (impl_rabbit.py
        # Connection.set_transport_socket_timeout); so does Ironic's sender.
        self.conn = kombu.Connection(
            transport_url.replace("rabbit://", "amqp://", 1),
            transport_options={"socket_settings": {
                socket.TCP_USER_TIMEOUT: 60000}})
        self.channel = self.conn.default_channel
        kombu.Exchange(EXCHANGE, type="topic", durable=False,
                       auto_delete=False)(self.channel).declare()

    def send(self, body: bytes) -> None:
        self.channel.basic_publish(
            amqp.Message(body, content_type="application/json",
                         content_encoding="utf-8", delivery_mode=2),
            exchange=EXCHANGE, routing_key=ROUTING_KEY)

    def info(self, event_type: str, body: dict[str, Any]) -> None:
        self.send(envelope(event_type, body))

    def close(self) -> None:
        self.conn.release()


def publish(notifier: Notifier, nodes: list[str], count: int,
            rate: float | None, start: int) -> tuple[float, float]:
    """``count`` events, one node each, stamped with their publish time, at
    ``rate`` a second (None: at once); the wall times of the first and the
    last."""
    first = time.time()
    began = time.monotonic()
    for i in range(count):
        if rate is not None:
            ahead = began + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        node = nodes[(start + i) % len(nodes)]
        notifier.info(EVENT_TYPE, payload(node, time.time()))
    return first, time.time()


def burst(argv: list[str]) -> int:
    """One burst built ahead, at the lowest priority (see the module)."""
    url, (first, last, start, count) = argv[0], (int(a) for a in argv[1:5])
    priority.lowest()
    nodes = [str(uuidlib.UUID(int=i + 1)) for i in range(first, last)]
    built = bodies(nodes, count, start)
    notifier = Notifier(url)
    try:
        for body in built:
            notifier.send(body)
    finally:
        notifier.close()
    return 0


if __name__ == "__main__":
    sys.exit(burst(sys.argv[1:]))
