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

"""A cached view of Ironic's nodes that the scheduler reads without I/O.

A refresher thread per scheduler process lists the nodes every
``[drain_filters] baremetal_refresh_interval`` seconds (paginated
``GET /v1/nodes`` with only the needed fields) and swaps the snapshot in
whole; the filters only read it. The refresher starts when Nova loads the
filters and again in each worker Nova forks (``ironic_refresher``); a
request that finds no snapshot yet waits for the first listing for at most
``baremetal_startup_wait`` seconds.

Failure policy: a failed refresh keeps the last good snapshot; once that is
older than ``baremetal_max_snapshot_age`` (derived from the mode when
unset; in event mode a healthy listener connection keeps it young) it is
not trusted and ``baremetal_failure_mode`` decides. A listing that lacks too many of the
Ironic nodes Nova knows (``ironic_missing_max_fraction``) is not believed
about missing nodes either. Nothing from Ironic is ever raised into the
scheduler.
"""
import datetime
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import TYPE_CHECKING

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters import ironic_credentials
from nova_drain_filters import ironic_refresher
from nova_drain_filters import ironic_snapshot
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic

if TYPE_CHECKING:
    from nova_drain_filters import ironic_events

#: The snapshot type, here too for callers and tests that knew it here.
Snapshot = ironic_snapshot.Snapshot

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: A node counts as known to Nova for this long after a request last
#: offered it (two windows are kept, so between one and two hours).
KNOWN_WINDOW = 3600.0


def _default_client() -> ironic.IronicClient:
    # The [ironic] section Nova's Ironic driver uses (nova/conf/ironic.py).
    return ironic.IronicClient(
        http.adapter_from_conf(CONF, "ironic", "baremetal"),
        default_timeout=ironic.DEFAULT_READ_TIMEOUT)


class IronicView(ironic_snapshot.Patches, ironic_refresher.Refresher):
    """The latest trusted snapshot, its refresher and its failure state."""

    def __init__(
        self,
        client_factory: Callable[[], ironic.IronicClient] = _default_client,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        ironic_refresher.Refresher.__init__(self, clock)
        ironic_snapshot.Patches.__init__(self)
        self._client_factory = client_factory
        self._client: ironic.IronicClient | None = None
        self._first_seen: dict[str, float] = {}
        #: Ironic node UUIDs requests offered: this window and the last.
        self._known: set[str] = set()
        self._known_before: set[str] = set()
        self._known_since = clock()
        self._verdict: tuple[object, int, decisions.ListingVerdict] | None = (
            None)
        self._verdict_logged: object = None
        self._policy_logged_at: float | None = None
        self._startup_logged = False
        #: The last refresh error, None after a success.
        self.last_error: str | None = None
        self.refreshes = 0
        self._events: ironic_events.EventListener | None = None

    # refreshing ----------------------------------------------------------

    def _refresh(self, generation: int) -> bool:
        started = self._clock()
        started_wall = datetime.datetime.now(datetime.timezone.utc)
        try:
            if self._client is None:
                self._client = self._client_factory()
                self.read_timeout = float(getattr(
                    self._client, "read_timeout", None)
                    or ironic.DEFAULT_READ_TIMEOUT)
            client = self._client
            before = client.requests
            nodes: dict[str, decisions.IronicNodeFacts] = {}
            page_size = CONF.drain_filters.baremetal_page_size
            for page in client.iter_node_pages(page_size):
                self.progress()
                nodes.update((n.uuid, n) for n in page)
            requests = client.requests - before
            snap = Snapshot(nodes, started, self._clock(), requests,
                            started_wall)
        except Exception as exc:  # never let Ironic's trouble escape
            if generation == self._generation:
                self.last_error = str(exc)
            LOG.error("Ironic node refresh failed, keeping the snapshot from "
                      "%(age)s: %(error)s",
                      {"age": self._age_text(), "error": exc})
            return False
        if generation != self._generation:
            LOG.warning("Dropping an Ironic listing that finished after the "
                        "watchdog gave up on it")
            return False
        self._install(snap)
        self.last_error = None
        self.refreshes += 1
        if self.refreshes == 1:
            self._check_credentials(client)
        LOG.debug("Ironic snapshot refreshed: %(n)d nodes in %(r)d requests "
                  "(%(u)d unusable)",
                  {"n": len(nodes), "u": len(snap.unusable), "r": requests})
        return True

    def _check_credentials(self, client: ironic.IronicClient) -> None:
        """Warn once if the token cannot list every node (no request)."""
        try:
            access = ironic_credentials.token_of(
                getattr(client, "adapter", None))
            problem = (ironic_credentials.scope_problem(access)
                       if access is not None else None)
        except Exception as exc:
            LOG.debug("Could not read the [ironic] token's scope: %s", exc)
            return
        if problem:
            LOG.warning("The Ironic listing may be partial: %s", problem)

    def _forget_connections(self) -> None:
        self._client = None

    def _start_watchdog(self) -> None:
        # The slow path of ensure_running: a first start in this process,
        # after a fork, or after a stop. The listener starts beside it.
        super()._start_watchdog()
        self._start_events()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the refresher, its watchdog and the event listener."""
        super().stop(timeout)
        self._stop_events(timeout)

    def _reset_after_fork(self) -> None:
        super()._reset_after_fork()
        self._startup_logged = False
        # Held by another thread at the fork, the copy stays held for good.
        self._event_lock = threading.Lock()
        if self._events is not None:  # the parent's connection, not ours
            self._events.healthy_at = None

    def _age_text(self) -> str:
        if self._snapshot is None:
            return "never (no snapshot yet)"
        return f"{self._clock() - self._snapshot.finished_at:.0f}s ago"

    # waiting for the first listing ---------------------------------------

    def wait_until_ready(self) -> None:
        """Once per request: make sure the refresher runs; if this process
        has no trusted snapshot and no listing has finished since its
        refresher started, wait for one, but not past
        ``baremetal_startup_wait`` seconds after that start. Then the
        failure policy applies (logged once).
        """
        self.ensure_running()
        first = self._first_attempt
        if self.trusted() is not None:
            return
        wait = CONF.drain_filters.baremetal_startup_wait
        if not first.is_set():
            since = self._running_since
            remaining = (since if since is not None else self._clock()) + (
                wait - self._clock())
            if remaining > 0:
                first.wait(remaining)
        if self._startup_logged or self._snapshot is not None:
            return
        self._startup_logged = True
        LOG.error("No Ironic listing yet, up to %(wait)ss after the "
                  "refresher started (last error: %(error)s); "
                  "baremetal_failure_mode=%(mode)s applies until one "
                  "arrives",
                  {"wait": wait,
                   "error": self.last_error or "none, still listing",
                   "mode": CONF.drain_filters.baremetal_failure_mode})

    # reading -------------------------------------------------------------

    def trusted(self) -> Snapshot | None:
        """The snapshot if it is young enough to decide on, else None.

        Its age runs from the last listing or from when the event
        listener's connection was last seen up and caught up
        (``healthy_at``), whichever is later: a quiet cloud sends no events.
        """
        snap = self._snapshot
        if snap is None:
            return None
        fresh_at = snap.finished_at
        healthy_at = self._events.healthy_at if self._events else None
        if healthy_at is not None and healthy_at > fresh_at:
            fresh_at = healthy_at
        max_age = drain_conf.max_snapshot_age(CONF.drain_filters)
        return None if self._clock() - fresh_at > max_age else snap

    def seen(self, node_uuid: str) -> float:
        """Remember when the scheduler first saw this node; return that."""
        self.observe((node_uuid,))
        return self._first_seen[node_uuid]

    def observe(self, node_uuids: Iterable[str]) -> None:
        """Note the Ironic nodes one request offered: Nova knows them.

        "The Ironic compute nodes Nova knows" is, on the scheduler side,
        what placement offered this process's requests over the last one to
        two ``KNOWN_WINDOW``. Placement offers free nodes only, so this is
        a lower bound: enough to see that a listing lacks most of them.
        """
        now = self._clock()
        if now - self._known_since > KNOWN_WINDOW:
            self._known_before, self._known = self._known, set()
            self._known_since = now
        first_seen, known = self._first_seen, self._known
        for uuid in node_uuids:
            if uuid not in known:
                known.add(uuid)
                first_seen.setdefault(uuid, now)

    def listing_verdict(self, snap: Snapshot) -> decisions.ListingVerdict:
        """The blast-radius verdict on ``snap`` over the nodes Nova knows.

        Cached per snapshot and number of known nodes; logged once per
        snapshot when it is not trusted.
        """
        size = len(self._known) + len(self._known_before)
        cached = self._verdict
        if cached is not None and cached[0] is snap and cached[1] == size:
            return cached[2]
        verdict = decisions.listing_verdict(
            self._known | self._known_before, snap.nodes,
            CONF.drain_filters.ironic_missing_max_fraction)
        self._verdict = (snap, size, verdict)
        if not verdict.trusted and self._verdict_logged is not snap:
            self._verdict_logged = snap
            LOG.error("Not believing the Ironic listing about missing nodes: "
                      "%(verdict)s ([drain_filters] "
                      "ironic_missing_max_fraction); the missing-node rule "
                      "is off and baremetal_failure_mode=%(mode)s applies "
                      "to unlisted nodes. Do the [ironic] credentials see "
                      "every node (a system-scoped reader token)?",
                      {"verdict": verdict,
                       "mode": CONF.drain_filters.baremetal_failure_mode})
        return verdict

    def availability_reasons(self, node_uuid: str) -> list[decisions.Reason]:
        """BaremetalAvailabilityFilter's verdict for one Ironic node.

        ========================  ========================================
        snapshot                  verdict
        ========================  ========================================
        trusted, node listed      ``decisions.baremetal_reasons``
        trusted, node unlisted    pass (new enrolment; the stale rule
                                  judges) if the listing is believed,
                                  else ``baremetal_failure_mode``
        none, or too old          ``baremetal_failure_mode``
        ========================  ========================================

        A request first waits for the first listing (``wait_until_ready``).
        """
        snap = self.trusted()
        if snap is not None:
            if node_uuid in snap.nodes:
                return list(snap.unusable.get(node_uuid, ()))
            self.observe((node_uuid,))
            verdict = self.listing_verdict(snap)
            if verdict.trusted:
                return []
            return self._policy(f"not in a partial Ironic listing ({verdict})")
        self._log_policy()
        return self._policy(f"no Ironic snapshot since {self._age_text()}")

    def _policy(self, detail: str) -> list[decisions.Reason]:
        if CONF.drain_filters.baremetal_failure_mode == drain_conf.FAIL_REJECT:
            return [decisions.Reason(decisions.ReasonCode.BAREMETAL_UNKNOWN,
                                     detail)]
        return []

    def missing_reason(
        self, node_uuid: str, updated_at: datetime.datetime | None = None
    ) -> decisions.Reason | None:
        """StaleComputeNodeFilter's rule: Ironic no longer has this node.

        Nova learns of nodes only from Ironic, so a compute node that
        existed before a trusted listing started (the scheduler saw it
        earlier, or its record was written earlier) and that the listing
        lacks was deleted from Ironic. A node known only since the listing
        began may be a new enrolment: it waits for the next refresh. (A
        nova-compute clock behind the scheduler's can delay a brand-new
        node by one refresh interval; nothing worse.) A listing that lacks
        too many known nodes is not believed (``listing_verdict``). A node a
        delete event named is missing at once: the event is no guess.
        """
        first_seen = self.seen(node_uuid)
        snap = self.trusted()
        if snap is None or node_uuid in snap.nodes:
            return None
        if node_uuid in self._deleted:
            return decisions.missing_from_ironic_reason(node_uuid)
        known_before = first_seen < snap.started_at or (
            updated_at is not None
            and decisions.as_utc(updated_at) < snap.started_wall)
        if not known_before or not self.listing_verdict(snap).trusted:
            return None
        return decisions.missing_from_ironic_reason(node_uuid)

    def _log_policy(self) -> None:
        now = self._clock()
        interval = CONF.drain_filters.baremetal_refresh_interval
        if self._policy_logged_at is not None and (
                now - self._policy_logged_at < interval):
            return
        self._policy_logged_at = now
        LOG.error("No trusted Ironic snapshot (last good: %(age)s, last "
                  "error: %(error)s); baremetal_failure_mode=%(mode)s",
                  {"age": self._age_text(),
                   "error": self.last_error or "a refresh has not finished",
                   "mode": CONF.drain_filters.baremetal_failure_mode})

    # event mode (nova_drain_filters/ironic_events.py) ----------------------

    def _start_events(self) -> None:
        """Start the notification listener beside the refresher, if enabled.

        Imported here so that oslo.messaging is loaded only in event mode.
        """
        if not CONF.drain_filters.baremetal_notifications:
            return
        from nova_drain_filters import ironic_events
        if self._events is None:
            self._events = ironic_events.EventListener(
                self, self._client_factory, clock=self._clock)
        self._events.start()

    def _stop_events(self, timeout: float) -> None:
        if self._events is not None:
            self._events.stop(timeout)


_view: IronicView | None = None
_view_lock = threading.Lock()


def get_view() -> IronicView:
    """The process-wide view, created on first use."""
    global _view
    view = _view
    if view is not None:
        return view
    with _view_lock:
        if _view is None:
            _view = IronicView()
        return _view


def set_view(view: IronicView | None) -> IronicView | None:
    """Replace the process-wide view (for tests); return the old one."""
    global _view
    with _view_lock:
        old, _view = _view, view
    if old is not None and old is not view:
        old.stop(timeout=0)
    return old


def _current() -> ironic_refresher.Refresher | None:
    return _view


def _reset_lock_in_child() -> None:
    # Another thread may have held the lock when the process forked.
    global _view_lock
    _view_lock = threading.Lock()


ironic_refresher.install_fork_hooks(_current, _reset_lock_in_child)
