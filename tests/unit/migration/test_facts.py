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

"""Reading a drained host into moves: resume, groups, baremetal, leftovers."""
from typing import Any

import testtools

from nova_drain_filters.clients.server_moves import MigrationRecord
from nova_drain_filters.clients.server_moves import ServerGroup
from nova_drain_filters.clients.server_moves import ServerState
from nova_drain_filters.migration import facts
from nova_drain_filters.migration import plan


def state(uuid: str, status: str = "ACTIVE", host: str = "h1",
          task: str | None = None, node: str = "n1") -> ServerState:
    return ServerState(uuid, f"name-{uuid}", status, task, host, node)


def record(rid: int, uuid: str, status: str, kind: str = "live-migration",
           source: str = "h1", dest: str | None = "h2") -> MigrationRecord:
    return MigrationRecord(rid, f"m{rid}", uuid, status, kind, source, dest)


class FakeMoves:
    def __init__(self, servers: list[ServerState],
                 records: list[MigrationRecord],
                 groups: list[ServerGroup] = (),  # type: ignore[assignment]
                 elsewhere: dict[str, ServerState] | None = None) -> None:
        self.servers, self.records, self.groups = servers, records, groups
        self.elsewhere = elsewhere or {}

    def servers_on(self, host: str) -> list[ServerState]:
        return [s for s in self.servers if s.host == host]

    def migration_records(self, host: str | None = None) -> list[Any]:
        return [r for r in self.records
                if host in (r.source_compute, r.dest_compute)]

    def server_groups(self) -> list[ServerGroup]:
        return list(self.groups)

    def server_state(self, uuid: str) -> ServerState | None:
        return self.elsewhere.get(uuid)


class TestGather(testtools.TestCase):
    def test_moves_unmovable_and_resumed(self) -> None:
        client = FakeMoves(
            servers=[state("a"), state("b", "SHUTOFF"),
                     state("c", "MIGRATING", task="migrating"),
                     state("d", "SUSPENDED"), state("e", node="ironic-1"),
                     state("f"), state("g"),
                     state("r", "VERIFY_RESIZE")],
            records=[record(1, "a", "completed", dest="h1", source="h9"),
                     record(2, "c", "running"),
                     record(3, "z", "finished", kind="migration"),
                     record(4, "r", "finished", kind="resize", source="h9",
                            dest="h1")],
            groups=[ServerGroup("g1", "pair", "affinity", ("f", "g")),
                    ServerGroup("g2", "spread", "anti-affinity", ("a", "x"))],
            elsewhere={"z": state("z", "VERIFY_RESIZE", host="h2")})
        found = facts.gather(client, "h1", {"ironic-1"})  # type: ignore
        moves = {m.step.server: m for m in found.moves}
        self.assertEqual({"a", "b", "c", "z"}, set(moves))
        self.assertEqual({1}, moves["a"].known)
        self.assertIsNone(moves["a"].record)
        self.assertEqual(("running", plan.Action.LIVE),
                         (moves["c"].record.status, moves["c"].step.action))
        self.assertEqual(("finished", plan.Action.COLD, "name-z"),
                         (moves["z"].record.status, moves["z"].step.action,
                          moves["z"].step.name))
        self.assertEqual(plan.Action.COLD, moves["b"].step.action)
        self.assertEqual({"d": plan.Why.SUSPENDED, "e": plan.Why.BAREMETAL,
                          "f": plan.Why.AFFINITY, "g": plan.Why.AFFINITY,
                          "r": plan.Why.FOREIGN_RESIZE},
                         {s.server: s.why for s in found.unmovable})

    def test_load_counts_a_finished_migration(self) -> None:
        client = FakeMoves([], [record(1, "a", "finished", kind="migration"),
                                record(2, "b", "completed")])
        load = facts.load(client, "h1")  # type: ignore[arg-type]
        self.assertEqual(((), ("m1",)), (load.servers, load.unfinished))
        self.assertFalse(plan.host_done(load))
