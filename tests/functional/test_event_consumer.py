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

"""Our queue consumer against a real broker and oslo.messaging's listener.

The consumer must declare a pool's queue exactly as oslo.messaging's
listener does (RabbitMQ refuses a declare whose arguments differ), so the
two share one queue across an upgrade; and it must ack a batch only once
it is applied, so that a batch whose apply never finished is delivered
again. One broker serves the class.
"""
import json
import threading
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
from nova_drain_filters.ironic_view import listening
from tests.functional.services import rabbitmq_server

TOPIC = "ironic_versioned_notifications"


def node_message(node: str) -> dict[str, Any]:
    """What Ironic's ``messagingv2`` notifier sends for one node event."""
    inner = {"message_id": str(uuid.uuid4()), "publisher_id": "test",
             "event_type": "baremetal.node.power_set.end",
             "priority": "INFO", "timestamp": "2026-12-01 00:00:00",
             "payload": {"ironic_object.data": {"uuid": node}}}
    return {"oslo.version": "2.0", "oslo.message": json.dumps(inner)}


class ConsumerTest(testtools.TestCase):
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
        with kombu.Connection(self.broker.transport_url.replace(
                "rabbit://", "amqp://", 1)) as conn:
            producer = conn.Producer(serializer="json")
            for node in nodes:
                # The exchange is the listener's, declared already.
                producer.publish(node_message(node), exchange=self.exchange,
                                 routing_key=f"{TOPIC}.info")

    def queue(self) -> dict[str, Any]:
        out = self.broker.ctl(
            "list_queues", "-q", "--formatter", "json", "name", "durable",
            "auto_delete", "arguments", "messages_ready",
            "messages_unacknowledged")
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

    def test_oslo_listener_and_consumer_share_one_queue(self) -> None:
        # Quorum queues: a durable exchange and queue, and an argument
        # the broker checks on every declare. The exchange is durable, so
        # not the other test's.
        self.exchange = "ironic-quorum"
        cfg.CONF.set_override("baremetal_notifications_exchange",
                              self.exchange, "drain_filters")
        self.addCleanup(cfg.CONF.clear_override,
                        "baremetal_notifications_exchange", "drain_filters")
        transport = self.transport(rabbit_quorum_queue=True)
        heard: list[Any] = []
        server = listening.server(transport, listening.Endpoint(
            lambda kind, payload: heard.append(payload)), self.pool)
        server.start()
        declared = self.queue()
        bindings = self.bindings()
        self.assertIn("quorum", json.dumps(declared["arguments"]))
        self.assertEqual(
            [(self.exchange, f"{TOPIC}.{p}")
             for p in sorted(consumer.PRIORITIES)],
            bindings)
        server.stop()
        server.wait()

        got: list[consumer.Message] = []
        ours = self.consumer(transport, got.extend)  # refused if different
        self.assertEqual(bindings, self.bindings())
        again = self.queue()
        for key in ("durable", "auto_delete", "arguments"):
            self.assertEqual(declared[key], again[key], key)
        ours.keep_alive()  # what a long apply sends while it waits
        nodes = [str(uuid.uuid4()) for _ in range(3)]
        self.publish(nodes)
        self.wait_for("three events", lambda: len(got) == 3)
        self.assertEqual(
            nodes, [p["ironic_object.data"]["uuid"] for _, p in got])
        self.assertTrue(ours.connected())

        # And back: oslo.messaging's listener takes the queue over.
        ours.stop()
        ours.wait()
        server = listening.server(transport, listening.Endpoint(
            lambda kind, payload: heard.append(payload)), self.pool)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.publish(nodes[:1])
        self.wait_for("the listener's event", lambda: len(heard) == 1)

    def test_a_batch_is_acked_once_after_it_is_applied(self) -> None:
        transport = self.transport()
        attempts: list[int] = []

        def crash(batch: list[consumer.Message]) -> None:
            attempts.append(len(batch))
            raise RuntimeError("the process died before the apply")

        crashed = self.consumer(transport, crash)
        nodes = [str(uuid.uuid4()) for _ in range(20)]
        self.publish(nodes)
        self.wait_for("the crashed batches", lambda: sum(attempts) == 20)
        self.wait_for("20 unacked", lambda: self.queue()[
            "messages_unacknowledged"] == 20)
        self.assertEqual(0, crashed.acks)
        crashed.stop()
        crashed.wait()  # the connection goes: the broker requeues them

        applied: list[str] = []
        done = threading.Event()

        def apply(batch: list[consumer.Message]) -> None:
            applied.extend(p["ironic_object.data"]["uuid"] for _, p in batch)
            if len(applied) >= 20:
                done.set()

        ours = self.consumer(transport, apply)
        self.wait_for("the redelivered events", done.is_set)
        self.assertEqual(sorted(nodes), sorted(applied))
        self.wait_for("an empty queue", lambda: (
            self.queue()["messages_ready"],
            self.queue()["messages_unacknowledged"]) == (0, 0))
        # One ack per batch, each for all of it (multiple=True).
        self.assertEqual(ours.batches, ours.acks)
        self.assertLess(ours.acks, 20)

    def test_reading_goes_on_while_batches_wait_for_their_apply(self) -> None:
        # A scheduler's listener holds batches back while requests read
        # the snapshot: the consumer must read on meanwhile, and ack only
        # what is applied.
        transport = self.transport()
        got: list[consumer.Message] = []
        release = threading.Event()
        ours = self.consumer(transport, got.extend, release.is_set)
        first = [str(uuid.uuid4()) for _ in range(10)]
        self.publish(first)
        self.wait_for("the first events", lambda: len(got) == 10)
        second = [str(uuid.uuid4()) for _ in range(10)]
        self.publish(second)
        self.wait_for("the second events, read before any apply",
                      lambda: len(got) == 20)
        self.wait_for("20 unacked", lambda: self.queue()[
            "messages_unacknowledged"] == 20)
        self.assertEqual(0, ours.acks)
        release.set()
        self.wait_for("an empty queue", lambda: (
            self.queue()["messages_ready"],
            self.queue()["messages_unacknowledged"]) == (0, 0))
        self.assertGreaterEqual(ours.acks, 1)
        self.assertLessEqual(ours.acks, ours.batches)
        self.assertEqual(first + second,
                         [p["ironic_object.data"]["uuid"] for _, p in got])
