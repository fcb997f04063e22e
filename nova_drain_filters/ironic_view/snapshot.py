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

"""The Ironic view's snapshot: one listing, patched by events in between.

A ``Snapshot`` is what one paginated listing saw, with the reasons of every
unusable node worked out once, so a filter's healthy host costs one lookup.
``Patches`` keeps the view's current snapshot: a listing goes in whole, and
an event (``events.py`` in this package) replaces or removes one node,
copy on write, without judging the other nodes again. No I/O here.
"""
import copy
import dataclasses
import datetime
import threading

from nova_drain_filters import decisions


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
    #: The reasons of every node that cannot take an instance, worked out
    #: once per refresh (in the refresher thread) so that a filter's
    #: healthy host costs one lookup.
    unusable: dict[str, list[decisions.Reason]] = dataclasses.field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unusable = {}
        for uuid, node in self.nodes.items():
            reasons = decisions.baremetal_reasons(node)
            if reasons:
                unusable[uuid] = reasons
        object.__setattr__(self, "unusable", unusable)

    def patched(
        self, changes: dict[str, decisions.IronicNodeFacts | None]
    ) -> "Snapshot":
        """A copy with nodes replaced (facts) or removed (None).

        Copy on write, so a reader holding the old snapshot keeps a
        consistent one; only the changed nodes' reasons are worked out
        again, so an event costs the same however many nodes there are.
        """
        if not changes:
            return self
        nodes, unusable = dict(self.nodes), dict(self.unusable)
        for uuid, facts in changes.items():
            unusable.pop(uuid, None)
            if facts is None:
                nodes.pop(uuid, None)
                continue
            nodes[uuid] = facts
            reasons = decisions.baremetal_reasons(facts)
            if reasons:
                unusable[uuid] = reasons
        new = copy.copy(self)  # no __post_init__: nothing is listed again
        object.__setattr__(new, "nodes", nodes)
        object.__setattr__(new, "unusable", unusable)
        return new


class Patches:
    """The current snapshot, and the event reads newer than its listing.

    The view owns one (``IronicView.patches``): its refresher installs each
    listing here and its event listener updates nodes here.
    """

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        #: node uuid -> (read at, facts or None if deleted), replayed over
        #: a listing that started before the read.
        self._event_changes: dict[
            str, tuple[float, decisions.IronicNodeFacts | None]] = {}
        self._event_lock = threading.Lock()
        #: Nodes a delete event named: missing without the known-before
        #: rule, which only tells a listing's gaps from new enrolments.
        self._deleted: set[str] = set()

    def after_fork(self) -> None:
        """A forked child's lock: the parent's copy may be held for good.

        Another thread may have been installing a listing or applying an
        event as the process forked; the snapshot itself is swapped whole.
        """
        self._event_lock = threading.Lock()

    @property
    def current(self) -> Snapshot | None:
        """The latest snapshot with the events applied; None before any."""
        return self._snapshot

    def is_deleted(self, node_uuid: str) -> bool:
        """True if a delete event named the node since a listing had it."""
        return node_uuid in self._deleted

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
            if facts is None:
                self._deleted.add(node_uuid)
            else:
                self._deleted.discard(node_uuid)
            snap = self._snapshot
            if snap is None:
                return False
            self._snapshot = snap.patched({node_uuid: facts})
            return True

    def install(self, snap: Snapshot) -> None:
        """Swap a new listing in, keeping what events read after it began.

        A listing takes a while; a node re-read after the listing started
        is newer than the listing's copy of it.
        """
        with self._event_lock:
            self._event_changes = {
                uuid: change for uuid, change in self._event_changes.items()
                if change[0] >= snap.started_at}
            self._deleted -= snap.nodes.keys()
            self._snapshot = snap.patched({
                uuid: facts for uuid, (_, facts)
                in self._event_changes.items()})
