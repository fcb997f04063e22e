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

"""One reader for the host's scheduler processes, on a real broker.

Each ``Member`` is what one scheduler process runs: a
``reader.ReaderProcess`` with the host's election (``host_reader``). The
elected one starts the real reader process
(``python -m nova_drain_filters.event_reader``); the others connect to
its socket. ``flock`` locks belong to open files, not processes, so the
members of one test process elect among themselves as separate
processes do; the forked workers of a real ``nova-scheduler`` are in
tests/e2e.
"""
import os
import signal
import threading
import uuid
from collections.abc import Callable

import fixtures

from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import reader
from tests.functional.broker_case import BrokerTestBase


class Member:
    """One scheduler process's side: what it got, and when it applies."""

    def __init__(self, test: "HostReaderTest", own_pool: str,
                 shared_pool: str | None = None) -> None:
        self.got: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.election = host_reader.Election(test.lock_dir, "host-1")
        self.process = reader.ReaderProcess(
            shared_pool or test.pool, self.on_parsed,
            election=self.election, own_pool=own_pool)

    def on_parsed(self, latest: dict[str, notifications.Pending],
                  events: int, received: int, dropped: int
                  ) -> Callable[[], bool]:
        self.got.extend(value.node_uuid for value in latest.values()
                        if isinstance(value, notifications.NodeEvent))
        return self.release.is_set


class HostReaderTest(BrokerTestBase):

    def setUp(self) -> None:
        super().setUp()
        self.listen_here()
        self.lock_dir = self.useFixture(fixtures.TempDir()).path

    def member(self, own_pool: str | None = None,
               shared_pool: str | None = None) -> Member:
        member = Member(self, own_pool or f"{self.pool}.own",
                        shared_pool)
        member.process.start()  # returns once connected (or following)
        self.addCleanup(member.process.wait)
        self.addCleanup(member.process.stop)
        self.wait_for("a connected member", member.process.connected)
        return member

    def assertReaderYields(self, pid: int | None) -> None:
        """The reader runs ``READER_NICE`` above its parent process, also
        when it was started again from the parent's event thread, which
        runs ``THREAD_NICE`` above the process on native threads."""
        assert pid is not None
        self.assertEqual(
            min(19, os.getpriority(os.PRIO_PROCESS, os.getpid())
                + priority.READER_NICE),
            os.getpriority(os.PRIO_PROCESS, pid))

    def empty(self) -> bool:
        queue = self.queue()
        return (queue["messages_ready"],
                queue["messages_unacknowledged"]) == (0, 0)

    def test_one_reader_serves_every_process_and_acks_once_all_applied(
            self) -> None:
        leader, follower = self.member(), self.member()
        self.assertIsNotNone(leader.process.pid)
        self.assertFalse(leader.process.following)
        self.assertIsNone(follower.process.pid)
        self.assertTrue(follower.process.following)
        self.assertEqual(1, self.queue()["consumers"])
        follower.release.clear()
        nodes = [str(uuid.uuid4()) for _ in range(20)]
        self.publish(nodes)
        self.wait_for("20 events in both", lambda: (
            len(leader.got), len(follower.got)) == (20, 20))
        self.assertEqual(nodes, leader.got)
        self.assertEqual(nodes, follower.got)
        # The leader applied them; the follower has not: none is acked.
        self.wait_for("20 unacked", lambda: self.queue()[
            "messages_unacknowledged"] == 20)
        follower.release.set()
        self.wait_for("an empty queue", self.empty)

    def test_a_follower_takes_over_when_the_leader_stops(self) -> None:
        leader, follower = self.member(), self.member()
        first = leader.process.pid
        assert first is not None
        leader.process.stop()
        leader.process.wait()
        self.wait_for("the follower's own reader", lambda: (
            follower.process.pid is not None
            and follower.process.connected()), timeout=60)
        self.assertFalse(follower.process.following)
        self.assertNotEqual(first, follower.process.pid)
        self.assertReaderYields(follower.process.pid)
        nodes = [str(uuid.uuid4()) for _ in range(5)]
        self.publish(nodes)
        self.wait_for("5 events", lambda: follower.got == nodes)
        self.wait_for("an empty queue", self.empty)

    def test_a_killed_reader_is_replaced_and_followers_get_its_events(
            self) -> None:
        leader, follower = self.member(), self.member()
        leader.release.clear()
        nodes = [str(uuid.uuid4()) for _ in range(10)]
        self.publish(nodes)
        self.wait_for("10 events in both", lambda: (
            len(leader.got), len(follower.got)) == (10, 10))
        first = leader.process.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        # The leader holds the lock and starts the next reader, which
        # gets the unacked 10 again; the follower connects to it.
        self.wait_for("a new reader, followed", lambda: (
            leader.process.starts == 2 and leader.process.connected()
            and follower.process.follows == 2
            and follower.process.connected()), timeout=60)
        self.assertNotEqual(first, leader.process.pid)
        self.assertReaderYields(leader.process.pid)
        self.wait_for("the 10 again", lambda: leader.got == nodes + nodes)
        # The follower may have connected after they came again: what it
        # missed, its listener lists (it saw the reader go and come).
        leader.release.set()
        more = [str(uuid.uuid4()) for _ in range(5)]
        self.publish(more)
        self.wait_for("5 more in both", lambda: (
            leader.got[-5:], follower.got[-5:]) == (more, more))
        self.wait_for("an empty queue", self.empty)

    def test_a_late_follower_owes_only_what_came_after_it(self) -> None:
        leader = self.member()
        leader.release.clear()
        before = [str(uuid.uuid4()) for _ in range(5)]
        self.publish(before)
        self.wait_for("5 events", lambda: leader.got == before)
        follower = self.member()
        after = [str(uuid.uuid4()) for _ in range(5)]
        self.publish(after)
        self.wait_for("5 more", lambda: len(leader.got) == 10)
        self.wait_for("the follower's 5", lambda: follower.got == after)
        leader.release.set()
        self.wait_for("an empty queue", self.empty)

    def test_a_process_the_reader_refuses_reads_on_its_own(self) -> None:
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader"))
        leader = self.member()
        # Another pool than the reader's: not the same settings.
        own = f"{self.pool}.alone"
        other = self.member(own_pool=own, shared_pool=f"{self.pool}.x")
        self.wait_for("its own reader", lambda: (
            other.process.pid is not None and other.process.connected()),
            timeout=60)
        self.assertEqual(own, other.process.pool)
        self.assertNotEqual(leader.process.pid, other.process.pid)
        self.assertIn("will not serve this process", logged.output)
        self.assertIn("pool", logged.output)
        nodes = [str(uuid.uuid4()) for _ in range(3)]
        self.publish(nodes)
        self.wait_for("3 events in both", lambda: (
            leader.got, other.got) == (nodes, nodes))

    def test_two_processes_on_one_slot_queue_each_read_alone(self) -> None:
        """One queue per process, the default: two processes that came to
        read the same slot's queue (issue 41's CI run: two workers of one
        host on slot 0) find each other's consumer; a reader that sees
        another stops, its process reads a queue only it names, and each
        process hears every event."""
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader"))
        got: tuple[list[str], list[str]] = ([], [])
        processes = []
        for number, mine in enumerate(got):
            def on_parsed(latest: dict[str, notifications.Pending],
                          events: int, received: int, dropped: int,
                          mine: list[str] = mine) -> Callable[[], bool]:
                mine.extend(value.node_uuid for value in latest.values()
                            if isinstance(value, notifications.NodeEvent))
                return lambda: True
            # Each process names its own (a scheduler's is its PID's).
            process = reader.ReaderProcess(
                self.pool, on_parsed, own_pool=f"{self.pool}.pid-{number}")
            process.start()
            self.addCleanup(process.wait)
            self.addCleanup(process.stop)
            processes.append(process)
        self.wait_for("each on a queue of its own", lambda: (
            len({p.pool for p in processes}) == 2
            and all(p.connected() for p in processes)), timeout=60)
        self.assertIn("Another Ironic event reader reads this reader's queue",
                      logged.output)
        self.assertLessEqual(self.queue()["consumers"], 1)
        nodes = [str(uuid.uuid4()) for _ in range(3)]
        self.publish(nodes)
        self.wait_for("3 events in both", lambda: got == (nodes, nodes))

    def test_a_second_reader_of_the_hosts_queue_stops_and_reads_alone(
            self) -> None:
        """However a second reader of the host's queue came to start (one
        that does not hold the lock, issue 41), it finds the first one's
        consumer there, says so and stops reading it; its process reads a
        queue of its own, and each process hears every event."""
        logged = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.ironic_view.reader"))
        leader = self.member()
        # Another lock directory: this election cannot see the leader's
        # lock, as a reader that does not hold it cannot be seen.
        self.lock_dir = self.useFixture(fixtures.TempDir()).path
        own = f"{self.pool}.alone"
        second = self.member(own_pool=own)
        self.wait_for("its own reader", lambda: (
            second.process.pool == own and second.process.connected()),
            timeout=60)
        self.assertFalse(second.process.following)
        self.assertEqual(1, self.queue()["consumers"])
        self.assertIn("Another Ironic event reader reads this reader's queue",
                      logged.output)
        self.assertIn("besides this reader", logged.output)
        nodes = [str(uuid.uuid4()) for _ in range(3)]
        self.publish(nodes)
        self.wait_for("3 events in both", lambda: (
            leader.got, second.got) == (nodes, nodes))
