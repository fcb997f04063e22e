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

"""The Ironic view's threads: start, restart with backoff, watchdog, fork."""
import json
import os
import signal
import threading
import time
from unittest import mock

import fixtures

from nova_drain_filters import ironic_view
from nova_drain_filters.ironic_view import refresher
from tests.unit import unpatched
from tests.unit.ironic_view import helpers

REFRESH = refresher.REFRESH_THREAD
WATCHDOG = refresher.WATCHDOG_THREAD


def _kill_if_alive(pid: int) -> None:
    """Kill and reap a forked child the test did not see exit."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return  # reaped already
    if done == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


class Die(BaseException):
    """Kills the refresher thread (what an OverflowError in wait did)."""


class ThreadTestCase(helpers.ViewTestCase):
    def setUp(self) -> None:
        super().setUp()
        # The tests run the watchdog's rounds by hand with the fake clock.
        self.useFixture(fixtures.MockPatchObject(
            refresher, "WATCH_PERIOD", 3600))
        self.useFixture(fixtures.MockPatch("threading.excepthook"))
        self.others = set(threading.enumerate())

    def ours(self) -> list[threading.Thread]:
        """This test's refresher and watchdog threads that are alive."""
        return [t for t in threading.enumerate()
                if t.name in (REFRESH, WATCHDOG) and t.is_alive()
                and t not in self.others]

    def wait_for(self, predicate: object, what: str) -> None:
        deadline = time.monotonic() + 10
        while not predicate():  # type: ignore[operator]
            if time.monotonic() > deadline:
                self.fail(f"timed out waiting for {what}")
            time.sleep(0.01)


class TestStart(ThreadTestCase):
    def test_start_runs_both_threads_once(self) -> None:
        before = set(self.ours())
        self.view.start()
        started = [t for t in self.ours() if t not in before]
        self.assertEqual({REFRESH, WATCHDOG}, {t.name for t in started})
        self.assertTrue(all(t.daemon for t in started))
        self.assertTrue(self.view.refresher.wanted)
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        for _ in range(5):
            self.view.ensure_running()
        self.assertEqual(set(started), set(self.ours()) - before)
        self.assertEqual(1, len(self.client.page_sizes))

    def test_stop(self) -> None:
        self.view.stop()  # nothing to stop yet
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        threads = self.ours()
        self.view.stop()
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertIsNotNone(self.view.trusted())
        self.view.ensure_running()
        self.assertEqual(2, len(self.ours()))

    def test_a_watchdog_that_stopped_beating_is_replaced(self) -> None:
        # A green thread whose hub was replaced after a fork is "alive" and
        # never runs again; only its heartbeat tells.
        self.view.start()
        old = self.view.refresher._watchdog
        self.view.ensure_running()
        self.assertIs(old, self.view.refresher._watchdog)
        self.clock.advance(refresher.STALE_BEAT
                           + refresher.WATCH_PERIOD + 1)
        self.view.ensure_running()
        self.assertIsNot(old, self.view.refresher._watchdog)
        self.assertTrue(self.view.refresher._watchdog.is_alive())

    def test_set_view_stops_the_old_view(self) -> None:
        self.addCleanup(ironic_view.set_view, ironic_view.set_view(None))
        fresh = ironic_view.get_view()
        self.assertIsInstance(fresh, ironic_view.IronicView)
        self.assertIs(fresh, ironic_view.get_view())
        self.assertIs(fresh, ironic_view.set_view(self.view))
        self.view.start()
        threads = self.ours()
        self.assertIs(self.view, ironic_view.set_view(self.view))
        self.assertTrue(all(t.is_alive() for t in threads))
        other = self.new_view()
        self.assertIs(self.view, ironic_view.set_view(other))
        for thread in threads:
            thread.join(10)
        self.assertEqual([], self.ours())
        self.assertIs(other, ironic_view.get_view())


class TestRestartWithBackoff(ThreadTestCase):
    def test_a_dead_refresher_is_restarted_with_backoff(self) -> None:
        # Issue 14 item 4: ensure_running() restarted a dead refresher on
        # each call, "3 full listings in 3 calls".
        self.client.error = Die()
        self.view.start()
        self.wait_for(lambda: not self.view.refresher._thread.is_alive(), "the death")
        self.assertEqual(1, len(self.client.page_sizes))
        for _ in range(3):
            self.view.ensure_running()
        self.assertEqual(1, len(self.client.page_sizes))

        listings = []
        for step in (0, 0, 0.5, 0.5, 1, 1, 2, 4):
            self.clock.advance(step)
            self.view.refresher.check()
            self.wait_for(lambda: not self.view.refresher._thread.is_alive(),
                          "the death")
            listings.append(len(self.client.page_sizes))
        # Restarts at t=0, 1, 3, 7: backoff 1, 2, 4 seconds.
        self.assertEqual([2, 2, 2, 3, 3, 4, 4, 5], listings)
        self.assertIn("The Ironic refresher stopped; restarting it",
                      self.log.output)

        self.client.error = None
        self.clock.advance(8)
        self.view.refresher.check()
        self.wait_for(lambda: self.view.refreshes == 1, "a good listing")
        # refresh() resets the backoff after the listing has swapped the
        # snapshot in, so wait for that too rather than read it in between.
        self.wait_for(
            lambda: self.view.refresher._backoff == refresher.BACKOFF_MIN,
            "the backoff to reset after a good listing")

    def test_backoff_is_capped(self) -> None:
        self.client.error = Die()
        self.view.refresher._backoff = refresher.BACKOFF_MAX
        self.view.refresher.check()
        self.assertEqual(refresher.BACKOFF_MAX, self.view.refresher._backoff)

    def test_a_stopped_view_is_not_restarted(self) -> None:
        self.view.start()
        self.view.stop()
        self.clock.advance(100)
        self.view.refresher.check()
        self.assertEqual([], self.ours())


class TestWatchdog(ThreadTestCase):
    def test_a_hung_listing_is_abandoned(self) -> None:
        # Issue 14 item 5: with [ironic] timeout unset a hung request kept
        # the refresher alive, and the snapshot untrusted, for ever.
        self.client.block = threading.Event()
        self.addCleanup(self.client.block.set)
        self.view.start()
        self.assertTrue(self.client.entered.wait(10))
        hung = self.view.refresher._thread
        self.assertEqual(30.0, self.view.refresher.read_timeout)
        self.clock.advance(60)
        self.view.refresher.check()
        self.assertIs(hung, self.view.refresher._thread)  # not yet: 2 x 30s
        self.clock.advance(1)
        self.view.refresher.check()
        self.assertIsNot(hung, self.view.refresher._thread)
        self.assertIn("An Ironic listing has had no answer for 61s (twice "
                      "the 30s read timeout); abandoning it", self.log.output)
        self.wait_for(lambda: len(self.client.page_sizes) == 2,
                      "the new refresher's listing")
        self.assertEqual(2, self.made)  # fresh connections
        self.client.block.set()
        self.wait_for(lambda: "Dropping an Ironic listing" in self.log.output,
                      "the late listing to be dropped")
        self.wait_for(lambda: self.view.refreshes == 1, "the new listing")
        hung.join(10)
        self.assertFalse(hung.is_alive())

    def test_a_slow_listing_that_moves_is_left_alone(self) -> None:
        self.view.refresher._listing_since = self.clock()
        self.view.refresher._progress_at = self.clock()
        self.view.refresher._thread = thread = threading.Thread(target=time.sleep,
                                                      args=(0.5,))
        thread.start()
        self.clock.advance(50)
        self.view.refresher.progress()
        self.clock.advance(50)
        self.view.refresher.check()
        self.assertIs(thread, self.view.refresher._thread)
        thread.join()


class TestFork(ThreadTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.addCleanup(ironic_view.set_view, ironic_view.set_view(self.view))

    def test_child_hook_restarts_without_a_request(self) -> None:
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        parent_threads = self.ours()
        # A real fork leaves the parent's threads behind; here they live on.
        self.addCleanup(self.view.refresher._stop.set)
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.ironic_view.refresher.os.getpid",
            return_value=os.getpid() + 1))
        self.clock.advance(3)
        self.view.refresher.after_fork_in_child()
        child_threads = [t for t in self.ours() if t not in parent_threads]
        self.assertEqual({REFRESH, WATCHDOG}, {t.name for t in child_threads})
        self.assertEqual(1003.0, self.view.refresher._running_since)
        self.wait_for(lambda: self.view.refreshes == 2, "the child's listing")
        self.assertEqual(2, self.made)  # the parent's connections dropped

    def test_a_child_waits_for_its_own_listing(self) -> None:
        """The parent's snapshot is young enough to trust, yet a forked
        worker's first request waits for the worker's own listing: the
        parent, parked since it forked, heard no event since (found on
        the real cloud, tests/e2e: a replaced worker decided on it)."""
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        self.addCleanup(self.view.refresher._stop.set)
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.ironic_view.refresher.os.getpid",
            return_value=os.getpid() + 1))
        self.clock.advance(3)
        self.assertIsNotNone(self.view.trusted())
        self.client.hook = lambda: time.sleep(0.3)  # a listing takes time
        self.view.refresher.after_fork_in_child()
        self.view.wait_until_ready()
        self.assertEqual(2, self.view.refreshes)

    def test_a_view_never_started_is_not_started_by_a_fork(self) -> None:
        self.view.refresher.after_fork_in_child()
        self.assertEqual([], self.ours())

    def test_real_fork(self) -> None:
        """os.fork(): the child lists on its own, the parent parks."""
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        parent = (self.view.refresher._thread, self.view.refresher._watchdog)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report and leave without cleanup
            status = 1
            try:
                os.close(read_end)
                deadline = time.monotonic() + 10
                while (self.view.refreshes < 2
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                # Under eventlet (Nova's test modules patch) the parent's
                # green threads are copied too; they must be other threads.
                mine = (self.view.refresher._thread, self.view.refresher._watchdog)
                report = {"refreshes": self.view.refreshes,
                          "threads": [t.name for t in mine
                                      if t is not None and t.is_alive()
                                      and t not in parent],
                          "pid": self.view.refresher._pid == os.getpid()}
                unpatched.module("os").write(
                    write_end, json.dumps(report).encode())
                status = 0
            finally:
                os._exit(status)
        # A child that never reports must not outlive the test: its
        # stdout is the test runner's.
        self.addCleanup(_kill_if_alive, pid)
        os.close(write_end)
        self.addCleanup(os.close, read_end)
        ready, _, _ = unpatched.module("select").select(
            [read_end], [], [], 20)
        self.assertTrue(ready, "the child did not report")
        report = json.loads(unpatched.module("os").read(read_end, 4096))
        _, status = os.waitpid(pid, 0)
        self.assertEqual(0, status)
        self.assertEqual({"refreshes": 2, "threads": [REFRESH, WATCHDOG],
                          "pid": True}, report)
        # The parent serves no request: its threads are parked...
        self.wait_for(lambda: not self.ours(), "the parent to park")
        self.assertEqual(1, self.view.refreshes)
        # ...until one comes.
        self.view.ensure_running()
        self.assertEqual({REFRESH, WATCHDOG}, {t.name for t in self.ours()})

    def test_a_parked_parent_stops_listening_to_events(self) -> None:
        # nova-scheduler's parent loads the filters, forks its workers and
        # serves nothing: its event listener (and its reader process, a
        # third child beside the workers) must go as its threads park.
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        listener = mock.Mock()
        listener.park.side_effect = lambda: threading.Thread(
            target=listener.stop, daemon=True).start()
        self.view._events = listener
        self.view.refresher.after_fork_in_parent()
        self.wait_for(lambda: listener.stop.called, "the listener to stop")
        listener.park.assert_called_once_with()
        self.wait_for(lambda: not self.ours(), "the threads to park")

    def test_a_child_does_not_stop_listening(self) -> None:
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        self.addCleanup(self.view.refresher._stop.set)
        listener = mock.Mock()
        self.view._events = listener
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.ironic_view.refresher.os.getpid",
            return_value=os.getpid() + 1))
        self.view.refresher.after_fork_in_parent()  # not the starting pid
        listener.park.assert_not_called()

    def test_a_parked_view_waits_for_its_new_listing(self) -> None:
        # Something in a serving process forked: the threads parked, the
        # snapshot aged. The next request restarts them and waits.
        self.conf.config(group="drain_filters", baremetal_startup_wait=5)
        self.view.start()
        self.wait_for(lambda: self.view.refreshes == 1, "the first listing")
        self.view.refresher.after_fork_in_parent()
        self.wait_for(lambda: not self.ours(), "the threads to park")
        self.clock.advance(121)
        self.assertIsNone(self.view.trusted())
        self.client.hook = lambda: self.clock.advance(1)
        self.view.wait_until_ready()
        self.assertEqual(2, self.view.refreshes)
        self.assertIsNotNone(self.view.trusted())
