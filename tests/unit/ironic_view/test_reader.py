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

"""The reader's settings and the parent's acks, on a socket pair.

The wire itself is tested in test_wire.py.

The reader process against a real broker (redelivery after a kill, the
end with its parent) is in tests/functional/test_event_consumer.py.
"""
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from typing import Any
from unittest import mock

import fixtures
import oslo_messaging
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import pools
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import reader
from nova_drain_filters.ironic_view import reader_child
from nova_drain_filters.ironic_view import wire

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"


def node_event(**facts: Any) -> notifications.NodeEvent:
    return notifications.NodeEvent(
        NODE, "baremetal.node.provision_set.end",
        facts=decisions.IronicNodeFacts(uuid=NODE, **facts))


class SettingsTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        drain_conf.register_opts(cfg.CONF)
        # As the scheduler: its transport registered the driver's options.
        oslo_messaging.get_notification_transport(
            cfg.CONF, url="rabbit://u:p@127.0.0.1:1/").cleanup()

    def test_the_parents_options_are_the_readers(self) -> None:
        self.conf.config(group="oslo_messaging_rabbit",
                         heartbeat_timeout_threshold=17,
                         rabbit_quorum_queue=True, ssl=True,
                         ssl_ca_file="/etc/ssl/rabbit-ca.pem")
        self.conf.config(control_exchange="nova-blue",
                         transport_url="rabbit://a:b@10.0.0.9:5672/")
        self.conf.config(group="drain_filters",
                         baremetal_notifications_exchange="ironic-east",
                         baremetal_notifications_topic="ironic_v2")
        setup = reader.settings("pool-1")
        self.assertEqual(("pool-1", None, "ironic-east", "ironic_v2",
                          priority.READER_NICE),
                         (setup["pool"], setup["url"], setup["exchange"],
                          setup["topic"], setup["nice"]))
        conf = reader_child.messaging_conf(
            pickle.loads(pickle.dumps(setup["options"])))
        rabbit = conf.oslo_messaging_rabbit
        self.assertEqual((17, True, True, "/etc/ssl/rabbit-ca.pem"),
                         (rabbit.heartbeat_timeout_threshold,
                          rabbit.rabbit_quorum_queue, rabbit.ssl,
                          rabbit.ssl_ca_file))
        self.assertEqual(("nova-blue", "rabbit://a:b@10.0.0.9:5672/"),
                         (conf.control_exchange, conf.transport_url))
        # An option left alone keeps the driver's default.
        self.assertEqual(cfg.CONF.oslo_messaging_rabbit.rabbit_retry_interval,
                         rabbit.rabbit_retry_interval)

    def test_the_queues_left_unread_go_to_the_reader_and_not_further(
            self) -> None:
        self.assertEqual(["q.0", "q.1"],
                         reader.settings("pool", None, ("q.0", "q.1"))
                         ["unread"])
        self.assertEqual([], reader.settings("pool")["unread"])
        proc = reader.ReaderProcess("host.shared", mock.Mock(),
                                    own_pool="host.0",
                                    unread=("host.0", "host.1"))
        with mock.patch.object(reader.LOG, "error"):
            proc._alone("another version")
        # Refused, it reads its own pool, and the host's queue is read by
        # the host's reader: nothing for it to delete.
        self.assertEqual(("host.0", ()), (proc.pool, proc._unread))


class FakeChild:
    """The reader's end of the socket pair, played by the test."""

    def __init__(self, sock: socket.socket) -> None:
        self.channel = wire.Channel(sock)

    def applied(self, timeout: float = 2.0) -> int | None:
        try:
            message = self.channel.receive(timeout)
        except TimeoutError:
            return None
        assert message[0] == "applied", message
        return int(message[1])


class ParentTest(testtools.TestCase):
    """``ReaderProcess``'s side: batches in, ``applied`` out, in order."""

    def setUp(self) -> None:
        super().setUp()
        self.got: list[tuple[dict[str, notifications.Pending], int, int,
                             int]] = []
        self.done: dict[int, bool] = {}
        self.proc = reader.ReaderProcess("pool", self.on_parsed)
        parent, child = socket.socketpair()
        self.addCleanup(child.close)
        self.proc._channel = wire.Channel(parent)
        self.proc._proc = mock.Mock(pid=4242, **{"poll.return_value": None})
        self.child = FakeChild(child)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            self.proc._serve()
        except Exception as exc:  # what ended it, for the test to check
            self.ended: Exception = exc

    def on_parsed(self, latest: dict[str, notifications.Pending],
                  events: int, received: int, dropped: int) -> Any:
        number = len(self.got)
        self.got.append((latest, events, received, dropped))
        self.done[number] = False
        return lambda: self.done[number]

    def tearDown(self) -> None:
        self.proc._stop.set()
        self.thread.join(5)
        super().tearDown()

    def test_batches_are_told_applied_in_order(self) -> None:
        event = node_event(provision_state="available")
        for seq in (1, 2, 3):
            self.child.channel.send(
                ("batch", seq, 1, 2, 1, wire.encode_batch([event])))
        self.child.channel.send(("state", True))
        self.assertIsNone(self.child.applied(0.3))
        self.assertEqual(3, len(self.got))
        assert event.facts is not None
        self.assertEqual(({NODE: node_table.pack(event.facts)}, 1, 2, 1),
                         self.got[0])
        self.assertTrue(self.proc.connected())
        # The second applied first: nothing is acked past the first.
        self.done[1] = True
        self.assertIsNone(self.child.applied(0.3))
        self.done[0] = True
        self.assertEqual(2, self.child.applied())
        self.done[2] = True
        self.assertEqual(3, self.child.applied())

    def test_a_reader_gone_as_it_is_told_applied_is_gone(self) -> None:
        # A reader that dies while the parent tells it a batch is applied
        # is a reader gone (replaced quietly), not a failure of the
        # parent's side logged with a traceback.
        self.child.channel.send(
            ("batch", 1, 1, 1, 0, wire.encode_batch([node_event(
                provision_state="available")])))
        self.assertIsNone(self.child.applied(0.3))
        assert self.proc._channel is not None
        self.useFixture(fixtures.MockPatchObject(
            self.proc._channel, "send", side_effect=BrokenPipeError(32, "")))
        self.done[0] = True
        self.thread.join(5)
        self.assertFalse(self.thread.is_alive())
        self.assertIsInstance(self.ended, wire.ReaderGone)

    def test_a_reader_that_says_it_is_down_reads_as_down(self) -> None:
        self.child.channel.send(("state", True))
        self.child.channel.send(("state", False))
        self.assertIsNone(self.child.applied(0.3))
        self.assertFalse(self.proc.connected())

    def test_a_dead_reader_reads_as_down(self) -> None:
        self.child.channel.send(("state", True))
        self.assertIsNone(self.child.applied(0.3))
        self.assertTrue(self.proc.connected())
        self.proc._proc.poll.return_value = -9
        self.assertFalse(self.proc.connected())

    def test_the_readers_log_goes_to_the_parents(self) -> None:
        with mock.patch.object(reader.LOG, "log") as log:
            self.child.channel.send(("log", 30, "Dropped a malformed one"))
            self.assertIsNone(self.child.applied(0.3))
        log.assert_called_once_with(
            30, "Ironic event reader %(pid)s: %(text)s",
            {"pid": 4242, "text": "Dropped a malformed one"})


class ReaderSideTest(testtools.TestCase):
    """The child's parse: what it sends for a batch, and its acks."""

    def test_a_batch_is_parsed_and_counted(self) -> None:
        channel = mock.Mock()
        child = reader_child.Reader(channel)
        data = {"uuid": NODE, "provision_state": "available"}
        with mock.patch.object(reader_child.LOG, "warning") as warning:
            applied = child.on_batch([
                ("baremetal.node.power_set.end",
                 {"ironic_object.data": data}),
                ("baremetal.port.update.end", {}),      # no node: counted
                ("baremetal.node.update.end", {"x": 1}),  # malformed
            ])
        frame = channel.send_frame.call_args[0][0]
        kind, seq, events, received, dropped, columns = pickle.loads(
            frame[4:])
        self.assertEqual(("batch", 1, 1, 2, 1),
                         (kind, seq, events, received, dropped))
        self.assertEqual({NODE: notifications.NodeEvent(
            NODE, "baremetal.node.power_set.end")},
            wire.decode_batch(columns))
        warning.assert_called_once()
        self.assertFalse(applied())
        child._applied = 1
        self.assertTrue(applied())

    def test_the_hosts_reader_acks_once_its_followers_applied(self) -> None:
        channel = mock.Mock()
        child = reader_child.Reader(channel)
        child.followers = followers = mock.Mock()
        followers.applied.return_value = False
        applied = child.on_batch([("baremetal.port.update.end", {})])
        frame = channel.send_frame.call_args[0][0]
        followers.send.assert_called_once_with(1, frame)  # pickled once
        self.assertFalse(applied())
        followers.applied.assert_called_with(1, 0)
        child._applied = 1
        followers.applied.return_value = True
        self.assertTrue(applied())
        followers.applied.assert_called_with(1, 1)


class AnotherReaderTest(testtools.TestCase):
    """A reader never shares its queue, the host's or a process's own
    (issue 41)."""

    def setUp(self) -> None:
        super().setUp()
        self.channel = mock.Mock()
        self.child = reader_child.Reader(self.channel)
        self.exit = self.useFixture(fixtures.MockPatchObject(
            reader_child.os, "_exit", side_effect=SystemExit))
        self.error = self.useFixture(fixtures.MockPatchObject(
            reader_child.LOG, "error")).mock
        self.count = self.useFixture(fixtures.MockPatchObject(
            reader_child.consumer, "consumers")).mock

    def assertStopped(self, besides: int) -> None:
        self.exit.mock.assert_called_once_with(host_reader.ANOTHER_READER)
        self.error.assert_called_once()
        self.assertIn(f"has {besides} consumer(s) besides this reader",
                      self.error.call_args[0][1])
        kind, why = self.channel.send.call_args[0][0]
        self.assertEqual("refused", kind)  # its parent reads alone then
        self.assertIn("another reader of its queue", why)

    def test_a_consumer_before_it_reads_stops_it(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            host_reader, "CONSUMER_GRACE", 0.3))
        self.count.return_value = 1
        self.assertRaises(SystemExit, self.child._alone_on, "transport",
                          "nova-drain-filters.h.shared", before=True)
        self.assertStopped(1)

    def test_alone_it_reads_on(self) -> None:
        self.count.return_value = 0
        self.child._alone_on("transport", "q", before=True)
        # A reader killed a moment ago, gone from the broker in a while.
        self.count.side_effect = [1, 1, 0]
        self.child._alone_on("transport", "q", before=True)
        self.count.side_effect = None
        self.count.return_value = 1
        self.child._alone_on("transport", "q", before=False)
        self.exit.mock.assert_not_called()

    def test_another_consumer_seen_twice_in_a_row_stops_it(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            host_reader, "CONSUMER_CHECK", 0))
        self.useFixture(fixtures.MockPatchObject(
            host_reader, "CONSUMER_FIRST_CHECKS", (0, 0)))
        # One count with another (a reader that was ending), then alone,
        # then another twice: only that stops it.
        self.count.side_effect = [2, 1, OSError("broker"), 2, 2]
        self.assertRaises(SystemExit, self.child._watch_consumers,
                          "transport", "q")
        self.assertEqual(5, self.count.call_count)
        self.assertStopped(1)


class LifeTest(testtools.TestCase):
    """Starting, failing to start, and a fork's copy of the socket."""

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(config_fixture.Config(cfg.CONF))
        drain_conf.register_opts(cfg.CONF)

    def test_a_reader_that_cannot_start_is_not_started_again(self) -> None:
        proc = reader.ReaderProcess(
            "pool", lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
        error = self.assertRaises(RuntimeError, proc.start)
        self.assertIn("exited with 3 before it connected", str(error))
        self.assertFalse(proc._thread is not None and proc._thread.is_alive())
        time.sleep(reader.RESTART_DELAY + 0.5)
        self.assertEqual(1, proc.starts)

    def test_a_fork_lets_go_of_its_copy_only(self) -> None:
        parent, child = socket.socketpair()
        self.addCleanup(child.close)
        # What a fork leaves: two descriptors of the parent's end.
        copy = socket.socket(fileno=os.dup(parent.fileno()))
        self.addCleanup(copy.close)
        proc = reader.ReaderProcess(
            "pool", lambda latest, e, n, d: (lambda: True))
        proc._channel = wire.Channel(parent)
        proc.forget_after_fork()
        self.assertFalse(proc.connected())
        # The reader's end is still open: the parent still has its copy.
        child.settimeout(0.2)
        self.assertRaises(TimeoutError, child.recv, 1)
        copy.close()
        self.assertEqual(b"", child.recv(1))

    def test_no_reader_of_the_hosts_queue_without_the_lock(self) -> None:
        # The interleaving: the election is let go (a stop) between
        # lead() and the reader's start. Started all the same, the reader
        # of the host's queue would hold no lock, and another process
        # would lead and start a second reader beside it (issue 41).
        election = host_reader.Election(self.useFixture(
            fixtures.TempDir()).path, "h")

        def lead_then_stopped() -> bool:
            held = host_reader.Election.lead(election)
            election.forget()
            return held

        election.lead = lead_then_stopped  # type: ignore[method-assign]
        proc = reader.ReaderProcess(
            "nova-drain-filters.h.shared",
            lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", "import time; time.sleep(30)"],
            election=election, own_pool="nova-drain-filters.h.0")
        self.addCleanup(proc._reap)
        self.assertRaises(host_reader.LockLost, proc._spawn)
        self.assertIsNone(proc.pid)
        self.assertEqual(0, proc.starts)

    def test_a_slots_reader_holds_the_slot_until_it_is_gone(self) -> None:
        # A parent parked while its reader was still starting let its slot
        # go at once; the worker it had just forked took that slot and
        # read its queue beside the parent's reader (issue 41). The reader
        # holds the slot's lock too, so the next process takes another.
        lock_dir = self.useFixture(fixtures.TempDir()).path
        slot = pools.Slot(lock_dir, "h")
        self.assertEqual(0, slot.acquire())
        proc = reader.ReaderProcess(
            pools.pool_name("h", 0), lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", "import time; time.sleep(30)"],
            own_pool=pools.pool_name("h", None), lock=slot.fileno)
        proc._spawn()
        slot.forget()  # the parked parent lets go; its reader still runs
        worker = pools.Slot(lock_dir, "h")
        self.addCleanup(worker.forget)
        self.assertEqual(1, worker.acquire())
        worker.forget()
        assert proc._proc is not None
        proc._proc.kill()
        proc._reap()
        self.assertEqual(0, worker.acquire())

    def test_a_follower_that_cannot_reach_the_reader_starts_none(
            self) -> None:
        # The lock is held (by a reader that lives) and no reader answers
        # on the socket: the follower waits and tries again, and never
        # starts a reader of the host's queue of its own (issue 41).
        lock_dir = self.useFixture(fixtures.TempDir()).path
        holder = host_reader.Election(lock_dir, "h")
        self.assertTrue(holder.lead())
        self.addCleanup(holder.forget)
        proc = reader.ReaderProcess(
            "nova-drain-filters.h.shared",
            lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", "import time; time.sleep(30)"],
            election=host_reader.Election(lock_dir, "h"),
            own_pool="nova-drain-filters.h.0")
        thread = threading.Thread(target=proc.start, daemon=True)
        thread.start()
        time.sleep(10 * reader.FOLLOW_RETRY)
        self.assertEqual((0, None, False),
                         (proc.starts, proc.pid, proc.connected()))
        proc.stop()
        thread.join(5)
        self.assertFalse(thread.is_alive())
        self.assertEqual(0, proc.starts)

    def test_run_by_hand_it_says_what_it_is_for(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", reader.ENTRY], capture_output=True,
            text=True, timeout=60)
        self.assertEqual(2, done.returncode)
        lines = done.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), done.stderr)
        self.assertIn("a scheduler process starts this", lines[0])

    def test_a_parent_on_another_wire_gets_one_error_and_an_exit(
            self) -> None:
        # After an upgrade under a running scheduler, the parent runs the
        # code it loaded and starts the reader from what is installed.
        parent, child = socket.socketpair()
        self.addCleanup(parent.close)
        proc = subprocess.Popen(
            [sys.executable, "-m", reader.ENTRY, "--fd", str(child.fileno())],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait, 60)
        child.close()
        setup = reader.settings("pool")
        self.assertEqual(wire.VERSION, setup.pop("wire"))  # as before 2
        channel = wire.Channel(parent)
        channel.send(setup)
        got = []
        while True:
            try:
                got.append(channel.receive(60))
            except wire.ReaderGone:
                break
        self.assertEqual(3, proc.wait(60))
        assert proc.stderr is not None
        self.assertEqual("", proc.stderr.read())
        self.assertEqual([40], [m[1] for m in got if m[0] == "log"])
        self.assertIn("event wire is version 1, and the installed one's is "
                      f"{wire.VERSION}: restart nova-scheduler", got[-1][2])

    def test_an_older_reader_is_stopped_with_one_error(self) -> None:
        # A package rolled back under a running scheduler: the reader
        # installed sends wire 1's batches, (batch, seq, received,
        # dropped, events); it is neither misread nor started again.
        script = (
            "import pickle, socket, struct, sys, time\n"
            "s = socket.socket(fileno=int(sys.argv[-1]))\n"
            "for m in (('state', True), ('batch', 1, 1, 0, "
            "[('u', 't', False, None)])):\n"
            "    data = pickle.dumps(m)\n"
            "    s.sendall(struct.pack('>I', len(data)) + data)\n"
            "while s.recv(4096):\n"
            "    pass\n")
        got: list[Any] = []
        proc = reader.ReaderProcess(
            "pool", lambda *batch: got.append(batch) or (lambda: True),
            argv=[sys.executable, "-c", script])
        with mock.patch.object(reader.LOG, "error") as error:
            proc.start()
            assert proc._thread is not None
            proc._thread.join(20)
        self.addCleanup(proc.wait)
        self.assertFalse(proc._thread.is_alive())
        self.assertEqual((1, []), (proc.starts, got))
        self.assertFalse(proc.connected())
        error.assert_called_once()
        self.assertIn("batches of 5 fields, this scheduler process reads 6",
                      str(error.call_args[0][1]["error"]))

    def test_a_reader_that_keeps_dying_is_started_less_and_less_often(
            self) -> None:
        # The first reader connects and dies; those after it die before
        # they connect (say, an upgrade broke its imports).
        marks = self.useFixture(fixtures.TempDir()).path
        script = (
            "import os, pickle, socket, struct, sys, time\n"
            f"marks = {marks!r}\n"
            "n = len(os.listdir(marks))\n"
            "open(os.path.join(marks, str(n)), 'w').write(repr(time.time()))\n"
            "if n == 0:\n"
            "    s = socket.socket(fileno=int(sys.argv[-1]))\n"
            "    data = pickle.dumps(('state', True))\n"
            "    s.sendall(struct.pack('>I', len(data)) + data)\n"
            "    time.sleep(0.2)\n"
            "sys.exit(1)\n")
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.ironic_view.reader.RESTART_DELAY", 0.1))
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.ironic_view.reader.MAX_RESTART_DELAY", 0.4))
        proc = reader.ReaderProcess(
            "pool", lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", script])
        with mock.patch.object(reader.LOG, "warning") as warning:
            proc.start()
            deadline = time.monotonic() + 20
            while proc.starts < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.stop()
            proc.wait()
        self.assertGreaterEqual(proc.starts, 6)
        started = [float(open(os.path.join(marks, str(n))).read())
                   for n in range(6)]
        gaps = [b - a for a, b in zip(started, started[1:], strict=False)]
        # 0.1 s after the one that had connected, then 0.2, 0.4, 0.4 s
        # (the maximum) after those that never did; never sooner.
        delays = [c.args[1]["delay"] for c in warning.call_args_list][:5]
        self.assertEqual([0.1, 0.2, 0.4, 0.4, 0.4], delays)
        for gap, delay in zip(gaps, delays, strict=True):
            self.assertGreaterEqual(gap, delay)

    def test_no_interpreter_to_run_it_is_one_error(self) -> None:
        proc = reader.ReaderProcess(
            "pool", lambda latest, e, n, d: (lambda: True),
            argv=["/nonexistent/python"])
        error = self.assertRaises(RuntimeError, proc.start)
        self.assertIn("cannot run the event reader: [Errno 2]", str(error))
        self.assertIsNone(proc._thread)
