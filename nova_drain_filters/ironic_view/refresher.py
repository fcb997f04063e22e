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

"""The threads behind the Ironic view: refresher, watchdog, fork handling.

Two daemon threads per scheduler process:

* the refresher lists Ironic every ``baremetal_refresh_interval`` seconds;
* the watchdog restarts a refresher that died, with a backoff (never once
  per request), and gives up on a listing that has had no page for twice
  the read timeout (a server that trickles bytes never trips a socket
  timeout): the hung thread is abandoned, its late result dropped, and a
  fresh refresher with fresh connections takes over.

Nova's scheduler loads the filters in the parent process and forks its
workers from it (``nova/cmd/scheduler.py``; oslo.service's threading
backend forks through cotyledon and ``multiprocessing``'s fork context,
``oslo_service/backend/_threading/service.py``). Threads do not survive a
fork, so ``os.register_at_fork`` restarts the threads in each child at
once, before any request, and parks them in the parent, which serves none.
"""
import os
import sys
import threading
from collections.abc import Callable

from oslo_config import cfg
from oslo_log import log as logging

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

REFRESH_THREAD = "drain-ironic-refresh"
WATCHDOG_THREAD = "drain-ironic-watchdog"
#: How often the watchdog looks, in seconds.
WATCH_PERIOD = 1.0
#: Backoff between restarts of a refresher that died: doubles up to the max.
BACKOFF_MIN = 1.0
BACKOFF_MAX = 300.0
#: A thread that has not beaten for this long past its period is dead.
STALE_BEAT = 10.0


def _nothing() -> None:
    """The default of a hook the owner does not need."""


def green_hub() -> object | None:
    """The eventlet hub this thread runs on; None on native threads.

    Threads are green only in a process Nova monkey-patched
    (``nova/monkey_patch.py``). On native threads (Nova 34's scheduler,
    ``OS_NOVA_DISABLE_EVENTLET_PATCHING``) eventlet is not imported here,
    nor may it be: Nova 33 and 34 poison its import.
    oslo.service's eventlet backend replaces the hub in each forked worker
    (``eventlet.hubs.use_hub()`` in ``ProcessLauncher._child_process``,
    ``oslo_service/backend/_eventlet/service.py``) after the fork hooks ran:
    green threads started on the old hub never run again, though
    ``is_alive()`` says True.
    """
    patcher = sys.modules.get("eventlet.patcher")
    # Nova 32 imports eventlet even on native threads (poison_eventlet):
    # only a patched ``thread`` makes our threads green.
    if patcher is None or not patcher.is_monkey_patched("thread"):
        return None
    return sys.modules["eventlet.hubs"].get_hub()


class Refresher:
    """Threads that run one listing periodically, for the view that owns it.

    The owner passes what a listing is and what to do at the edges:

    * ``listing(generation)`` lists once and returns True if the snapshot
      was replaced; a listing must drop its result when ``is_current``
      says its generation was given up;
    * ``forget_connections()`` drops HTTP connections (after a fork or a
      hung listing);
    * ``started()`` runs when this process's threads start afresh (a first
      start, after a fork, after a stop): the event listener starts there;
    * ``forked()`` runs in a forked child, after the refresher forgot the
      parent's threads;
    * ``parked()`` runs in a parent that forked, as it parks its threads:
      the event listener stops there.
    """

    def __init__(
        self,
        listing: Callable[[int], bool],
        clock: Callable[[], float],
        forget_connections: Callable[[], None] = _nothing,
        started: Callable[[], None] = _nothing,
        forked: Callable[[], None] = _nothing,
        parked: Callable[[], None] = _nothing,
    ) -> None:
        self._listing = listing
        self._forget_connections = forget_connections
        self._started = started
        self._forked = forked
        self._parked = parked
        self._clock = clock
        self._refresh_lock = threading.Lock()
        self._thread_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._pid: int | None = None
        #: The eventlet hub the threads were started on (None: native).
        self._hub: object | None = None
        #: Listings of an older generation are dropped when they finish.
        self._generation = 0
        #: When this process's refresher first started: bounds the wait.
        self._running_since: float | None = None
        #: Set when a listing has finished (well or not) in this process.
        self._first_attempt = threading.Event()
        #: Started by start() (Nova loaded the filters): restart after fork.
        self.wanted = False
        #: The read timeout of the Ironic requests; the watchdog allows a
        #: listing twice that between two pages.
        self.read_timeout = 30.0
        self._listing_since: float | None = None
        self._progress_at = 0.0
        #: Heartbeats: the refresher's (between listings) and watchdog's.
        self._run_beat = 0.0
        self._watch_beat = 0.0
        self._watch_token = 0
        self._restart_at = 0.0
        self._backoff = BACKOFF_MIN
        #: Refreshers restarted by the watchdog, for logs and tests.
        self.restarts = 0

    # what the owner reads ----------------------------------------------------

    def is_current(self, generation: int) -> bool:
        """False once the watchdog gave up on listings of ``generation``."""
        return generation == self._generation

    @property
    def first_attempt(self) -> threading.Event:
        """Set when a listing has finished (well or not) in this process."""
        return self._first_attempt

    @property
    def running_since(self) -> float | None:
        """When this process's refresher started: bounds the start-up wait."""
        return self._running_since

    # one listing -----------------------------------------------------------

    def refresh(self) -> bool:
        """List all nodes and swap the snapshot in; False if it did not.

        Single-flight: returns False at once if a refresh is under way.
        """
        lock = self._refresh_lock
        if not lock.acquire(blocking=False):
            return False
        generation = self._generation
        self._listing_since = self._progress_at = self._clock()
        try:
            done = self._listing(generation)
        finally:
            if generation == self._generation:
                self._listing_since = None
            lock.release()
        if done:
            self._backoff = BACKOFF_MIN
        return done

    def progress(self) -> None:
        """A page arrived: the listing is alive."""
        self._progress_at = self._clock()

    # threads ---------------------------------------------------------------

    def start(self) -> None:
        """Start refreshing in this process and after every fork of it."""
        self.wanted = True
        self.ensure_running()

    def ensure_running(self) -> None:
        """Make sure the watchdog runs in this process; cheap when it does.

        Starts the refresher only the first time in a process; after that
        the watchdog restarts it, with a backoff, so a refresher that keeps
        dying costs one listing per backoff period, not one per request.
        A thread counts as running only while it beats: under eventlet a
        green thread can outlive its hub (oslo.service's eventlet backend
        calls ``eventlet.hubs.use_hub()`` in each forked child) and never
        run again while ``is_alive()`` still says True.
        """
        if self._pid == os.getpid() and self._watchdog_beating():
            return
        with self._thread_lock:
            pid = os.getpid()
            if self._pid == pid and self._watchdog_beating():
                return
            if self._pid is not None and self._pid != pid:
                self._reset_after_fork()
            hub = green_hub()
            if self._hub is not hub and self._watchdog is not None:
                # The hub was replaced under our green threads (a worker
                # oslo.service forked): they never run again. Start afresh.
                self._reset_threads()
            self._hub = hub
            self._pid = pid
            if self._running_since is None:
                self._running_since = self._clock()
            if self._stop.is_set():
                # Stopped, or parked by a fork: start afresh, and let a
                # request without a trusted snapshot wait for the listing.
                self._stop = threading.Event()
                self._first_attempt = threading.Event()
                self._running_since = self._clock()
                self._start_refresher()
            elif not self._refresher_beating(self._clock()):
                self._start_refresher()
            self._start_watchdog()
            self._started()

    def _watchdog_beating(self) -> bool:
        watchdog = self._watchdog
        return watchdog is not None and watchdog.is_alive() and (
            self._hub is green_hub()) and (
            self._clock() - self._watch_beat <= STALE_BEAT + WATCH_PERIOD)

    def _refresher_beating(self, now: float) -> bool:
        thread = self._thread
        if thread is None or not thread.is_alive():
            return False
        if self._listing_since is not None:
            return True  # the stall check judges a listing
        interval = CONF.drain_filters.baremetal_refresh_interval
        return now - self._run_beat <= interval + STALE_BEAT

    def _start_refresher(self) -> None:
        self._generation += 1
        self._run_beat = self._clock()
        self._thread = threading.Thread(
            target=self._run, args=(self._stop, self._generation),
            name=REFRESH_THREAD, daemon=True)
        self._thread.start()

    def _start_watchdog(self) -> None:
        self._watch_token += 1
        self._watch_beat = self._clock()
        self._watchdog = threading.Thread(
            target=self._watch, args=(self._stop, self._watch_token),
            name=WATCHDOG_THREAD, daemon=True)
        self._watchdog.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both threads (for tests, shutdown and the parent of a fork)."""
        self._stop.set()
        for thread in (self._thread, self._watchdog):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
        self._thread = self._watchdog = None

    def _run(self, stop: threading.Event, generation: int) -> None:
        while not stop.is_set() and generation == self._generation:
            try:
                self.refresh()
            except Exception:
                LOG.exception("Ironic refresh raised")
            finally:
                self._first_attempt.set()
            if generation != self._generation:
                return  # the watchdog gave up on this thread
            self._run_beat = self._clock()
            stop.wait(CONF.drain_filters.baremetal_refresh_interval)

    def _watch(self, stop: threading.Event, token: int) -> None:
        while token == self._watch_token:
            self._watch_beat = self._clock()
            if stop.wait(WATCH_PERIOD) or token != self._watch_token:
                return
            try:
                self.check()
            except Exception:
                LOG.exception("Ironic refresh watchdog failed a check")

    def check(self) -> None:
        """One watchdog round: restart a dead or hung refresher."""
        now = self._clock()
        since = self._listing_since
        limit = 2 * self.read_timeout
        if since is not None and now - self._progress_at > limit:
            LOG.error("An Ironic listing has had no answer for %(s).0fs "
                      "(twice the %(t).0fs read timeout); abandoning it and "
                      "starting a new refresher",
                      {"s": now - self._progress_at, "t": self.read_timeout})
            with self._thread_lock:
                self._generation += 1
                self._listing_since = None
                self._refresh_lock = threading.Lock()
                self._forget_connections()
                self._thread = None
                self._first_attempt.set()
        thread = self._thread
        if self._refresher_beating(now):
            return
        if now < self._restart_at or self._stop.is_set():
            return
        with self._thread_lock:
            if thread is not None:
                LOG.warning("The Ironic refresher stopped; restarting it "
                            "(next restart no sooner than %.0fs)",
                            self._backoff)
            self.restarts += 1
            self._restart_at = now + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX)
            self._start_refresher()

    # fork ------------------------------------------------------------------

    def _reset_after_fork(self) -> None:
        """Forget what belonged to the parent: threads, locks, connections.

        A snapshot the parent had is kept but the start-up wait starts over,
        so a worker waits for its own first listing.
        """
        self._refresh_lock = threading.Lock()
        self._thread_lock = threading.Lock()
        self._reset_threads()
        self._pid = None
        self._forget_connections()
        self._forked()

    def _reset_threads(self) -> None:
        """Forget threads that will never run again; a listing starts over."""
        self._stop = threading.Event()
        self._thread = self._watchdog = None
        # Under eventlet the parent's green threads live on in the child:
        # a new generation and token make them exit.
        self._generation += 1
        self._watch_token += 1
        self._listing_since = None
        self._first_attempt = threading.Event()
        self._running_since = self._clock()
        self._restart_at = 0.0
        self._backoff = BACKOFF_MIN

    def after_fork_in_child(self) -> None:
        """Restart in a forked worker, if the parent was started."""
        self._reset_after_fork()
        if self.wanted:
            self.ensure_running()

    def after_fork_in_parent(self) -> None:
        """Park the threads of a parent that forked: a request restarts them."""
        if self._pid == os.getpid():
            self._stop.set()
            self._parked()


_hooks_installed = False


def install_fork_hooks(
    current: Callable[[], Refresher | None], reset: Callable[[], None]
) -> None:
    """Register the fork hooks once per process (a module import)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True

    def in_child() -> None:
        try:
            reset()
            refresher = current()
            if refresher is not None:
                refresher.after_fork_in_child()
        except Exception:
            LOG.exception("Could not restart the Ironic refresher after fork")

    def in_parent() -> None:
        try:
            refresher = current()
            if refresher is not None and refresher.wanted:
                refresher.after_fork_in_parent()
        except Exception:
            LOG.exception("Could not park the Ironic refresher after fork")

    os.register_at_fork(after_in_child=in_child, after_in_parent=in_parent)
