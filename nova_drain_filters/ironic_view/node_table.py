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

"""The node table: a snapshot's nodes, packed where the collector skips them.

A scheduler process keeps the facts of every Ironic node for as long as it
runs, and each full garbage collection walks every object the collector
tracks. An ``IronicNodeFacts`` is such an object, like any instance of a
class: in ``select_burst`` (Nova's harness, 1,000 compute nodes, a
50,000-node view) the facts were 50,000 of the 484,000 objects in the
oldest generation, and each event left a new one behind in the snapshot.

So the table keeps each node as a plain tuple of its fields (``pack``):
strings, booleans and None, with the traits joined in one string, and
last the node's verdict, worked out once where the node was read (with
one reader per host, in the reader: ``wire.py``). CPython
stops tracking a tuple that holds nothing it tracks the first time a
collection looks at it (``_PyTuple_MaybeUntrack``), so a node costs the
collector nothing after its first young collection, and an event's node
never reaches the older generations. The facts are built again when
asked (``unpack``: as long as building them took, a few microseconds):
the filters ask only for the unusable nodes they meet, and otherwise only
test membership. What it bought is measured in
``doc/source/testing.rst`` (``select_burst``): fewer objects for the
collector to walk and a smaller heap, at the price of building an
unusable candidate's facts again when a filter meets it.
"""
import dataclasses
import operator
from collections.abc import Iterator
from collections.abc import KeysView
from collections.abc import Mapping
from typing import Any

from nova_drain_filters import decisions

#: One node's fields after its uuid (the table's key), in
#: ``IronicNodeFacts``'s order, the traits as one string (``_traits_key``),
#: then whether the node is unusable (``decisions.baremetal_reasons``).
Packed = tuple[Any, ...]

_FIELDS = tuple(f.name for f in dataclasses.fields(
    decisions.IronicNodeFacts))[1:]
#: Where a packed node keeps a field (``FIELD_AT["traits"]``), and its
#: verdict: True if it cannot take an instance (``is_unusable``).
FIELD_AT = {name: at for at, name in enumerate(_FIELDS)}
TRAITS_AT = FIELD_AT["traits"]
UNUSABLE_AT = len(_FIELDS)
#: How many values a packed node has.
WIDTH = UNUSABLE_AT + 1
_fields_of = operator.attrgetter(*_FIELDS)

#: Joins a node's trait names in its packed form: no trait name holds it
#: (Placement and Ironic allow upper-case letters, digits and "_").
_JOIN = "\n"
#: Each distinct set of traits and its packed form, one of each per set (a
#: cloud has few: nodes of one hardware class share theirs), bounded like
#: ``decisions.shared_traits``.
_KEYS: dict[frozenset[str], str] = {}
_SETS: dict[str, frozenset[str]] = {"": frozenset()}


def _traits_key(traits: frozenset[str]) -> str:
    """The traits as one string: a tuple would be an object the collector
    tracks for as long as it is shared, and so would be every node that
    held it."""
    found = _KEYS.get(traits)
    if found is not None:
        return found
    found = _JOIN.join(sorted(traits))
    if len(_KEYS) < decisions.TRAIT_SETS_MAX:
        _KEYS[traits] = found
        _SETS[found] = decisions.shared_traits(traits)
    return found


def _traits_set(key: str) -> frozenset[str]:
    found = _SETS.get(key)
    if found is not None:
        return found
    found = decisions.shared_traits(frozenset(key.split(_JOIN)))
    if len(_SETS) < decisions.TRAIT_SETS_MAX:
        _SETS[key] = found
    return found


def shared_key(key: str) -> str:
    """The one string of the traits ``key`` names, as ``pack`` gives it.

    For keys that came from elsewhere (a reader's batch, ``wire.py``): each
    batch brings its own copy of a trait set's string, and a node would
    keep its copy for as long as it is in the table.
    """
    return _traits_key(_traits_set(key))


def pack(facts: decisions.IronicNodeFacts) -> Packed:
    """A node's facts but its uuid, and its verdict, as a tuple the
    collector drops.

    The verdict is worked out here, once for each read of a node: a
    process that takes packed nodes from its host's reader (``wire.py``)
    takes the reader's verdict with them.
    """
    values = _fields_of(facts)
    return (values[:TRAITS_AT] + (_traits_key(values[TRAITS_AT]),)
            + values[TRAITS_AT + 1:]
            + (bool(decisions.baremetal_reasons(facts)),))


def unpack(uuid: str, packed: Packed) -> decisions.IronicNodeFacts:
    """The facts ``pack`` made ``packed`` from, for the node ``uuid``."""
    return decisions.IronicNodeFacts(uuid, *(
        packed[:TRAITS_AT] + (_traits_set(packed[TRAITS_AT]),)
        + packed[TRAITS_AT + 1:UNUSABLE_AT]))


def is_unusable(packed: Packed) -> bool:
    """Whether the node ``pack`` made ``packed`` of cannot take an
    instance (it has ``decisions.baremetal_reasons``)."""
    return bool(packed[UNUSABLE_AT])


class NodeTable(Mapping[str, decisions.IronicNodeFacts]):
    """Node uuid -> facts, kept packed (``pack``) and built on reading.

    Membership, length and iteration cost what a dict's do. Only the
    snapshot or listing that owns a table changes it (``put``), and only
    before a reader was handed it.
    """

    __slots__ = ("_packed",)

    def __init__(self, packed: dict[str, Packed] | None = None) -> None:
        self._packed: dict[str, Packed] = {} if packed is None else packed

    @classmethod
    def of(cls, nodes: Mapping[str, decisions.IronicNodeFacts]
           ) -> "NodeTable":
        """A table of ``nodes``' facts."""
        return cls({uuid: pack(facts) for uuid, facts in nodes.items()})

    def __getitem__(self, uuid: str) -> decisions.IronicNodeFacts:
        return unpack(uuid, self._packed[uuid])

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def keys(self) -> KeysView[str]:
        return self._packed.keys()

    def unusable(self) -> set[str]:
        """The nodes that cannot take an instance, by their verdicts."""
        return {uuid for uuid, packed in self._packed.items()
                if packed[UNUSABLE_AT]}

    def __repr__(self) -> str:
        return f"NodeTable({len(self._packed)} nodes)"

    def copy(self) -> "NodeTable":
        """A table of its own with the same nodes: O(nodes), no unpacking."""
        return NodeTable(dict(self._packed))

    def put(self, uuid: str, packed: Packed | None) -> None:
        """Set a node's packed facts; None removes it."""
        if packed is None:
            self._packed.pop(uuid, None)
        else:
            self._packed[uuid] = packed
