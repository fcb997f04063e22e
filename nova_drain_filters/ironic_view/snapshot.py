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

A ``Snapshot`` is what one paginated listing saw, with the unusable nodes
found once, so a filter's healthy host costs one lookup. It keeps which
nodes are unusable, not their reasons: a list and its reasons per node
would be two or three more objects for the garbage collector to walk in
every full collection of the scheduler's heap (``Unusable``).
Its nodes are kept packed (``node_table``), where a full collection of the
scheduler's heap does not walk them.
``Patches`` keeps the view's current snapshot: a listing goes in whole, and
a batch of events replaces or removes nodes without judging the other
nodes again. No I/O here.

Why an event costs O(1), amortised. A snapshot that a reader was handed
(``Patches.current``) is never changed again: the next batch goes into a
copy (O(nodes)). A snapshot nobody was handed yet is still private, so a
batch goes straight into it (O(batch)). Copies are thus at most one per
batch and one per hand-out, whatever the number of events; and the
listener waits a little before a batch that would copy (``Patches.hold``),
so copies take at most ``COPY_DUTY`` of a core.
"""
import copy
import dataclasses
import datetime
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import node_table

#: Changes to nodes: each node's facts, or None if Ironic deleted it.
Changes = Mapping[str, decisions.IronicNodeFacts | None]
#: The same, packed for the node table (``node_table.pack``).
PackedChanges = Mapping[str, node_table.Packed | None]
#: The share of one core that copying snapshots may take in an event storm:
#: after a copy that took ``t`` seconds, the next waits ``t / COPY_DUTY``.
COPY_DUTY = 0.05
#: The longest ``Patches.hold``, so that a copy slowed by a busy machine
#: never delays the view by more than this.
MAX_HOLD = 0.25


class Unusable(Mapping[str, list[decisions.Reason]]):
    """The unusable nodes of one snapshot, and each one's reasons on asking.

    Only their uuids are kept, in one set. The reasons are worked out
    again from the node's facts (a pure function of them, and quick) when
    asked, by a filter for the unusable candidates it meets. Keeping them
    cost a list and one object per reason for every unusable node, all
    long-lived: most nodes of a busy cloud, and a full collection walks
    each of them every time.
    """

    __slots__ = ("_nodes", "_uuids")

    def __init__(self, nodes: Mapping[str, decisions.IronicNodeFacts],
                 uuids: set[str]) -> None:
        self._nodes = nodes
        self._uuids = uuids

    def __getitem__(self, uuid: str) -> list[decisions.Reason]:
        if uuid not in self._uuids:
            raise KeyError(uuid)
        return decisions.baremetal_reasons(self._nodes[uuid])

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._uuids

    def __iter__(self) -> Iterator[str]:
        return iter(self._uuids)

    def __len__(self) -> int:
        return len(self._uuids)

    def __repr__(self) -> str:
        return f"Unusable({len(self._uuids)} nodes)"


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """All Ironic nodes as one refresh saw them.

    ``nodes`` may be given as any mapping of facts; the snapshot keeps
    them in a ``node_table.NodeTable``, which the collector does not walk.
    """

    nodes: Mapping[str, decisions.IronicNodeFacts]
    #: Monotonic time the listing started: a node Nova knew before this
    #: moment and that is not listed was deleted from Ironic.
    started_at: float
    finished_at: float
    requests: int
    #: Wall-clock time the listing started, to compare with record times.
    started_wall: datetime.datetime
    #: The nodes that cannot take an instance, found once per refresh (in
    #: the refresher thread) so that a filter's healthy host costs one
    #: lookup; their reasons on asking.
    unusable: Unusable = dataclasses.field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, node_table.NodeTable):
            object.__setattr__(self, "nodes",
                               node_table.NodeTable.of(self.nodes))
        object.__setattr__(self, "unusable", Unusable(
            self.nodes, self.table.unusable()))

    def patched(self, changes: Changes) -> "Snapshot":
        """A copy with nodes replaced (facts) or removed (None).

        Copy on write, so a reader holding this snapshot keeps a
        consistent one; only the changed nodes' reasons are worked out
        again. The copy is O(nodes): ``Patches`` copies at most once per
        batch, and only a snapshot a reader was handed.
        """
        if not changes:
            return self
        new = self._copied()
        new._overwrite(packed(changes))
        return new

    def _copied(self) -> "Snapshot":
        """The same listing in dicts of its own: O(nodes)."""
        new = copy.copy(self)  # no __post_init__: nothing is listed again
        nodes = self.table.copy()
        object.__setattr__(new, "nodes", nodes)
        object.__setattr__(new, "unusable", Unusable(
            nodes, set(self.unusable._uuids)))
        return new

    @property
    def table(self) -> node_table.NodeTable:
        """``nodes``, which ``__post_init__`` made a node table."""
        assert isinstance(self.nodes, node_table.NodeTable)
        return self.nodes

    def _overwrite(self, changes: PackedChanges) -> None:
        """Put packed changes in this snapshot's own table: O(changes).

        Each packed node says whether it is unusable (``node_table``).
        Only for a snapshot no reader holds (a copy, or one ``Patches``
        has not handed out); a reader's snapshot never changes.
        """
        put = self.table.put
        add, discard = self.unusable._uuids.add, self.unusable._uuids.discard
        for uuid, node in changes.items():
            put(uuid, node)
            if node is not None and node_table.is_unusable(node):
                add(uuid)
            else:
                discard(uuid)


class Listing:
    """A listing's nodes as its pages arrive, packed at once.

    Each page's facts can go as soon as it is added, so a listing never
    holds two copies of the nodes: a dict of facts handed to ``Snapshot``
    would have been 50,000 more objects alive beside the table, on top of
    the snapshot it replaces.
    """

    def __init__(self) -> None:
        self.table = node_table.NodeTable()
        self.unusable: set[str] = set()

    def add(self, page: Iterable[decisions.IronicNodeFacts]) -> None:
        put, unusable = self.table.put, self.unusable
        for facts in page:
            node = node_table.pack(facts)
            put(facts.uuid, node)
            if node_table.is_unusable(node):
                unusable.add(facts.uuid)
            else:
                unusable.discard(facts.uuid)

    def snapshot(self, started_at: float, finished_at: float,
                 requests: int, started_wall: datetime.datetime
                 ) -> Snapshot:
        """The listing as a snapshot; the listing is used up."""
        snap = Snapshot(node_table.NodeTable(), started_at, finished_at,
                        requests, started_wall)
        object.__setattr__(snap, "nodes", self.table)
        object.__setattr__(snap, "unusable",
                           Unusable(self.table, self.unusable))
        self.table, self.unusable = node_table.NodeTable(), set()
        return snap


def packed(changes: Changes) -> dict[str, node_table.Packed | None]:
    """The changes as the node table keeps them."""
    return {uuid: None if facts is None else node_table.pack(facts)
            for uuid, facts in changes.items()}


class Patches:
    """The current snapshot, and the event reads newer than its listing.

    The view owns one (``IronicView.patches``): its refresher installs each
    listing here and its event listener applies batches of changes here.
    Writers take ``_event_lock``, one at a time; ``_read_lock`` guards only
    the hand-out, so a reader never waits for a copy and never sees half a
    batch.
    """

    def __init__(self, timer: Callable[[], float] = time.perf_counter
                 ) -> None:
        self._snapshot: Snapshot | None = None
        #: True once ``current`` handed the snapshot out: it is frozen.
        self._handed_out = False
        #: node uuid -> read at, and -> packed facts or None if deleted:
        #: the event reads, replayed over a listing that started before the
        #: read. Two dicts of what the collector does not track (floats,
        #: and tuples ``node_table.pack`` made), kept until the next
        #: listing.
        self._event_at: dict[str, float] = {}
        self._event_packed: dict[str, node_table.Packed | None] = {}
        self._event_lock = threading.Lock()
        self._read_lock = threading.Lock()
        #: Nodes a delete event named: missing without the known-before
        #: rule, which only tells a listing's gaps from new enrolments.
        self._deleted: set[str] = set()
        self._timer = timer
        #: When the last copy started and how long it took (``timer``).
        self._copied_at = 0.0
        self._copy_cost = 0.0
        #: Whole-snapshot copies made for events, and batches applied.
        self.copies = 0
        self.batches = 0

    def after_fork(self) -> None:
        """A forked child's locks: the parent's copies may be held for good.

        Another thread may have been installing a listing or applying a
        batch as the process forked. Whatever the parent handed out may
        live on in the child's readers, so the snapshot counts as handed
        out.
        """
        self._event_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._handed_out = True

    @property
    def current(self) -> Snapshot | None:
        """The latest snapshot with the events applied; None before any.

        What it returns never changes: the next batch goes into a copy.
        """
        with self._read_lock:
            self._handed_out = True
            return self._snapshot

    def is_deleted(self, node_uuid: str) -> bool:
        """True if a delete event named the node since a listing had it."""
        return node_uuid in self._deleted

    def hold(self) -> float:
        """Seconds to wait before the next batch, so that copies stay cheap.

        Zero unless that batch would copy (a reader holds the current
        snapshot); then what keeps copies to ``COPY_DUTY`` of a core,
        never more than ``MAX_HOLD``. Events that arrive meanwhile join
        the batch.
        """
        with self._read_lock:
            if self._snapshot is None or not self._handed_out:
                return 0.0
        due = self._copied_at + self._copy_cost / COPY_DUTY - self._timer()
        return min(MAX_HOLD, max(0.0, due))

    def update_node(self, facts: decisions.IronicNodeFacts,
                    read_at: float) -> bool:
        """Put one node, read at ``read_at`` (view clock), in the snapshot.

        False if there is no snapshot yet (the change is kept and applied
        over the first listing if that started before the read), or if an
        even newer read of the node is in.
        """
        return self.apply({facts.uuid: facts}, read_at) == 1

    def mark_deleted(self, node_uuid: str, at: float) -> bool:
        """Take a node Ironic deleted out of the snapshot: it is missing."""
        return self.apply({node_uuid: None}, at) == 1

    def apply(self, changes: Changes, read_at: float) -> int:
        """Apply a batch of changes read at ``read_at`` (view clock) as one
        step; the number that went in (``apply_packed``)."""
        return self.apply_packed(packed(changes), read_at)

    def apply_packed(self, changes: PackedChanges, read_at: float) -> int:
        """Apply a batch of packed changes read at ``read_at`` (view clock)
        as one step; the number that went in.

        A change to a node read again since ``read_at`` is left out.
        Readers see the snapshot before the batch or after it, never
        between: a snapshot nobody was handed takes the batch in place,
        O(batch); one a reader holds is copied once for the whole batch.
        The nodes come packed, each with its verdict (``node_table.pack``),
        as a reader's batch brings them (``wire.py``): nothing is built or
        judged here.
        """
        with self._event_lock:
            accepted: dict[str, node_table.Packed | None] = {}
            event_at, event_packed = self._event_at, self._event_packed
            deleted = self._deleted
            for uuid, node in changes.items():
                if event_at.get(uuid, read_at) > read_at:
                    continue  # an even newer read is already in
                event_at[uuid] = read_at
                if node is None:
                    deleted.add(uuid)
                else:
                    deleted.discard(uuid)
                event_packed[uuid] = accepted[uuid] = node
            if self._snapshot is None or not accepted:
                return 0
            self._publish(accepted)
            self.batches += 1
            return len(accepted)

    def _publish(self, changes: PackedChanges) -> None:
        """Put changes in the current snapshot, or in its copy."""
        snap = self._snapshot
        assert snap is not None
        with self._read_lock:
            if not self._handed_out:
                # O(changes); nobody holds it
                snap._overwrite(changes)
                return
        # Handed out, so frozen: copy it outside the read lock (readers go
        # on reading the old one) and swap the copy in.
        started = self._timer()
        new = snap._copied()
        new._overwrite(changes)
        self._copied_at, self._copy_cost = started, self._timer() - started
        self.copies += 1
        with self._read_lock:
            self._snapshot, self._handed_out = new, False

    def install(self, snap: Snapshot) -> None:
        """Swap a new listing in, keeping what events read after it began.

        A listing takes a while; a node re-read after the listing started
        is newer than the listing's copy of it. The listing is the
        refresher's own until it is installed, so the replay goes into it.
        """
        with self._event_lock:
            self._event_at = {
                uuid: at for uuid, at in self._event_at.items()
                if at >= snap.started_at}
            self._event_packed = {
                uuid: self._event_packed[uuid] for uuid in self._event_at}
            self._deleted -= snap.nodes.keys()
            snap._overwrite(self._event_packed)
            with self._read_lock:
                self._snapshot, self._handed_out = snap, False
