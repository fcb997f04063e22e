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

"""Will it fit: where each server of the hosts being checked would go.

Pure functions over plain facts: the room left on every host that may
take a server (placement's capacity and usage), each server's need, its
AZ pin and traits, and the anti-affinity groups. Servers are packed one at
a time in the order ``drain host migrate`` moves them
(:func:`nova_drain_filters.migration.plan.plan_moves`), each onto the host with
the most free RAM, as Nova's default weigher
(``nova/scheduler/weights/ram.py`` ``RAMWeigher``) spreads them, so
servers compete for the same room.

Not modelled: NUMA, PCI, image properties, custom Nova filters and
aggregate-metadata filters (:data:`NOT_MODELLED`).
"""
import dataclasses
import enum
import math
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters.migration import plan

#: What the simulation leaves out; the CLI's footer and the docs list it.
NOT_MODELLED = ("NUMA", "PCI devices", "image properties and image traits",
                "custom Nova filters", "aggregate-metadata filters")
#: The class Nova's RAMWeigher weighs by.
RAM = "MEMORY_MB"


class Why(str, enum.Enum):
    """Why a server has nowhere to go (rendered by the CLI)."""

    UNMOVABLE = "unmovable"        # migrate would not move it
    NO_HOST = "no_host"            # no host is left to take anything
    TRAIT = "trait"                # no host has its required traits
    AZ = "az"                      # no host in the zone it is pinned to
    TOO_BIG = "too_big"            # larger than any host's capacity
    PLACEMENT = "placement"        # placement offered none of the hosts
    ANTI_AFFINITY = "anti_affinity"  # every host holds its group's limit
    NO_ROOM = "no_room"            # the room went to servers before it


def flavor_resources(vcpus: int, ram: int, disk: int, ephemeral: int,
                     swap: int, extra_specs: Mapping[str, str],
                     volume_backed: bool) -> dict[str, int]:
    """What a flavor asks placement for, as Nova builds it
    (``nova/scheduler/utils.py`` ``ResourceRequest.from_request_spec``):
    VCPU, MEMORY_MB and DISK_GB (root unless volume-backed, ephemeral,
    swap rounded up to a GB), each replaced by a ``resources:<class>``
    extra spec, which at 0 removes it. Numbered groups and PCPU pinning
    are not modelled."""
    found = {"VCPU": vcpus, "MEMORY_MB": ram,
             "DISK_GB": ((0 if volume_backed else disk) + ephemeral
                         + math.ceil(swap / 1024))}
    for key, value in extra_specs.items():
        prefix, _, rc = key.partition(":")
        if prefix == "resources" and rc:
            try:
                found[rc] = int(value)
            except ValueError:
                continue
    return {rc: n for rc, n in found.items() if n > 0}


def flavor_traits(extra_specs: Mapping[str, str]
                  ) -> tuple[frozenset[str], frozenset[str]]:
    """The (required, forbidden) traits of a flavor's ``trait:<name>``
    extra specs (unnumbered group only)."""
    required, forbidden = set(), set()
    for key, value in extra_specs.items():
        prefix, _, name = key.partition(":")
        if prefix == "trait" and name:
            if value == "required":
                required.add(name)
            elif value == "forbidden":
                forbidden.add(name)
    return frozenset(required), frozenset(forbidden)


@dataclasses.dataclass(frozen=True)
class HostRoom:
    """A host that may take servers, as placement sees it."""

    host: str
    #: {resource class: capacity}: (total - reserved) * allocation ratio.
    capacity: Mapping[str, int]
    used: Mapping[str, int]
    traits: frozenset[str] = frozenset()
    az: str | None = None

    def free(self, rc: str) -> int:
        return self.capacity.get(rc, 0) - self.used.get(rc, 0)


@dataclasses.dataclass(frozen=True)
class Need:
    """One server of a checked host: how migrate moves it, what it needs."""

    step: plan.Step
    resources: Mapping[str, int]
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    #: The zone it is pinned to (``pinned_availability_zone``), if any.
    az: str | None = None
    #: The hosts placement offered for its request; None: not asked.
    offered: frozenset[str] | None = None


@dataclasses.dataclass(frozen=True)
class Group:
    """An anti-affinity server group (other policies add no rule here:
    an affinity member is unmovable, the soft ones only weigh)."""

    name: str
    members: frozenset[str]
    max_per_host: int = 1


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Where one server would go, or why nowhere."""

    need: Need
    candidates: int
    destination: str = ""
    why: Why | None = None
    detail: str = ""

    @property
    def fits(self) -> bool:
        return bool(self.destination)

    @property
    def movable(self) -> bool:
        return self.need.step.action is not plan.Action.NONE


@dataclasses.dataclass(frozen=True)
class ClassRoom:
    """One resource class's free capacity before and after the moves."""

    resource_class: str
    capacity: int
    free_before: int
    free_after: int

    @property
    def fraction_before(self) -> float:
        return self.free_before / self.capacity if self.capacity else 0.0

    @property
    def fraction_after(self) -> float:
        return self.free_after / self.capacity if self.capacity else 0.0


@dataclasses.dataclass(frozen=True)
class Result:
    verdicts: list[Verdict]
    summary: list[ClassRoom]

    @property
    def homeless(self) -> list[Verdict]:
        """The movable servers with nowhere to go."""
        return [v for v in self.verdicts if v.movable and not v.fits]


def _tightest(need: Need, rooms: Sequence[HostRoom], total: bool) -> str:
    """The resource class short by the most at the best host, in words."""
    worst: tuple[float, str] | None = None
    for rc, amount in sorted(need.resources.items()):
        if amount <= 0:
            continue
        best = max((r.capacity.get(rc, 0) if total else r.free(rc)
                    for r in rooms), default=0)
        if best < amount and (worst is None or best / amount < worst[0]):
            where = "on any host" if total else "free on any host"
            worst = (best / amount,
                     f"{rc}: needs {amount}, at most {best} {where}")
    return worst[1] if worst else "no host has all of it at once"


def _fits(need: Need, room: HostRoom, total: bool = False) -> bool:
    return all((room.capacity.get(rc, 0) if total else room.free(rc))
               >= amount for rc, amount in need.resources.items()
               if amount > 0)


class _Packing:
    """The rooms and the groups' members per host as servers land."""

    def __init__(self, rooms: Iterable[HostRoom], groups: Iterable[Group],
                 where: Mapping[str, str]) -> None:
        # In host order; replacing a room keeps its place.
        self.rooms = {r.host: r for r in sorted(rooms, key=lambda r: r.host)}
        self.groups = list(groups)
        self.member_of: dict[str, list[Group]] = {}
        for g in self.groups:
            for member in g.members:
                self.member_of.setdefault(member, []).append(g)
        #: {group name: {host: members there}}, members living elsewhere
        #: included.
        self.count: dict[str, dict[str, int]] = {}
        for g in self.groups:
            per = self.count.setdefault(g.name, {})
            for member in g.members:
                if member in where:
                    per[where[member]] = per.get(where[member], 0) + 1

    def place(self, need: Need) -> Verdict:
        """Filter in the order of the reasons, weigh, take the room; the
        first filter that leaves no host is the reason."""
        pool = list(self.rooms.values())
        if not pool:
            return Verdict(need, 0, why=Why.NO_HOST)
        steps = (
            (Why.TRAIT, lambda r: need.required <= r.traits
             and not need.forbidden & r.traits, self._trait_text),
            (Why.AZ, lambda r: r.az == need.az if need.az else True,
             lambda n, p: f"pinned to {n.az}"),
            (Why.TOO_BIG, lambda r: _fits(need, r, total=True),
             lambda n, p: _tightest(n, p, total=True)),
            (Why.ANTI_AFFINITY, lambda r: not self._full(need, r.host),
             self._group_text),
            (Why.NO_ROOM, lambda r: _fits(need, r),
             lambda n, p: _tightest(n, p, total=False)),
            # Last: it names only what the model above does not explain
            # (placement's max_unit, step_size, a trait we did not read).
            (Why.PLACEMENT, lambda r: need.offered is None
             or r.host in need.offered,
             lambda n, p: "placement offered none of the hosts left"),
        )
        for why, keep, text in steps:
            kept = [r for r in pool if keep(r)]
            if not kept:
                return Verdict(need, 0, why=why, detail=text(need, pool))
            pool = kept
        best = min(pool, key=lambda r: (-r.free(RAM), r.host))
        self._take(need, best)
        return Verdict(need, len(pool), destination=best.host)

    @staticmethod
    def _trait_text(need: Need, pool: Sequence[HostRoom]) -> str:
        words = [f"required {t}" for t in sorted(need.required)]
        words += [f"forbidden {t}" for t in sorted(need.forbidden)]
        return "no host left with " + ", ".join(words)

    def _mine(self, need: Need) -> list[Group]:
        return self.member_of.get(need.step.server, [])

    def _full(self, need: Need, host: str) -> bool:
        """As ``nova/scheduler/filters/affinity_filter.py``
        ``_GroupAntiAffinityFilter.host_passes``: a host passes while it
        holds fewer members than ``max_server_per_host`` (default 1)."""
        return any(self.count[g.name].get(host, 0) >= g.max_per_host
                   for g in self._mine(need))

    def _group_text(self, need: Need, pool: Sequence[HostRoom]) -> str:
        return "; ".join(f"group {g.name}: at most {g.max_per_host} "
                         "member(s) a host" for g in self._mine(need))

    def _take(self, need: Need, room: HostRoom) -> None:
        used = dict(room.used)
        for rc, amount in need.resources.items():
            used[rc] = used.get(rc, 0) + amount
        self.rooms[room.host] = dataclasses.replace(room, used=used)
        for g in self._mine(need):
            per = self.count[g.name]
            per[room.host] = per.get(room.host, 0) + 1


def summary(before: Iterable[HostRoom], after: Iterable[HostRoom]
            ) -> list[ClassRoom]:
    """Every resource class's capacity and free room, before and after."""
    found: dict[str, list[int]] = {}
    for room in before:
        for rc, cap in room.capacity.items():
            sums = found.setdefault(rc, [0, 0, 0])
            sums[0] += cap
            sums[1] += room.free(rc)
    for room in after:
        for rc in room.capacity:
            found.setdefault(rc, [0, 0, 0])[2] += room.free(rc)
    return [ClassRoom(rc, *found[rc]) for rc in sorted(found)]


def simulate(needs: Iterable[Need], rooms: Iterable[HostRoom],
             groups: Iterable[Group] = (),
             where: Mapping[str, str] | None = None) -> Result:
    """Pack every movable server onto ``rooms``, in migrate's order.

    :param rooms: the hosts that may take servers: the hosts being checked
        and those our own reasons exclude are left out by the caller.
    :param where: {server: its host} for every member of ``groups``, so
        members living elsewhere count.
    """
    rooms = list(rooms)
    packing = _Packing(rooms, groups, where or {})
    order = {plan.Action.LIVE: 0, plan.Action.COLD: 1, plan.Action.NONE: 2}
    verdicts = []
    for need in sorted(needs, key=lambda n: (order[n.step.action],
                                             n.step.host, n.step.name)):
        if need.step.action is plan.Action.NONE:
            verdicts.append(Verdict(need, 0, why=Why.UNMOVABLE))
        else:
            verdicts.append(packing.place(need))
    return Result(verdicts, summary(rooms, packing.rooms.values()))
