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

"""The capacity report: how much capacity cannot be scheduled, and why.

Pure functions from the picture the CLI gathers (Nova's records, placement's
providers and forbidden traits, Ironic's nodes) to one verdict per compute
node and then to rows. The reasons are the decision core's, asked of
``decisions`` and ``drain``, never worked out again here. A node with
several is counted once, under its first in the filters' order:

======  =================================================  ================
rank    reasons (keys)                                     where they come
======  =================================================  ================
0       ``drain_draining``, ``drain_drained``              a host or node
                                                           drain (its phase)
1       ``service_disabled``, ``service_forced_down``,     DisabledService
        ``service_down``                                   Filter
2       ``duplicate_node``, ``ironic_node_missing``,       StaleComputeNode
        ``node_without_provider``                          Filter (and stale)
3       ``baremetal_unavailable:<Ironic state>``           BaremetalAvail-
                                                           abilityFilter
4       ``trait:<forbidden trait>``                        the pre-filter
======  =================================================  ================

A drain comes first because it is the operator's own reason for the
disable and the mark it sets. A deployed Ironic node is not lost capacity:
its instance, allocation and deploy-state reasons are left out, as a busy
hypervisor's used VCPUs are not lost either.
"""
import dataclasses
import datetime
import re
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters import node_drain
from nova_drain_filters import traits
from nova_drain_filters.clients import compute

SCHEDULABLE = "Schedulable"
TOTAL = "Total"
#: The group of a host in no aggregate, and in no availability zone.
NO_GROUP = "(none)"
BY = ("reason", "host", "aggregate", "az")
#: Provision states of a node its instance is on, or being put on.
IN_USE_STATES = frozenset({"active", "deploying", "wait call-back"})
_IN_USE = frozenset({"instance_uuid", "allocation_uuid"})

_RANKS: dict[str, tuple[int, int]] = {
    f"drain_{drain.Phase.DRAINING.value.lower()}": (0, 0),
    f"drain_{drain.Phase.DRAINED.value.lower()}": (0, 1),
    decisions.ReasonCode.SERVICE_DISABLED.value: (1, 0),
    decisions.ReasonCode.SERVICE_FORCED_DOWN.value: (1, 1),
    decisions.ReasonCode.SERVICE_DOWN.value: (1, 2),
    decisions.ReasonCode.DUPLICATE_NODE.value: (2, 0),
    decisions.ReasonCode.IRONIC_NODE_MISSING.value: (2, 1),
    decisions.ReasonCode.NODE_WITHOUT_PROVIDER.value: (2, 2),
}
#: Order of the Ironic conditions, as ``decisions.baremetal_reasons``
#: checks them.
_BAREMETAL = ("provision_state", "maintenance", "power_state", "retired",
              "fault")


def rank(key: str) -> tuple[int, int, str]:
    """Where a reason key stands in the filters' order (see the module)."""
    if key in _RANKS:
        return _RANKS[key] + (key,)
    family, _, rest = key.partition(":")
    if family == decisions.ReasonCode.BAREMETAL_UNAVAILABLE.value:
        condition = rest.partition("=")[0]
        where = (_BAREMETAL.index(condition) if condition in _BAREMETAL
                 else len(_BAREMETAL))
        return (3, where, key)
    forbidden = traits.DEFAULT_FORBIDDEN
    return (4, forbidden.index(rest) if rest in forbidden else len(forbidden),
            key)


def resource_class(ironic_class: str) -> str:
    """The class Nova's Ironic driver gives a node's ``resource_class``
    (``nova/utils.py`` ``normalize_rc_name``)."""
    return "CUSTOM_" + re.sub("[^0-9A-Za-z]+", "_", ironic_class).upper()


@dataclasses.dataclass(frozen=True)
class Picture:
    """What the CLI read, in bulk; the report's only input."""

    hypervisors: Sequence[compute.Hypervisor]
    services: Sequence[compute.Service]
    #: Every resource provider UUID.
    providers: Collection[str]
    #: {forbidden trait: the providers carrying it}.
    marked: Mapping[str, Collection[str]]
    #: Ironic's nodes by UUID; None without Ironic in the catalog.
    ironic: Mapping[str, decisions.IronicNodeFacts] | None
    servers: Sequence[compute.Server]
    migrations: Sequence[compute.Migration]
    now: datetime.datetime


@dataclasses.dataclass(frozen=True)
class NodeVerdict:
    """One compute node: its reasons in the filters' order, its inventory."""

    host: str
    node: str
    uuid: str
    reasons: tuple[str, ...]
    inventory: tuple[tuple[str, int], ...]

    @property
    def first(self) -> str | None:
        """The reason it is counted under; None: schedulable."""
        return self.reasons[0] if self.reasons else None


def _host_phases(p: Picture) -> dict[str, drain.Phase]:
    """The drain phase of every host with a service; allocations without a
    server or migration are not read (one request per provider)."""
    by_host: dict[str, list[compute.Hypervisor]] = {}
    for hv in p.hypervisors:
        by_host.setdefault(hv.host, []).append(hv)
    servers: dict[str | None, list[str]] = {}
    for s in p.servers:
        servers.setdefault(s.host, []).append(s.uuid)
    moving: dict[str | None, list[str]] = {}
    for m in p.migrations:
        for host in {m.source_compute, m.dest_compute}:
            moving.setdefault(host, []).append(m.uuid)
    phases = {}
    for svc in p.services:
        facts = drain.HostFacts(
            svc.host, svc.facts,
            tuple(_mark(p, hv) for hv in by_host.get(svc.host, ())),
            tuple(servers.get(svc.host, ())),
            tuple(moving.get(svc.host, ())))
        phases[svc.host] = drain.host_phase(facts)
    return phases


def _mark(p: Picture, hv: compute.Hypervisor) -> drain.NodeMark:
    node = (p.ironic or {}).get(hv.hypervisor_hostname)
    return drain.NodeMark(
        hv.uuid, hv.hypervisor_hostname,
        ironic=decisions.is_ironic(hv.hypervisor_type),
        provider=hv.uuid in p.providers,
        in_placement=hv.uuid in p.marked.get(traits.DRAIN_HOST, ()),
        in_ironic=node is not None and traits.DRAIN_HOST in node.traits)


def _drained(phase: drain.Phase | None) -> list[str]:
    if phase in (drain.Phase.DRAINING, drain.Phase.DRAINED):
        return [f"drain_{phase.value.lower()}"]
    return []


def _baremetal(node: decisions.IronicNodeFacts) -> list[str]:
    found = []
    for reason in decisions.baremetal_reasons(node):
        state = reason.state
        if node.instance_uuid and (state in _IN_USE or state in {
                f"provision_state={s}" for s in IN_USE_STATES}):
            continue
        found.append(f"{reason.code.value}:{state}")
    return found


def _inventory(hv: compute.Hypervisor,
               node: decisions.IronicNodeFacts | None
               ) -> tuple[tuple[str, int], ...]:
    """A node's total inventory, without a request of its own.

    A hypervisor's is its record's VCPU, MEMORY_MB and DISK_GB. An Ironic
    node's is one unit of its resource class (``nova/virt/ironic/driver.py``
    ``update_provider_tree``), known only while Ironic lists the node:
    placement has no bulk inventory read.
    """
    if not decisions.is_ironic(hv.hypervisor_type):
        return hv.totals
    if node is not None and node.resource_class:
        return ((resource_class(node.resource_class), 1),)
    return ()


def judge(p: Picture) -> list[NodeVerdict]:
    """Every compute node's reasons, first reason first; a pure function."""
    services = {s.host: s for s in p.services}
    phases = _host_phases(p)
    duplicates = decisions.duplicate_reasons(h.facts for h in p.hypervisors)
    verdicts = []
    for hv in p.hypervisors:
        keys = _drained(phases.get(hv.host))
        node = (p.ironic or {}).get(hv.hypervisor_hostname)
        if not keys and node is not None and decisions.is_ironic(
                hv.hypervisor_type):
            keys = _drained(node_drain.node_phase(node_drain.BaremetalFacts(
                hv.hypervisor_hostname, _mark(p, hv), hv.host,
                node.instance_uuid)))
        svc = services.get(hv.host)
        if svc is not None:
            keys += [r.code.value for r in
                     decisions.service_reasons(svc.facts, p.now)]
        if hv.facts.key in duplicates:
            keys.append(decisions.ReasonCode.DUPLICATE_NODE.value)
        ironic = decisions.is_ironic(hv.hypervisor_type)
        if ironic and p.ironic is not None and node is None:
            keys.append(decisions.ReasonCode.IRONIC_NODE_MISSING.value)
        if hv.uuid not in p.providers:
            keys.append(decisions.ReasonCode.NODE_WITHOUT_PROVIDER.value)
        if ironic and node is not None:
            keys += _baremetal(node)
        keys += [f"trait:{t}" for t in traits.DEFAULT_FORBIDDEN
                 if hv.uuid in p.marked.get(t, ())]
        inventory = _inventory(hv, node)
        verdicts.append(NodeVerdict(
            hv.host, hv.hypervisor_hostname, hv.uuid,
            tuple(sorted(dict.fromkeys(keys), key=rank)), inventory))
    return verdicts


@dataclasses.dataclass(frozen=True)
class Row:
    """One row: a reason (or Schedulable, Total) within a group."""

    group: str | None
    reason: str
    hosts: int
    nodes: int
    inventory: Mapping[str, int]
    #: The nodes counted here, for ``-f json`` (none on Schedulable, Total).
    members: tuple[NodeVerdict, ...] = ()


def _row(group: str | None, reason: str, nodes: Sequence[NodeVerdict],
         members: bool = True) -> Row:
    inventory: dict[str, int] = {}
    for v in nodes:
        for rc, total in v.inventory:
            inventory[rc] = inventory.get(rc, 0) + total
    return Row(group, reason, len({v.host for v in nodes}), len(nodes),
               inventory, tuple(nodes) if members else ())


def _rows_of(group: str | None, nodes: Sequence[NodeVerdict]) -> list[Row]:
    by_reason: dict[str, list[NodeVerdict]] = {}
    for v in nodes:
        if v.first is not None:
            by_reason.setdefault(v.first, []).append(v)
    rows = [_row(group, key, by_reason[key])
            for key in sorted(by_reason, key=rank)]
    rows.append(_row(group, SCHEDULABLE,
                     [v for v in nodes if v.first is None], members=False))
    rows.append(_row(group, TOTAL, nodes, members=False))
    return rows


def rows(verdicts: Sequence[NodeVerdict], by: str = "reason",
         groups: Mapping[str, Sequence[str]] | None = None) -> list[Row]:
    """Rows per reason, then Schedulable and Total; per group with ``by``.

    :param groups: {host: its aggregates or its availability zone}, for
        ``by`` aggregate or az; a host in none is in NO_GROUP. A host in
        two aggregates is in both groups' rows.
    """
    if by == "reason":
        return _rows_of(None, verdicts)
    members: dict[str, list[NodeVerdict]] = {}
    for v in verdicts:
        names = [v.host] if by == "host" else list(
            (groups or {}).get(v.host) or [NO_GROUP])
        for name in names:
            members.setdefault(name, []).append(v)
    return [row for name in sorted(members)
            for row in _rows_of(name, members[name])]


def resource_classes(verdicts: Iterable[NodeVerdict]) -> list[str]:
    """Every resource class of the inventory, the columns: standard ones
    first, then custom ones, each sorted."""
    return sorted({rc for v in verdicts for rc, _ in v.inventory},
                  key=lambda rc: (rc.startswith("CUSTOM_"), rc))


def fractions(verdicts: Sequence[NodeVerdict]) -> dict[str, float]:
    """{resource class: unschedulable share of its total inventory}."""
    total = _row(None, TOTAL, verdicts).inventory
    lost = _row(None, "", [v for v in verdicts if v.first]).inventory
    return {rc: lost.get(rc, 0) / n for rc, n in total.items() if n}


def over(verdicts: Sequence[NodeVerdict], max_fraction: float) -> list[str]:
    """The classes whose unschedulable share exceeds ``max_fraction``."""
    return sorted(rc for rc, f in fractions(verdicts).items()
                  if f > max_fraction)


def groups_by(aggregates: Iterable[compute.Aggregate],
              by: str) -> dict[str, list[str]]:
    """{host: its aggregates' names} or, for ``az``, {host: [its zone]}.

    A host takes the zone of an aggregate that sets one (Nova allows one
    zone per host, ``nova/compute/api.py`` ``AggregateAPI``).
    """
    found: dict[str, list[str]] = {}
    for agg in aggregates:
        name = agg.name if by == "aggregate" else agg.availability_zone
        if not name:
            continue
        for host in agg.hosts:
            if name not in found.setdefault(host, []):
                found[host].append(name)
    return found
