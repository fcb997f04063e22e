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

"""``drain host check``'s engine: read the picture in bulk, then simulate.

Requests, whatever the number of servers: one server page per checked
host (2.96, flavors embedded), one server group list, one trait check,
and one ``GET /allocation_candidates`` per distinct request shape
(resources, required and forbidden traits). The cloud-wide picture (compute
nodes, services, servers, providers, our own exclusions) is the capacity
report's (:mod:`nova_drain_filters.report`), read once by the caller. The
decisions are :mod:`nova_drain_filters.fit`'s and
:mod:`nova_drain_filters.migration.plan`'s; nothing is written.
"""
import dataclasses
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import fit
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import placement
from nova_drain_filters.clients import server_moves
from nova_drain_filters.clients import server_needs
from nova_drain_filters.migration import facts
from nova_drain_filters.migration import plan

#: The zone of a host in no zone's aggregate (Nova's
#: ``[DEFAULT] default_availability_zone`` default).
DEFAULT_AZ = "nova"


@dataclasses.dataclass(frozen=True)
class Cloud:
    """What the caller read of the whole cloud, in bulk."""

    hypervisors: Sequence[compute.Hypervisor]
    #: Compute node UUIDs our own reasons exclude (disabled, down, stale,
    #: drained, unavailable): the capacity report's non-empty verdicts.
    excluded: Collection[str]
    aggregates: Sequence[compute.Aggregate]
    #: {server: its host} of every server.
    where: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Clients:
    needs: server_needs.NeedsClient
    moves: server_moves.MoveClient
    placement: placement.PlacementClient


Shape = tuple[tuple[tuple[str, int], ...], frozenset[str], frozenset[str]]


def zones(aggregates: Iterable[compute.Aggregate]) -> dict[str, str]:
    """{host: its zone} of every host in a zone's aggregate."""
    return {h: a.availability_zone for a in aggregates
            if a.availability_zone for h in a.hosts}


def _ironic_nodes(cloud: Cloud, host: str) -> set[str]:
    return {hv.hypervisor_hostname for hv in cloud.hypervisors
            if hv.host == host and decisions.is_ironic(hv.hypervisor_type)}


def needs_of(servers: Iterable[server_needs.ServerNeed], host: str,
             ironic_nodes: Collection[str],
             affinity: Mapping[str, tuple[str, int]]) -> list[fit.Need]:
    """Each server's need, classified exactly as migrate classifies it."""
    found = []
    for s in servers:
        step = plan.plan_move(plan.ServerFacts(
            uuid=s.uuid, name=s.name, host=host, status=s.status,
            task_state=s.task_state, baremetal=s.node in ironic_nodes,
            affinity=affinity.get(s.uuid)))
        required, forbidden = fit.flavor_traits(s.extra_specs)
        found.append(fit.Need(
            step, fit.flavor_resources(s.vcpus, s.ram, s.disk, s.ephemeral,
                                       s.swap, s.extra_specs,
                                       s.volume_backed),
            required, forbidden, s.pinned_az))
    return found


def _shape(need: fit.Need) -> Shape:
    return (tuple(sorted(need.resources.items())), need.required,
            need.forbidden)


def ask_placement(client: placement.PlacementClient,
                  needs: Sequence[fit.Need]
                  ) -> tuple[dict[Shape, frozenset[str]],
                             dict[str, placement.ProviderRoom]]:
    """One candidates request per distinct shape: the providers offered
    for each, and every summary seen.

    Placement answers 400 to a trait it has never seen: a required one
    nobody has means no candidate (not asked); a forbidden one forbids
    nothing (left out).
    """
    shapes = {_shape(n) for n in needs if n.resources}
    named = {t for _, req, forb in shapes for t in req | forb}
    known = client.existing_traits(named) if named else set()
    offered: dict[Shape, frozenset[str]] = {}
    rooms: dict[str, placement.ProviderRoom] = {}
    for shape in sorted(shapes, key=repr):
        resources, required, forbidden = shape
        if not required <= known:
            offered[shape] = frozenset()
            continue
        answer = client.allocation_candidates(
            dict(resources), required, forbidden & known)
        offered[shape] = answer.offered
        for uuid, summary in answer.summaries.items():
            rooms.setdefault(uuid, summary)
    return offered, rooms


def host_rooms(cloud: Cloud, summaries: Mapping[str, placement.ProviderRoom],
               checked: Collection[str]) -> tuple[list[fit.HostRoom],
                                                  dict[str, str]]:
    """The rooms of the hosts that may take servers, and {provider: host}.

    Left out: the hosts being checked, Ironic nodes (a baremetal server
    never migrates) and the nodes our own reasons exclude.
    """
    az = zones(cloud.aggregates)
    by_uuid = {hv.uuid: hv for hv in cloud.hypervisors}
    rooms, hosts = [], {}
    for uuid, summary in sorted(summaries.items()):
        hv = by_uuid.get(uuid)
        if (hv is None or hv.host in checked or uuid in cloud.excluded
                or decisions.is_ironic(hv.hypervisor_type)):
            continue
        hosts[uuid] = hv.host
        rooms.append(fit.HostRoom(
            hv.host, {rc: c for rc, (c, _) in summary.resources.items()},
            {rc: u for rc, (_, u) in summary.resources.items()},
            summary.traits, az.get(hv.host, DEFAULT_AZ)))
    return rooms, hosts


def provider_rooms(client: placement.PlacementClient,
                   classes: Iterable[str]
                   ) -> dict[str, dict[str, tuple[int, int]]]:
    """{provider: {class: (capacity, used)}} of every provider with room
    for one unit of any of ``classes``: one candidates request per class
    (a provider in none has no room for anything)."""
    found: dict[str, dict[str, tuple[int, int]]] = {}
    for rc in classes:
        answer = client.allocation_candidates({rc: 1})
        for uuid, summary in answer.summaries.items():
            found.setdefault(uuid, {}).update(summary.resources)
    return found


def anti_affinity(groups: Iterable[server_moves.ServerGroup]
                  ) -> list[fit.Group]:
    return [fit.Group(g.name or g.uuid, frozenset(g.members), g.max_per_host)
            for g in groups if g.policy == "anti-affinity"]


def _offer(need: fit.Need, offered: Mapping[Shape, frozenset[str]],
           host_of: Mapping[str, str]) -> fit.Need:
    """The need with the hosts placement offered for its shape."""
    rps = offered.get(_shape(need))
    if rps is None:
        return need
    return dataclasses.replace(need, offered=frozenset(
        host_of[rp] for rp in rps if rp in host_of))


def check(clients: Clients, cloud: Cloud,
          hosts: Sequence[str]) -> fit.Result:
    """Where every server of ``hosts`` would go if they left now."""
    servers = {h: clients.needs.servers_on(h) for h in hosts}
    groups = (clients.moves.server_groups()
              if any(servers.values()) else [])
    affinity = facts.affinity_members(groups)
    needs = [n for h in hosts for n in needs_of(
        servers[h], h, _ironic_nodes(cloud, h), affinity)]
    movable = [n for n in needs if n.step.action is not plan.Action.NONE]
    offered, summaries = ask_placement(clients.placement, movable)
    rooms, host_of = host_rooms(cloud, summaries, set(hosts))
    needs = [_offer(n, offered, host_of) for n in needs]
    return fit.simulate(needs, rooms, anti_affinity(groups), cloud.where)
