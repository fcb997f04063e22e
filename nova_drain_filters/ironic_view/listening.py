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

"""The oslo.messaging side of event mode: transport, server, health.

What ``events.EventListener`` asks of oslo.messaging, kept in one place:
the notification transport, the listener server on Ironic's exchange and
topic (``[drain_filters]``), and whether its connection is up.
"""
from collections.abc import Callable
from typing import Any

import oslo_messaging
from oslo_config import cfg

from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import reader

CONF = cfg.CONF
#: Consume with ``consumer.QueueConsumer`` where the transport is
#: oslo.messaging's rabbit driver; False keeps oslo.messaging's batch
#: listener everywhere (the storm benchmark's ``--listener oslo``).
OWN_CONSUMER = True
#: Run our consumer in a process of its own (``reader.ReaderProcess``),
#: so that reading costs the scheduler's GIL almost nothing; False runs
#: it in this process (the storm benchmark's ``--listener own``).
READER_PROCESS = True
#: Messages handed over together at most, and how long a batch waits for
#: one more (so a lone event waits this long at most). One batch costs one
#: dispatch through oslo.messaging's executor instead of one per message:
#: in an event storm about a quarter of the CPU per event (``ironic_storm``).
BATCH_SIZE = 200
BATCH_TIMEOUT = 0.02


class Endpoint:
    """oslo.messaging's batch listener calls one method per priority with
    the messages of one batch; all priorities mean the same."""

    def __init__(self, on_event: Callable[[Any, Any], None]) -> None:
        self._on_event = on_event

    def info(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self._on_event(message.get("event_type"), message.get("payload"))

    warn = error = critical = info


def notification_transport(url: str | None) -> Any:
    """Nova's notification transport, or the one at ``url``.

    ``get_notification_transport`` falls back from the URL to
    ``[oslo_messaging_notifications] transport_url`` to ``[DEFAULT]
    transport_url`` (oslo_messaging/notify/notifier.py).
    """
    return oslo_messaging.get_notification_transport(CONF, url=url)


def server(transport: Any, endpoint: Endpoint, pool: str | None) -> Any:
    """A (not yet started) batch listener on Ironic's exchange and topic.

    ``get_batch_notification_listener`` (oslo_messaging/notify/
    listener.py) polls until ``BATCH_SIZE`` messages or until a poll
    waits ``BATCH_TIMEOUT`` for nothing (_drivers/base.py
    ``batch_poll_helper``), then dispatches them in one call.
    """
    group = CONF.drain_filters
    target = oslo_messaging.Target(
        topic=group.baremetal_notifications_topic,
        exchange=group.baremetal_notifications_exchange)
    return oslo_messaging.get_batch_notification_listener(
        transport, [target], [endpoint], executor="threading", pool=pool,
        batch_size=BATCH_SIZE, batch_timeout=BATCH_TIMEOUT)


def consume(transport: Any, pool: str | None,
            on_event: Callable[[Any, Any], None],
            on_batch: consumer.OnBatch,
            on_parsed: reader.OnParsed, in_process: bool = False,
            election: host_reader.Election | None = None,
            shared_pool: str | None = None,
            unread: tuple[str, ...] = (),
            alone_pool: str | None = None,
            slot_lock: Callable[[], int | None] | None = None) -> Any:
    """A (not yet started) server of the pool's queue: on RabbitMQ our
    consumer in its reader process (``on_parsed``) or, ``in_process``, in
    this one (``on_batch``), else oslo.messaging's listener
    (``on_event``).

    With an ``election``, a reader process reads ``shared_pool`` for every
    process of the host (``host_reader``). Nothing else shares: a queue
    has one consumer, or each process would hear only part of the events.
    ``unread``: the host's queues of the other mode, which a reader
    process deletes if nobody reads them (``reader.settings``).
    ``alone_pool``: the queue a process reads if its reader finds another
    reader on ``pool`` (one only this process can name).
    ``slot_lock``: the descriptor of the lock of ``pool``'s slot, which a
    reader process of it holds too (``reader.ReaderProcess``).
    """
    group = CONF.drain_filters
    if OWN_CONSUMER and pool and consumer.supports(transport):
        if READER_PROCESS and not in_process:
            if election is not None and shared_pool:
                return reader.ReaderProcess(shared_pool, on_parsed,
                                            election=election, own_pool=pool,
                                            unread=unread)
            return reader.ReaderProcess(pool, on_parsed, unread=unread,
                                        own_pool=alone_pool, lock=slot_lock)
        return consumer.QueueConsumer(
            transport, group.baremetal_notifications_exchange,
            group.baremetal_notifications_topic, pool, on_batch,
            lowered=True)
    return server(transport, Endpoint(on_event), pool)


def generation(listener_server: Any) -> int:
    """Which of the server's successive readers serves now (0: no such
    count); see ``reader.ReaderProcess.generation``."""
    return int(getattr(listener_server, "generation", 0))


def is_connected(listener_server: Any) -> bool:
    """True while the server's own broker connection is up.

    oslo.messaging has no public health call. This follows
    ``MessageHandlingServer.listener`` (oslo_messaging/server.py), a
    ``PollStyleListenerAdapter`` whose ``NotificationAMQPListener``
    (_drivers/amqpdriver.py) holds a ``ConnectionContext`` around
    impl_rabbit's ``Connection`` and its kombu connection. Any other
    shape (another driver, another version, no server) reads as down,
    which only means polling.
    """
    if isinstance(listener_server, (consumer.QueueConsumer,
                                    reader.ReaderProcess)):
        return listener_server.connected()
    try:
        listener = listener_server.listener._poll_style_listener
        return bool(listener.conn.connection.connection.connected)
    except AttributeError:
        return False
