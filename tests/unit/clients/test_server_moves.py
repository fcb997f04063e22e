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

"""MoveClient: the Nova calls ``drain host migrate`` makes, at 2.84."""
from nova_drain_filters.clients import http
from nova_drain_filters.clients import server_moves
from tests.unit.clients import nova_api
from tests.unit.clients.nova_api import ENDPOINT
from tests.unit.clients.nova_api import SRV1


class MovesTestCase(nova_api.NovaTestCase):
    CLIENT = server_moves.MoveClient

    def version(self) -> str:
        return str(self.mock.last_request.headers["OpenStack-API-Version"])


class TestMoves(MovesTestCase):
    def test_live_migrate_lets_the_scheduler_pick(self) -> None:
        self.mock.post(ENDPOINT + f"/servers/{SRV1}/action", status_code=202)
        self.client.live_migrate(SRV1)
        self.assertEqual({"os-migrateLive": {"host": None,
                                             "block_migration": "auto"}},
                         self.mock.last_request.json())
        self.assertEqual("compute 2.84", self.version())

    def test_cold_migrate_and_confirm(self) -> None:
        self.mock.post(ENDPOINT + f"/servers/{SRV1}/action", status_code=202)
        self.client.cold_migrate(SRV1)
        self.assertEqual({"migrate": None}, self.mock.last_request.json())
        self.client.confirm_resize(SRV1)
        self.assertEqual({"confirmResize": None},
                         self.mock.last_request.json())

    def test_409_is_a_conflict(self) -> None:
        self.mock.post(ENDPOINT + f"/servers/{SRV1}/action", status_code=409,
                       json={"conflictingRequest": {
                           "message": "task_state migrating", "code": 409}})
        exc = self.assertRaises(http.Conflict, self.client.live_migrate, SRV1)
        self.assertIn("task_state migrating", str(exc))

    def test_abort(self) -> None:
        self.mock.delete(ENDPOINT + f"/servers/{SRV1}/migrations/7",
                         status_code=202)
        self.client.abort_live_migration(SRV1, 7)
        self.assertEqual(("DELETE", "compute 2.84"),
                         (self.mock.last_request.method, self.version()))

    def test_records_and_changes_since(self) -> None:
        body = dict(nova_api.mig_body("m1", "running", 7),
                    migration_type="live-migration", source_compute="c1",
                    dest_compute="c2")
        self.mock.get(ENDPOINT + "/os-migrations",
                      **nova_api.page("migrations", [body]))
        found = self.client.migration_records(
            changes_since="2026-01-01T00:00:00Z")
        self.assertEqual([(7, "running", "live-migration", "c1")],
                         [(r.id, r.status, r.migration_type,
                           r.source_compute) for r in found])
        self.assertEqual([{"changes-since": ["2026-01-01T00:00:00Z"],
                           "limit": ["1000"]}], self.queries())
        self.assertEqual("compute 2.84", self.version())

    def test_server_state(self) -> None:
        body = dict(nova_api.server_body(SRV1), name="web")
        body["OS-EXT-STS:task_state"] = "migrating"
        self.mock.get(ENDPOINT + f"/servers/{SRV1}", json={"server": body})
        found = self.client.server_state(SRV1)
        assert found is not None
        self.assertEqual(("web", "migrating", "c1"),
                         (found.name, found.task_state, found.host))
        self.mock.get(ENDPOINT + f"/servers/{SRV1}", status_code=404)
        self.assertIsNone(self.client.server_state(SRV1))

    def test_server_groups_page_by_offset(self) -> None:
        full = [{"id": f"g{i}", "name": "n", "policy": "affinity",
                 "members": ["a", "b"]} for i in range(1000)]
        self.mock.get(ENDPOINT + "/os-server-groups", response_list=[
            {"json": {"server_groups": full}},
            {"json": {"server_groups": [{"id": "last", "policy":
                                         "anti-affinity", "rules": {
                                             "max_server_per_host": 3}}]}}])
        found = self.client.server_groups()
        self.assertEqual(1001, len(found))
        self.assertEqual(("a", "b"), found[0].members)
        self.assertEqual((1, 3), (found[0].max_per_host,
                                  found[-1].max_per_host))
        self.assertEqual([["0"], ["1000"]],
                         [q["offset"] for q in self.queries()])
        self.assertEqual(["True"], self.queries()[0]["all_projects"])

    def test_faults_of_the_newest_action_compute_first(self) -> None:
        self.mock.get(ENDPOINT + f"/servers/{SRV1}/os-instance-actions",
                      json={"instanceActions": [
                          {"action": "live-migration", "request_id": "req-2"},
                          {"action": "live-migration", "request_id": "req-1"}]})
        self.mock.get(
            ENDPOINT + f"/servers/{SRV1}/os-instance-actions/req-2",
            json={"instanceAction": {"events": [
                {"event": "conductor_live_migrate_instance",
                 "result": "Error", "details": "No valid host"},
                {"event": "compute_check_can_live_migrate_destination",
                 "result": "Error", "details": "no room"},
                {"event": "compute_other", "result": "Success"}]}})
        self.assertEqual(
            ["compute_check_can_live_migrate_destination: no room",
             "conductor_live_migrate_instance: No valid host"],
            self.client.action_faults(SRV1, ("live-migration",)))
        self.assertEqual([], self.client.action_faults(SRV1, ("migrate",)))
