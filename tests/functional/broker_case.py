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

"""A real broker for a test class, and Ironic's messages to publish on it.

Shared by the tests of our queue consumer, its reader process and the
host's shared reader.
"""
import datetime
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import kombu
import oslo_messaging
import testtools
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters.ironic_view import consumer
from tests.functional.services import rabbitmq_server

TOPIC = "ironic_versioned_notifications"


def node_message(node: str, ago: float = 0.0) -> dict[str, Any]:
    """What Ironic's ``messagingv2`` notifier sends for one node event,
    sent ``ago`` seconds ago (its stamp: ``str(timeutils.utcnow())``)."""
    sent = datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None) - datetime.timedelta(seconds=ago)
    inner = {"message_id": str(uuid.uuid4()), "publisher_id": "test",
             "event_type": "baremetal.node.power_set.end",
             "priority": "INFO", "timestamp": str(sent),
             "payload": {"ironic_object.data": {"uuid": node}}}
    return {"oslo.version": "2.0", "oslo.message": json.dumps(inner)}


class BrokerTestBase(testtools.TestCase):
    """One broker for the class; a pool of its own for each test."""

    broker: rabbitmq_server.RabbitMQServer

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.broker = rabbitmq_server.RabbitMQServer()
        cls.broker.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        super().tearDownClass()

    def setUp(self) -> None:
        super().setUp()
        drain_conf.register_opts(cfg.CONF)
        self.pool = f"nova-drain-filters.test.{uuid.uuid4().hex[:8]}"
        self.exchange = "ironic"

    def listen_here(self) -> None:
        """This process's [drain_filters] pointed at the broker and the
        test's exchange, as a scheduler's nova.conf would be."""
        for name, value in (("baremetal_notifications_url",
                             self.broker.transport_url),
                            ("baremetal_notifications_exchange",
                             self.exchange)):
            cfg.CONF.set_override(name, value, "drain_filters")
            self.addCleanup(cfg.CONF.clear_override, name, "drain_filters")

    def transport(self, **rabbit: Any) -> Any:
        conf = cfg.ConfigOpts()
        conf([], project="test")
        transport = oslo_messaging.get_notification_transport(
            conf, url=self.broker.transport_url)
        for name, value in rabbit.items():
            conf.set_override(name, value, "oslo_messaging_rabbit")
        self.addCleanup(transport.cleanup)
        return transport

    def consumer(self, transport: Any,
                 on_batch: Callable[[list[consumer.Message]], None],
                 applied: Callable[[], bool] = lambda: True,
                 ) -> consumer.QueueConsumer:
        """A consumer whose batches are applied once ``applied`` says so
        (at once by default); ``on_batch`` raising is a crash."""
        def queue(batch: list[consumer.Message]) -> Callable[[], bool]:
            on_batch(batch)
            return applied
        queue_consumer = consumer.QueueConsumer(
            transport, self.exchange, TOPIC, self.pool, queue)
        queue_consumer.start()
        self.addCleanup(queue_consumer.wait)
        self.addCleanup(queue_consumer.stop)
        return queue_consumer

    def publish(self, nodes: list[str]) -> None:
        self.publish_messages([node_message(node) for node in nodes])

    def publish_messages(self, messages: list[dict[str, Any]]) -> None:
        """Publish with publisher confirms, mandatory: each returns once
        the broker took it, and a message no queue took (unrouted, or
        nacked by a quorum queue not ready) fails here, not as a missing
        event seconds later."""
        with kombu.Connection(self.broker.transport_url.replace(
                "rabbit://", "amqp://", 1),
                transport_options={"confirm_publish": True}) as conn:
            producer = conn.Producer(serializer="json")
            for message in messages:
                # The exchange is the listener's, declared already.
                producer.publish(message, exchange=self.exchange,
                                 routing_key=f"{TOPIC}.info",
                                 mandatory=True)

    def queue(self) -> dict[str, Any]:
        out = self.broker.ctl(
            "list_queues", "-q", "--formatter", "json", "name", "durable",
            "auto_delete", "arguments", "messages_ready",
            "messages_unacknowledged", "consumers")
        return next(q for q in json.loads(out) if q["name"] == self.pool)

    def bindings(self) -> list[tuple[str, str]]:
        out = self.broker.ctl("list_bindings", "-q", "--formatter", "json",
                              "source_name", "destination_name",
                              "routing_key")
        return sorted((b["source_name"], b["routing_key"])  # type: ignore
                      for b in json.loads(out)
                      if b["destination_name"] == self.pool
                      and b["source_name"])  # not the default exchange's

    def wait_for(self, what: str, check: Callable[[], bool],
                 timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout}s")
            time.sleep(0.05)
