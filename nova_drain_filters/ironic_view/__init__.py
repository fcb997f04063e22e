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
filters and again in each worker Nova forks (``refresher.py``); a
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
from nova_drain_filters import listing_trust
from nova_drain_filters.clients import ironic
from nova_drain_filters.ironic_view import credentials
from nova_drain_filters.ironic_view import known
from nova_drain_filters.ironic_view import refresher as refresher_mod
from nova_drain_filters.ironic_view import snapshot

if TYPE_CHECKING:
    from nova_drain_filters.ironic_view import events as events_mod

__all__ = ["IronicView", "get_view", "set_view"]

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class IronicView:
    """The latest trusted snapshot, its refresher and its failure state.

    Composed of a refresher (``self.refresher``: the threads that list
    Ironic) and a patch set (``self.patches``: the current snapshot and the
    event reads newer than it); the view decides what they mean.
    """

    def __init__(
        self,
        client_factory: Callable[[], ironic.IronicClient] = ironic.from_conf,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.refresher = refresher_mod.Refresher(
            self._list, clock, forget_connections=self._forget_connections,
            started=self._start_events, forked=self._forked,
            parked=self._park_events)
        self.patches = snapshot.Patches()
        self._client_factory = client_factory
        self._client: ironic.IronicClient | None = None
        #: The Ironic nodes requests offered: the nodes Nova knows.
        self.known = known.KnownNodes(clock)
        self._verdict_logged: object = None
        self._policy_logged_at: float | None = None
        self._startup_logged = False
        self._inherited = False  # a forked worker's snapshot is the parent's
        #: The last refresh error, None after a success.
        self.last_error: str | None = None
        self.refreshes = 0
        self._events: events_mod.EventListener | None = None

    # the refresher's threads ---------------------------------------------

    def start(self) -> None:
        """Start refreshing in this process and after every fork of it."""
        self.refresher.start()

    def ensure_running(self) -> None:
        """Make sure the refresher runs here (``Refresher.ensure_running``)."""
        self.refresher.ensure_running()

    def refresh(self) -> bool:
        """List all nodes and swap the snapshot in; False if it did not.

        Single-flight: returns False at once if a refresh is under way.
        """
        return self.refresher.refresh()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the refresher, its watchdog and the event listener."""
        self.refresher.stop(timeout)
        if self._events is not None:
            self._events.stop(timeout)

    # events --------------------------------------------------------------

    def update_node(self, facts: decisions.IronicNodeFacts,
                    read_at: float) -> bool:
        """Put one node an event read into the snapshot (``Patches``)."""
        return self.patches.update_node(facts, read_at)

    def mark_deleted(self, node_uuid: str, at: float) -> bool:
        """Take a node Ironic deleted out of the snapshot (``Patches``)."""
        return self.patches.mark_deleted(node_uuid, at)

    # one listing (run by the refresher) ----------------------------------

    def _list(self, generation: int) -> bool:
        started = self._clock()
        started_wall = datetime.datetime.now(datetime.timezone.utc)
        refresher = self.refresher
        try:
            if self._client is None:
                self._client = self._client_factory()
                refresher.read_timeout = float(getattr(
                    self._client, "read_timeout", None)
                    or ironic.DEFAULT_READ_TIMEOUT)
            client = self._client
            before = client.requests
            listing = snapshot.Listing()
            page_size = CONF.drain_filters.baremetal_page_size
            for page in client.iter_node_pages(page_size):
                refresher.progress()
                listing.add(page)
            requests = client.requests - before
            snap = listing.snapshot(started, self._clock(), requests,
                                    started_wall)
        except Exception as exc:  # never let Ironic's trouble escape
            if refresher.is_current(generation):
                self.last_error = str(exc)
            LOG.error("Ironic node refresh failed, keeping the snapshot from "
                      "%(age)s: %(error)s",
                      {"age": self._age_text(), "error": exc})
            return False
        if not refresher.is_current(generation):
            LOG.warning("Dropping an Ironic listing that finished after the "
                        "watchdog gave up on it")
            return False
        self.patches.install(snap)
        self.last_error = None
        self.refreshes += 1
        if self.refreshes == 1:
            self._check_credentials(client)
        LOG.debug("Ironic snapshot refreshed: %(n)d nodes in %(r)d requests "
                  "(%(u)d unusable)",
                  {"n": len(snap.nodes), "u": len(snap.unusable),
                   "r": requests})
        return True

    def _check_credentials(self, client: ironic.IronicClient) -> None:
        """Warn once if the token cannot list every node (no request)."""
        try:
            access = credentials.token_of(getattr(client, "adapter", None))
            problem = (credentials.scope_problem(access)
                       if access is not None else None)
        except Exception as exc:
            LOG.debug("Could not read the [ironic] token's scope: %s", exc)
            return
        if problem:
            LOG.warning("The Ironic listing may be partial: %s", problem)

    def _forget_connections(self) -> None:
        self._client = None

    def _forked(self) -> None:
        self._startup_logged = False
        self._inherited = self.patches.current is not None
        self.patches.after_fork()
        if self._events is not None:  # the parent's connection, not ours
            self._events.healthy_at = None

    def _age_text(self) -> str:
        snap = self.patches.current
        if snap is None:
            return "never (no snapshot yet)"
        return f"{self._clock() - snap.finished_at:.0f}s ago"

    # waiting for the first listing ---------------------------------------

    def wait_until_ready(self) -> None:
        """Once per request: make sure the refresher runs; if this process
        has no trusted snapshot of its own and no listing has finished
        since its refresher started, wait for one, but not past
        ``baremetal_startup_wait`` seconds after that start. Then the
        failure policy applies (logged once).
        """
        self.refresher.ensure_running()
        first = self.refresher.first_attempt
        # Not on a snapshot inherited by a fork, however young: the parent,
        # parked since, heard no event.
        if self.trusted() is not None and (first.is_set() or not self._inherited):
            return
        wait = CONF.drain_filters.baremetal_startup_wait
        if not first.is_set():
            since = self.refresher.running_since
            remaining = (since if since is not None else self._clock()) + (
                wait - self._clock())
            if remaining > 0:
                first.wait(remaining)
        if self._startup_logged or self.patches.current is not None:
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

    def trusted(self) -> snapshot.Snapshot | None:
        """The snapshot if it is young enough to decide on, else None.

        Its age runs from the last listing or from when the event
        listener's connection was last seen up and caught up
        (``healthy_at``), whichever is later: a quiet cloud sends no events.
        """
        snap = self.patches.current
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
        return self.known.first_seen(node_uuid)

    def observe(self, node_uuids: Iterable[str]) -> None:
        """Note the Ironic nodes one request offered (``known.py``)."""
        self.known.observe(node_uuids)

    def listing_verdict(
        self, snap: snapshot.Snapshot
    ) -> listing_trust.ListingVerdict:
        """The blast-radius verdict on ``snap`` over the nodes Nova knows.

        Cached per snapshot and number of known nodes; logged once per
        snapshot when it is not trusted.
        """
        verdict = self.known.verdict(
            snap, snap.nodes, CONF.drain_filters.ironic_missing_max_fraction)
        if not verdict.trusted and self._verdict_logged is not snap:
            self._verdict_logged = snap
            LOG.error("Not believing the Ironic listing about missing nodes: "
                      "%(verdict)s ([drain_filters] "
                      "ironic_missing_max_fraction); the missing-node rule "
                      "is off and baremetal_failure_mode=%(mode)s applies "
                      "to unlisted nodes. Do the [ironic] credentials see "
                      "every node (a system-scoped reader token, or the "
                      "service role with Ironic's "
                      "rbac_service_role_elevated_access)?",
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
        if self.patches.is_deleted(node_uuid):
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

    # event mode (events.py) ---------------------------------------------

    def _park_events(self) -> None:
        """A parent that forked its workers serves no request: it stops
        listening (and its reader), as its refresher parks."""
        if self._events is not None:
            self._events.park()

    def _start_events(self) -> None:
        """Start the notification listener beside the refresher, if enabled.

        Imported here so that oslo.messaging is loaded only in event mode.
        """
        if not CONF.drain_filters.baremetal_notifications:
            return
        from nova_drain_filters.ironic_view import events
        if self._events is None:
            self._events = events.EventListener(
                self, self._client_factory, clock=self._clock)
        self._events.start()


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


def _current() -> refresher_mod.Refresher | None:
    view = _view
    return view.refresher if view is not None else None


def _reset_lock_in_child() -> None:
    # Another thread may have held the lock when the process forked.
    global _view_lock
    _view_lock = threading.Lock()


refresher_mod.install_fork_hooks(_current, _reset_lock_in_child)
