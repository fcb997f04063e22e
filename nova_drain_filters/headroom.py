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

"""Headroom: the free capacity of the nodes that can take a server.

Pure functions over the capacity report's verdicts
(:mod:`nova_drain_filters.report`) and placement's capacity and usage of
each provider. Only schedulable nodes (no reason at all) count: a drained
or down host's room is no room.
"""
import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import report

#: {provider: {resource class: (capacity, used)}}, placement's figures.
Rooms = Mapping[str, Mapping[str, tuple[int, int]]]


@dataclasses.dataclass(frozen=True)
class Row:
    """One group's schedulable nodes: their capacity and what is free."""

    group: str | None
    hosts: int
    nodes: int
    capacity: Mapping[str, int]
    free: Mapping[str, int]

    def fraction(self, rc: str) -> float:
        cap = self.capacity.get(rc, 0)
        return self.free.get(rc, 0) / cap if cap else 0.0


def _row(group: str | None, nodes: Sequence[report.NodeVerdict],
         rooms: Rooms) -> Row:
    """A node placement gave no figures for has its inventory as capacity
    and nothing free (placement offers it for nothing)."""
    capacity: dict[str, int] = {}
    free: dict[str, int] = {}
    for v in nodes:
        figures = rooms.get(v.uuid)
        pairs = (dict(figures) if figures is not None
                 else {rc: (total, total) for rc, total in v.inventory})
        for rc, (cap, used) in pairs.items():
            capacity[rc] = capacity.get(rc, 0) + cap
            free[rc] = free.get(rc, 0) + max(0, cap - used)
    return Row(group, len({v.host for v in nodes}), len(nodes), capacity,
               free)


def rows(verdicts: Sequence[report.NodeVerdict], rooms: Rooms,
         by: str = "reason",
         groups: Mapping[str, Sequence[str]] | None = None) -> list[Row]:
    """One row of every schedulable node, or one per host, aggregate or
    zone (``by``, with ``groups`` as :func:`report.rows` takes them)."""
    usable = [v for v in verdicts if not v.reasons]
    if by == "reason":
        return [_row(None, usable, rooms)]
    members: dict[str, list[report.NodeVerdict]] = {}
    for v in usable:
        names = [v.host] if by == "host" else list(
            (groups or {}).get(v.host) or [report.NO_GROUP])
        for name in names:
            members.setdefault(name, []).append(v)
    return [_row(name, members[name], rooms) for name in sorted(members)]


def resource_classes(found: Sequence[Row]) -> list[str]:
    """The columns: standard classes first, then custom ones, sorted."""
    return sorted({rc for r in found for rc in r.capacity},
                  key=lambda rc: (rc.startswith("CUSTOM_"), rc))
