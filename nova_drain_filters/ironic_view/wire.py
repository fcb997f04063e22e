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

"""The wire between a scheduler process and its event reader (``reader.py``).

Frames: a 4-byte big-endian length and a pickle, both ends this package's
code in a parent and the child it started (``Channel``).

A batch of parsed events travels in columns (``encode_batch``), not as a
tuple per event. What the parent builds from it (``decode_batch``) is one
object per node, its facts, and nothing else that lives past the call.
Why: every container the parent allocates counts towards Nova's next
garbage collection. A batch of 1,000 events as tuples (an event, its
fields, its traits' set, then a ``NodeEvent``) kept about 4,000 of them
alive at once, six young collections a batch; in a 10,000-event burst
that was about 50 young collections and 4 of the middle generation, and
every 11th of those brings a full collection of the scheduler's heap
(0.3 s or more under Nova's harness) within reach. In columns the same
burst makes about 13 and 1 (``tests/unit/ironic_view/test_wire.py``).

A batch's columns, in order:

* the node uuids, one an event;
* the kinds, one byte an event: ``FACTS``, ``DELETED`` or ``REREAD``;
* the event types of the ``REREAD`` events, by position (a re-read is
  logged by its event's type);
* the facts' fields after the uuid, one list a field in
  ``IronicNodeFacts``'s order, one entry for each ``FACTS`` event, but
  traits as an index into
* the batch's distinct trait sets, each a sorted tuple.
"""
import dataclasses
import pickle
import socket
import struct
import threading
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import notifications

_HEADER = struct.Struct(">I")
#: The facts' fields the columns carry: all but the uuid, which the
#: event's own column gives.
_FACT_FIELDS = tuple(f.name for f in dataclasses.fields(
    decisions.IronicNodeFacts))[1:]
_TRAITS = _FACT_FIELDS.index("traits")

#: The batch format's version. The reader is started from the installed
#: package, the parent runs what it loaded: after an upgrade under a
#: running scheduler the two may differ, and a reader must not misread.
VERSION = 2
#: The fields of a batch message in this version: ``("batch", seq,
#: events, received, dropped, columns)``. Version 1 sent five.
BATCH_FIELDS = 6

#: An event's kind on the wire.
FACTS, DELETED, REREAD = 0, 1, 2

#: A batch on the wire (see the module's docstring).
Columns = tuple[list[str], bytes, dict[int, str], list[list[Any]],
                list[tuple[str, ...]]]


class ReaderGone(EOFError):
    """The other end of the socket closed."""


class VersionMismatch(RuntimeError):
    """The parent speaks another version of the wire."""


def encode_batch(events: list[notifications.NodeEvent]) -> Columns:
    """A reader's parsed events as columns."""
    uuids = []
    kinds = bytearray()
    rereads: dict[int, str] = {}
    columns: list[list[Any]] = [[] for _ in _FACT_FIELDS]
    trait_sets: dict[frozenset[str], int] = {}
    for position, event in enumerate(events):
        uuids.append(event.node_uuid)
        facts = event.facts
        if event.deleted:
            kinds.append(DELETED)
        elif facts is None:
            kinds.append(REREAD)
            rereads[position] = event.event_type
        else:
            kinds.append(FACTS)
            for column, name in zip(columns, _FACT_FIELDS, strict=True):
                column.append(getattr(facts, name))
            traits = columns[_TRAITS]
            traits[-1] = trait_sets.setdefault(traits[-1], len(trait_sets))
    table = [tuple(sorted(found)) for found in trait_sets]
    return uuids, bytes(kinds), rereads, columns, table


def decode_batch(columns: Columns) -> dict[str, notifications.Pending]:
    """Each node's latest event of a batch, as the apply needs it.

    Facts go through ``IronicNodeFacts.__init__``, so that they keep no
    ``__dict__`` of their own (one more object per node for every full
    collection to walk), and nodes with the same traits share one set.
    """
    uuids, kinds, rereads, columns_in, table = columns
    sets = [decisions.shared_traits(frozenset(found)) for found in table]
    fields = list(columns_in)  # the caller's columns stay as they came
    fields[_TRAITS] = [sets[index] for index in fields[_TRAITS]]
    with_facts = [uuid for uuid, kind in zip(uuids, kinds, strict=True)
                  if kind == FACTS]
    facts = map(decisions.IronicNodeFacts, with_facts, *fields)
    latest: dict[str, notifications.Pending] = {}
    for position, (uuid, kind) in enumerate(
            zip(uuids, kinds, strict=True)):
        if kind == FACTS:
            latest[uuid] = next(facts)
        elif kind == DELETED:
            latest[uuid] = None
        else:
            latest[uuid] = notifications.NodeEvent(uuid, rereads[position])
    return latest


def frame(message: Any) -> bytes:
    """One message as it goes on the wire: its length, then its pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class Channel:
    """Frames over one end of a socket pair; sends from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self._buffer = bytearray()

    def send(self, message: Any) -> None:
        self.send_frame(frame(message))

    def send_frame(self, data: bytes) -> None:
        """Send a message ``frame`` made (one pickle for many channels)."""
        with self._send_lock:
            self.sock.sendall(data)

    def receive(self, timeout: float | None) -> Any:
        """The next message; socket.timeout if none came in ``timeout``
        (what arrived of it is kept); ReaderGone at the end."""
        self.sock.settimeout(timeout)
        while True:
            if len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                end = _HEADER.size + size
                if len(self._buffer) >= end:
                    data = bytes(self._buffer[_HEADER.size:end])
                    del self._buffer[:end]
                    return pickle.loads(data)
            chunk = self.sock.recv(consumer.READ_AHEAD)
            if not chunk:
                raise ReaderGone()
            self._buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # already gone
            pass
