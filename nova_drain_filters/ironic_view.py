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

One background thread per scheduler process refreshes the snapshot every
``[drain_filters] baremetal_refresh_interval`` seconds (a paginated
``GET /v1/nodes`` with only the needed fields) and swaps it in whole. The
filters only read the current snapshot: no request is ever made on the
scheduling path, and a refresh is single-flight.

Failure policy: a failed refresh keeps the last good snapshot; once that is
older than ``baremetal_max_snapshot_age`` the snapshot is not trusted and
``baremetal_failure_mode`` decides (pass or reject every Ironic host). Any
error from Ironic (down, timeout, 5xx, garbage) is logged once per refresh
and never raised into the scheduler.
"""
import dataclasses
import datetime
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic

if TYPE_CHECKING:
    from nova_drain_filters import ironic_events

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """All Ironic nodes as one refresh saw them."""

    nodes: dict[str, decisions.IronicNodeFacts]
    #: Monotonic time the listing started: a node Nova knew before this
    #: moment and that is not listed was deleted from Ironic.
    started_at: float
    finished_at: float
    requests: int
    #: Wall-clock time the listing started, to compare with record times.
    started_wall: datetime.datetime


def _default_client() -> ironic.IronicClient:
    # The [ironic] section Nova's Ironic driver uses (nova/conf/ironic.py).
    return ironic.IronicClient(
        http.adapter_from_conf(CONF, "ironic", "baremetal"))


class IronicView:
    """The latest trusted snapshot, its refresher and its failure state."""

    def __init__(
        self,
        client_factory: Callable[[], ironic.IronicClient] = _default_client,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client_factory = client_factory
        self._client: ironic.IronicClient | None = None
        self._clock = clock
        self._refresh_lock = threading.Lock()
        self._thread_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._snapshot: Snapshot | None = None
        self._first_seen: dict[str, float] = {}
        self._policy_logged_at: float | None = None
        #: When this process's refresher started: warm-up is bounded by it.
        self._running_since: float | None = None
        #: The last refresh error, None after a success.
        self.last_error: str | None = None
        self.refreshes = 0
        #: Event mode: node uuid -> (read at, facts or None if deleted),
        #: replayed over a listing that started before the read.
        self._event_changes: dict[
            str, tuple[float, decisions.IronicNodeFacts | None]] = {}
        self._event_lock = threading.Lock()
        self._events: ironic_events.EventListener | None = None

    # refreshing ----------------------------------------------------------

    def refresh(self) -> bool:
        """List all nodes and swap the snapshot in; False if it did not.

        Single-flight: returns False at once if a refresh is under way.
        """
        if not self._refresh_lock.acquire(blocking=False):
            return False
        try:
            return self._refresh()
        finally:
            self._refresh_lock.release()

    def _refresh(self) -> bool:
        started = self._clock()
        started_wall = datetime.datetime.now(datetime.timezone.utc)
        try:
            if self._client is None:
                self._client = self._client_factory()
            before = self._client.requests
            page_size = CONF.drain_filters.baremetal_page_size
            nodes = {n.uuid: n for n in self._client.list_nodes(page_size)}
            requests = self._client.requests - before
        except Exception as exc:  # never let Ironic's trouble escape
            self.last_error = str(exc)
            LOG.error("Ironic node refresh failed, keeping the snapshot from "
                      "%(age)s: %(error)s",
                      {"age": self._age_text(), "error": exc})
            return False
        self._install(Snapshot(nodes, started, self._clock(), requests,
                               started_wall))
        self.last_error = None
        self.refreshes += 1
        LOG.debug("Ironic snapshot refreshed: %(n)d nodes in %(r)d requests",
                  {"n": len(nodes), "r": requests})
        return True

    def _age_text(self) -> str:
        if self._snapshot is None:
            return "never (no snapshot yet)"
        return f"{self._clock() - self._snapshot.finished_at:.0f}s ago"

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(CONF.drain_filters.baremetal_refresh_interval)

    def ensure_running(self) -> None:
        """Start the refresher if it is not running in this process.

        Called from the filters. Nova's scheduler may fork workers after
        loading the filters, and a thread does not survive a fork, so the
        process id is checked too.
        """
        pid = os.getpid()
        if self._thread is not None and self._thread.is_alive() and (
                self._pid == pid):
            return
        with self._thread_lock:
            if self._thread is not None and self._thread.is_alive() and (
                    self._pid == pid):
                return
            if self._pid is not None and self._pid != pid:
                # A fork copied a lock a refresh may have held, and the
                # parent's HTTP connections.
                self._refresh_lock = threading.Lock()
                self._client = None
            self._stop.clear()
            self._pid = pid
            if self._running_since is None:
                self._running_since = self._clock()
            self._thread = threading.Thread(
                target=self._run, name="drain-ironic-refresh", daemon=True)
            self._thread.start()
            self._start_events()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the refresher (for tests and shutdown)."""
        self._stop.set()
        self._stop_events(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None

    # reading -------------------------------------------------------------

    def trusted(self) -> Snapshot | None:
        """The snapshot if it is young enough to decide on, else None."""
        snap = self._snapshot
        max_age = CONF.drain_filters.baremetal_max_snapshot_age
        if snap is None or self._clock() - snap.finished_at > max_age:
            return None
        return snap

    def seen(self, node_uuid: str) -> float:
        """Remember when the scheduler first saw this node; return that."""
        return self._first_seen.setdefault(node_uuid, self._clock())

    def availability_reasons(self, node_uuid: str) -> list[decisions.Reason]:
        """BaremetalAvailabilityFilter's verdict for one Ironic node.

        ======================  ==========================================
        snapshot                verdict
        ======================  ==========================================
        trusted, node listed    ``decisions.baremetal_reasons``
        trusted, node unlisted  pass (new enrolment; the stale rule judges)
        none yet, no failure    pass (warming up)
        untrusted after errors  ``baremetal_failure_mode``
        ======================  ==========================================
        """
        snap = self.trusted()
        if snap is not None:
            node = snap.nodes.get(node_uuid)
            return decisions.baremetal_reasons(node) if node else []
        if self._warming_up():
            return []
        self._log_policy()
        if CONF.drain_filters.baremetal_failure_mode == drain_conf.FAIL_REJECT:
            return [decisions.Reason(
                decisions.ReasonCode.BAREMETAL_UNKNOWN,
                f"no Ironic snapshot since {self._age_text()}")]
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
        node by one refresh interval; nothing worse.)
        """
        first_seen = self.seen(node_uuid)
        snap = self.trusted()
        if snap is None or node_uuid in snap.nodes:
            return None
        known_before = first_seen < snap.started_at or (
            updated_at is not None
            and decisions.as_utc(updated_at) < snap.started_wall)
        if not known_before:
            return None
        return decisions.missing_from_ironic_reason(node_uuid)

    def _warming_up(self) -> bool:
        """No snapshot yet, no failure yet, and not for too long.

        A first refresh that hangs (``[ironic] timeout`` is unset by
        default) must not keep every node passing forever.
        """
        if self._snapshot is not None or self.last_error is not None:
            return False
        max_age = CONF.drain_filters.baremetal_max_snapshot_age
        return (self._running_since is None
                or self._clock() - self._running_since <= max_age)

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

    def update_node(self, facts: decisions.IronicNodeFacts,
                    read_at: float) -> bool:
        """Put one node, read at ``read_at`` (view clock), in the snapshot.

        False if there is no snapshot yet; the change is kept and applied
        over the first listing if that started before the read.
        """
        return self._record_event(facts.uuid, facts, read_at)

    def mark_deleted(self, node_uuid: str, at: float) -> bool:
        """Take a node Ironic deleted out of the snapshot: it is missing."""
        return self._record_event(node_uuid, None, at)

    def _record_event(self, node_uuid: str,
                      facts: decisions.IronicNodeFacts | None,
                      at: float) -> bool:
        with self._event_lock:
            known = self._event_changes.get(node_uuid)
            if known is not None and known[0] > at:
                return False  # an even newer read is already in
            self._event_changes[node_uuid] = (at, facts)
            snap = self._snapshot
            if snap is None:
                return False
            self._snapshot = _patched(snap, {node_uuid: facts})
            return True

    def _install(self, snap: Snapshot) -> None:
        """Swap a new listing in, keeping what events read after it began.

        A listing takes a while; a node re-read after the listing started
        is newer than the listing's copy of it.
        """
        with self._event_lock:
            self._event_changes = {
                uuid: change for uuid, change in self._event_changes.items()
                if change[0] >= snap.started_at}
            self._snapshot = _patched(snap, {
                uuid: facts for uuid, (_, facts)
                in self._event_changes.items()})

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


def _patched(
    snap: Snapshot, changes: dict[str, decisions.IronicNodeFacts | None]
) -> Snapshot:
    """A copy of ``snap`` with nodes replaced (facts) or removed (None).

    Copy on write: a reader holding the old snapshot keeps a consistent one.
    """
    if not changes:
        return snap
    nodes = dict(snap.nodes)
    for uuid, facts in changes.items():
        if facts is None:
            nodes.pop(uuid, None)
        else:
            nodes[uuid] = facts
    return dataclasses.replace(snap, nodes=nodes)


_view: IronicView | None = None
_view_lock = threading.Lock()


def get_view() -> IronicView:
    """The process-wide view, created on first use."""
    global _view
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
