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
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

import fixtures
import oslo_messaging
from oslo_config import cfg

from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import reader
from tests.functional.broker_case import TOPIC
from tests.functional.broker_case import BrokerTestBase
from tests.functional.broker_case import node_message


class ConsumerTest(BrokerTestBase):
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


class ReaderProcessTest(BrokerTestBase):
    """Our consumer in its reader process, as the scheduler runs it.

    The parent's side is the test; the reader is the real child process
    (``python -m nova_drain_filters.event_reader``) on the real
    broker, configured from this process's options as a scheduler's is.
    """

    def setUp(self) -> None:
        super().setUp()
        self.listen_here()
        self.got: list[notifications.NodeEvent] = []
        self.received = self.dropped = self.events = 0

    def reader(self, applied: Callable[[], bool] = lambda: True
               ) -> reader.ReaderProcess:
        def on_parsed(latest: dict[str, notifications.Pending], events: int,
                      received: int, dropped: int) -> Callable[[], bool]:
            # Payloads without every field the view reads: each node's
            # event comes as itself, to be re-read; a node each here.
            self.got.extend(value for value in latest.values()
                            if isinstance(value, notifications.NodeEvent))
            self.events += events
            self.received += received
            self.dropped += dropped
            return applied
        process = reader.ReaderProcess(self.pool, on_parsed)
        process.start()  # returns once the reader is connected
        self.addCleanup(process.wait)
        self.addCleanup(process.stop)
        self.assertTrue(process.connected())
        return process

    def gone(self, pid: int) -> bool:
        """True once ``pid`` exited (a zombie nobody reaped counts)."""
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    def test_batches_come_parsed_and_are_acked_once_applied(self) -> None:
        release = threading.Event()
        self.reader(release.is_set)
        nodes = [str(uuid.uuid4()) for _ in range(30)]
        self.publish(nodes)
        self.wait_for("30 events", lambda: len(self.got) == 30)
        self.assertEqual(30, self.events)
        self.assertEqual(nodes, [e.node_uuid for e in self.got])
        self.assertEqual({("baremetal.node.power_set.end", False, None)},
                         {(e.event_type, e.deleted, e.facts)
                          for e in self.got})
        self.assertEqual((30, 0), (self.received, self.dropped))
        self.wait_for("30 unacked", lambda: self.queue()[
            "messages_unacknowledged"] == 30)
        release.set()
        self.wait_for("an empty queue", lambda: (
            self.queue()["messages_ready"],
            self.queue()["messages_unacknowledged"]) == (0, 0))

    def test_the_reader_yields_to_its_scheduler(self) -> None:
        # Its niceness above its parent's, in its parent's session: with
        # the kernel's autogroups a niceness counts only inside the
        # session's group (tests/functional/services/priority.py).
        process = self.reader()
        pid = process.pid
        assert pid is not None
        self.assertEqual(os.getsid(0), os.getsid(pid))
        self.assertEqual(
            min(19, os.getpriority(os.PRIO_PROCESS, 0) + priority.READER_NICE),
            os.getpriority(os.PRIO_PROCESS, pid))

    def test_a_killed_reader_is_replaced_and_its_events_come_again(
            self) -> None:
        release = threading.Event()
        process = self.reader(release.is_set)
        nodes = [str(uuid.uuid4()) for _ in range(10)]
        self.publish(nodes)
        self.wait_for("10 events", lambda: len(self.got) == 10)
        first = process.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        self.wait_for("a new reader", lambda: (
            process.starts == 2 and process.connected()), timeout=60)
        self.assertNotEqual(first, process.pid)
        # Never acked, so the broker sends them to the new reader.
        self.wait_for("the 10 again", lambda: len(self.got) == 20)
        self.assertEqual(nodes + nodes, [e.node_uuid for e in self.got])
        release.set()
        self.wait_for("an empty queue", lambda: (
            self.queue()["messages_ready"],
            self.queue()["messages_unacknowledged"]) == (0, 0))

    def parent_process(self, fork: bool = False) -> tuple[
            subprocess.Popen[str], list[int]]:
        """A process that starts a reader (and forks a worker that lets
        go of it, as EventListener.start does); the reader's pid, and the
        worker's."""
        code = (
            "import os, sys, time\n"
            "from oslo_config import cfg\n"
            "from nova_drain_filters import conf\n"
            "from nova_drain_filters.ironic_view import reader\n"
            "conf.register_opts(cfg.CONF)\n"
            "cfg.CONF([], project='nova')\n"
            f"cfg.CONF.set_override('baremetal_notifications_url', "
            f"{self.broker.transport_url!r}, 'drain_filters')\n"
            f"r = reader.ReaderProcess({self.pool!r}, "
            "lambda e, n, d: (lambda: True))\n"
            "r.start()\n"
            "pids = [r.pid]\n"
            f"if {fork!r}:\n"
            "    worker = os.fork()\n"
            "    if worker == 0:\n"
            "        r.forget_after_fork()\n"
            "        time.sleep(120)\n"
            "        os._exit(0)\n"
            "    pids.append(worker)\n"
            "print(*pids, flush=True)\n"
            "sys.stdin.read()\n")
        parent = subprocess.Popen([sys.executable, "-c", code],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: parent.poll() is not None or parent.kill())
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        for pid in pids[1:]:
            self.addCleanup(lambda p=pid: self.gone(p) or os.kill(
                p, signal.SIGKILL))
        return parent, pids

    def test_a_forked_workers_copy_does_not_keep_the_parents_reader(
            self) -> None:
        parent, (child, worker) = self.parent_process(fork=True)
        self.wait_for("the reader's consumer", lambda: self.queue()[
            "consumers"] == 1)
        parent.kill()
        parent.wait(10)
        self.wait_for("the reader's end", lambda: self.gone(child), 10)
        self.assertFalse(self.gone(worker))  # the worker lives on

    def test_the_reader_ends_with_its_parent(self) -> None:
        # A scheduler killed with SIGKILL: its reader must not live on
        # and keep consuming the pool's queue.
        parent, (child,) = self.parent_process()
        self.assertFalse(self.gone(child))
        self.wait_for("the reader's consumer", lambda: self.queue()[
            "consumers"] == 1)
        parent.kill()
        parent.wait(10)
        self.wait_for("the reader's end", lambda: self.gone(child), 10)
        self.wait_for("no consumer", lambda: self.queue()[
            "consumers"] == 0)

    def test_a_reader_with_no_broker_ends_with_its_parent(self) -> None:
        # A broker that cannot be reached (a typo'd port): the reader
        # retries, loudly, and still ends the moment its parent stops.
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader"))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # nothing listens once closed
        cfg.CONF.set_override("baremetal_notifications_url",
                              f"rabbit://guest:guest@127.0.0.1:{port}/",
                              "drain_filters")
        process = reader.ReaderProcess(self.pool, lambda e, n, d: (
            lambda: True))
        threading.Thread(target=process.start, daemon=True).start()
        self.wait_for("the reader's retries in our log", lambda: (
            "Connection refused" in logged.output))
        self.assertFalse(process.connected())
        proc = process._proc
        assert proc is not None
        process.stop()
        self.wait_for("the reader's end", lambda: proc.poll() is not None,
                      timeout=4)
        self.assertEqual(0, proc.returncode)  # ended, not killed
        process.wait()

    def test_the_readers_log_and_drops_reach_the_parent(self) -> None:
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader"))
        self.reader()
        self.publish_messages([node_message("not-a-uuid")])
        self.wait_for("the drop", lambda: self.dropped == 1)
        self.wait_for("the reader's warning", lambda: (
            "Dropped a malformed Ironic notification" in logged.output))
        self.assertIn("Ironic event reader", logged.output)
        self.assertEqual([], self.got)

    def test_late_events_are_said_in_the_parents_log(self) -> None:
        # What an operator sees when the reader reads late (a saturated
        # host, a slow broker): one warning, then one line once on time.
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader",
            level=logging.INFO))
        self.reader()
        late, on_time = str(uuid.uuid4()), str(uuid.uuid4())
        self.publish_messages([node_message(late, ago=600)])
        self.wait_for("the late event", lambda: len(self.got) == 1)
        self.wait_for("the warning", lambda: (
            "Ironic's notifications are read 600 s after" in logged.output))
        self.assertNotIn("on time again", logged.output)
        self.publish_messages([node_message(on_time)])
        self.wait_for("the event on time", lambda: len(self.got) == 2)
        self.wait_for("the all clear", lambda: (
            "Ironic's notifications are on time again" in logged.output))
        self.assertEqual(1, logged.output.count("are read"))
        self.assertEqual([late, on_time],
                         [event.node_uuid for event in self.got])

    def test_the_parents_rabbit_options_reach_the_reader(self) -> None:
        # As the quorum test above, but the options are this process's
        # nova.conf ([oslo_messaging_rabbit]), carried to the reader.
        self.exchange = "ironic-quorum"
        cfg.CONF.set_override("baremetal_notifications_exchange",
                              self.exchange, "drain_filters")
        oslo_messaging.get_notification_transport(
            cfg.CONF, url=self.broker.transport_url).cleanup()
        cfg.CONF.set_override("rabbit_quorum_queue", True,
                              "oslo_messaging_rabbit")
        self.addCleanup(cfg.CONF.clear_override, "rabbit_quorum_queue",
                        "oslo_messaging_rabbit")
        self.reader()
        queue = self.queue()
        self.assertTrue(queue["durable"])
        self.assertIn("quorum", json.dumps(queue["arguments"]))
        nodes = [str(uuid.uuid4()) for _ in range(5)]
        self.publish(nodes)
        self.wait_for("5 events", lambda: len(self.got) == 5)
