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

"""Read a drained host's servers and migrations into moves, and what is left.

Requests per host: its servers (pages of 1,000), its migration records
(pages), one read per server group its servers are in, and one read per
server a rerun finds mid-move elsewhere (a cold migration awaiting its
confirm). The decisions are :mod:`nova_drain_filters.migration.plan`'s.
"""
import dataclasses
from collections.abc import Collection
from collections.abc import Iterable

from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import runner
from nova_drain_filters.migration import tracking


@dataclasses.dataclass
class HostMoves:
    """One host's moves (resumed ones carry their record) and the steps
    of the servers that stay."""

    host: str
    moves: list[tracking.Move]
    unmovable: list[plan.Step]


def _affinity(client: server_moves.MoveClient
              ) -> dict[str, tuple[str, int]]:
    return affinity_members(client.server_groups())


def affinity_members(groups: Iterable[server_moves.ServerGroup]
                     ) -> dict[str, tuple[str, int]]:
    """Affinity groups by member: (group name, count of other members)."""
    found: dict[str, tuple[str, int]] = {}
    for group in groups:
        if group.policy == "affinity" and len(group.members) > 1:
            for member in group.members:
                found[member] = (group.name or group.uuid,
                                 len(group.members) - 1)
    return found


def gather(client: server_moves.MoveClient, host: str,
           ironic_nodes: Collection[str]) -> HostMoves:
    """Moves for every server on ``host``, picking up the migrations of a
    run that stopped (ours: a live or cold migration from ``host`` that is
    not over; a ``resize`` is someone else's).

    :param ironic_nodes: the host's Ironic node names: their servers are
        baremetal, which Nova cannot migrate.
    """
    servers = client.servers_on(host)
    records = client.migration_records(host=host)
    known: dict[str, set[int]] = {}
    resumed: dict[str, server_moves.MigrationRecord] = {}
    for record in sorted(records, key=lambda r: r.id):
        known.setdefault(record.instance_uuid, set()).add(record.id)
        if (record.status not in plan.FINAL and record.source_compute == host
                and record.migration_type in runner.TYPES):
            resumed[record.instance_uuid] = record
    affinity = _affinity(client) if servers else {}
    moves, unmovable = [], []
    on_host = {s.uuid: s for s in servers}
    for uuid, record in resumed.items():
        server = on_host.pop(uuid, None) or client.server_state(uuid)
        step = plan.Step(host, uuid, server.name if server else "",
                         runner.TYPES[record.migration_type])
        moves.append(tracking.Move(step, known=known[uuid] - {record.id},
                                   record=record))
    for step in plan.plan_moves(plan.ServerFacts(
            uuid=s.uuid, name=s.name, host=host, status=s.status,
            task_state=s.task_state, baremetal=s.node in ironic_nodes,
            affinity=affinity.get(s.uuid)) for s in on_host.values()):
        if step.action is plan.Action.NONE:
            unmovable.append(step)
        else:
            moves.append(tracking.Move(step, known=known.get(step.server,
                                                             set())))
    return HostMoves(host, moves, unmovable)


def load(client: server_moves.MoveClient, host: str) -> plan.HostLoad:
    """What is left on ``host`` after a run: its servers, and migrations
    from or to it that are not over."""
    servers = tuple(s.uuid for s in client.servers_on(host))
    unfinished = tuple(
        r.uuid for r in client.migration_records(host=host)
        if r.status not in plan.FINAL)
    return plan.HostLoad(host, servers, unfinished)
