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
object per node, the node packed as the snapshot keeps it
(``node_table.pack``), and nothing else that lives past the call.
Why: every container the parent allocates counts towards Nova's next
garbage collection. A batch of events as tuples (an event, its fields,
its traits' set, then a ``NodeEvent``) kept four containers an event
alive at once, so a burst ran many young collections and some of the
middle generation, each of which brings a full collection of the
scheduler's heap nearer. In columns the parent builds one object a
node, and the same burst runs a fraction of those collections
(``tests/unit/ironic_view/test_wire.py`` counts them).

A batch's columns, in order:

* the node uuids, one an event;
* the kinds, one byte an event: ``FACTS``, ``DELETED`` or ``REREAD``;
* the event types of the ``REREAD`` events, by position (a re-read is
  logged by its event's type);
* the packed nodes of the ``FACTS`` events, one list for each of a
  packed node's values (``node_table.WIDTH``): the facts' fields after
  the uuid, the traits as one string, and the node's verdict.

The reader packs, and so judges, each node once for the host: every
process that follows it (``host_reader.py``) puts the packed nodes into
its snapshot as they come (``Patches.apply_packed``). Building each
node's facts and judging them again in every process made a follower's
event cost several times as much, and a burst the host's followers'
CPU with it (``tools/bench.sh follower_apply``; figures in
``doc/source/testing.rst``, "Packed on the wire").
"""
import pickle
import socket
import struct
import threading
from typing import Any

from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications

_HEADER = struct.Struct(">I")

#: The batch format's version. The reader is started from the installed
#: package, the parent runs what it loaded: after an upgrade under a
#: running scheduler the two may differ, and a reader must not misread.
VERSION = 3
#: The fields of a batch message in this version: ``("batch", seq,
#: events, received, dropped, columns)``. Version 1 sent five; version 2 sent
#: facts in its columns, not packed nodes.
BATCH_FIELDS = 6

#: An event's kind on the wire.
FACTS, DELETED, REREAD = 0, 1, 2

#: A batch on the wire (see the module's docstring).
Columns = tuple[list[str], bytes, dict[int, str], list[list[Any]]]


class ReaderGone(EOFError):
    """The other end of the socket closed."""


class VersionMismatch(RuntimeError):
    """The parent speaks another version of the wire."""


def encode_batch(events: list[notifications.NodeEvent]) -> Columns:
    """A reader's parsed events as columns, each node packed and judged
    (``node_table.pack``)."""
    uuids = []
    kinds = bytearray()
    rereads: dict[int, str] = {}
    rows = []
    for position, event in enumerate(events):
        uuids.append(event.node_uuid)
        if event.deleted:
            kinds.append(DELETED)
        elif event.facts is None:
            kinds.append(REREAD)
            rereads[position] = event.event_type
        else:
            kinds.append(FACTS)
            rows.append(node_table.pack(event.facts))
    columns = ([list(column) for column in zip(*rows, strict=True)] if rows
               else [[] for _ in range(node_table.WIDTH)])
    return uuids, bytes(kinds), rereads, columns


def decode_batch(columns: Columns) -> dict[str, notifications.Pending]:
    """Each node's latest event of a batch, as the apply needs it: the
    packed node, None for a delete, or the event for a re-read.

    Nodes with the same traits share one string (``node_table.shared_key``)
    and nothing is built per node but its packed tuple.
    """
    uuids, kinds, rereads, fields_in = columns
    if len(fields_in) != node_table.WIDTH:
        raise VersionMismatch(
            f"a batch of {len(fields_in)} columns, not {node_table.WIDTH}")
    fields = list(fields_in)  # the caller's columns stay as they came
    traits = fields[node_table.TRAITS_AT]
    shared = {key: node_table.shared_key(key) for key in set(traits)}
    fields[node_table.TRAITS_AT] = [shared[key] for key in traits]
    rows = zip(*fields, strict=True)
    if not rereads and DELETED not in kinds:
        return dict(zip(uuids, rows, strict=True))  # the last event wins
    latest: dict[str, notifications.Pending] = {}
    for position, (uuid, kind) in enumerate(
            zip(uuids, kinds, strict=True)):
        if kind == FACTS:
            latest[uuid] = next(rows)
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
