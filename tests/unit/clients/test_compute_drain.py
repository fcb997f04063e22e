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

"""The ComputeClient and IronicClient calls the drain commands add."""
from nova_drain_filters.clients import http
from tests.unit.clients import ironic_api
from tests.unit.clients import nova_api
from tests.unit.clients.nova_api import ENDPOINT
from tests.unit.clients.nova_api import SVC


def service_body(status: str = "enabled",
                 reason: str | None = None) -> dict:
    return {"id": SVC, "host": "c1", "state": "up", "status": status,
            "forced_down": False, "disabled_reason": reason,
            "updated_at": None}


class TestServices(nova_api.NovaTestCase):
    def test_one_hosts_services(self) -> None:
        self.mock.get(ENDPOINT + "/os-services",
                      json={"services": [service_body()]})
        self.assertEqual(["c1"], [s.host for s in self.client.services("c1")])
        self.assertEqual([{"binary": ["nova-compute"], "host": ["c1"]}],
                         self.queries())

    def test_disable_with_reason_and_enable(self) -> None:
        self.mock.put(ENDPOINT + f"/os-services/{SVC}", json={
            "service": service_body("disabled", "drain: x")})
        found = self.client.update_service(SVC, disabled=True,
                                           reason="drain: x")
        self.assertEqual(("disabled", "drain: x"),
                         (found.status, found.disabled_reason))
        self.assertEqual({"status": "disabled", "disabled_reason": "drain: x"},
                         self.mock.last_request.json())
        self.assertEqual("compute 2.59", self.mock.last_request.headers[
            "OpenStack-API-Version"])
        self.client.update_service(SVC, disabled=False, reason="ignored")
        self.assertEqual({"status": "enabled"}, self.mock.last_request.json())

    def test_aggregates(self) -> None:
        self.mock.get(ENDPOINT + "/os-aggregates", json={"aggregates": [
            {"id": 3, "name": "rack7", "hosts": ["c1", "c2"]},
            {"id": 4, "name": None, "hosts": None}]})
        found = self.client.aggregates()
        self.assertEqual([(3, "rack7", ("c1", "c2")), (4, "", ())],
                         [(a.id, a.name, a.hosts) for a in found])

    def test_host_mapped(self) -> None:
        self.mock.get(ENDPOINT + "/os-hosts/c1", json={"host": []})
        self.assertTrue(self.client.host_mapped("c1"))
        self.assertEqual("compute 2.42", self.mock.last_request.headers[
            "OpenStack-API-Version"])
        self.mock.get(ENDPOINT + "/os-hosts/c2", status_code=404, json={
            "itemNotFound": {"message": "Host 'c2' is not mapped to any "
                             "cell", "code": 404}})
        self.assertFalse(self.client.host_mapped("c2"))
        self.mock.get(ENDPOINT + "/os-hosts/c3", status_code=500)
        self.assertRaises(http.ApiError, self.client.host_mapped, "c3")

    def test_servers_and_migrations_of_one_host(self) -> None:
        self.mock.get(ENDPOINT + "/servers/detail", **nova_api.page(
            "servers", [nova_api.server_body(nova_api.SRV1)]))
        self.assertEqual(1, len(self.client.servers(host="c1")))
        mig = dict(nova_api.mig_body(nova_api.MIG1, "running", 1),
                   source_compute="c1", dest_compute="c2")
        self.mock.get(ENDPOINT + "/os-migrations",
                      **nova_api.page("migrations", [mig]))
        found = self.client.migrations_in_progress("c2")
        self.assertEqual([("c1", "c2")], [(m.source_compute, m.dest_compute)
                                          for m in found])
        self.assertEqual([{"all_tenants": ["1"], "host": ["c1"],
                           "limit": ["1000"]},
                          {"host": ["c2"], "limit": ["1000"]}],
                         self.queries())


class TestIronicNode(ironic_api.IronicTestCase):
    def test_node_by_name_and_unknown(self) -> None:
        url = ironic_api.ENDPOINT + "/v1/nodes/bm%201"
        self.mock.get(url, json={"uuid": "u1", "name": "bm 1",
                                 "traits": ["CUSTOM_DRAIN_HOST"]})
        found = self.client.get_node("bm 1")
        assert found is not None
        self.assertEqual(("u1", frozenset({"CUSTOM_DRAIN_HOST"})),
                         (found.uuid, found.traits))
        self.assertIn("instance_uuid",
                      ironic_api.query(self.mock.last_request)["fields"])
        self.mock.get(ironic_api.ENDPOINT + "/v1/nodes/nope",
                      status_code=404, json=ironic_api.ironic_error("no"))
        self.assertIsNone(self.client.get_node("nope"))

    def test_node_traits(self) -> None:
        self.mock.get(ironic_api.ENDPOINT + "/v1/nodes/u1/traits",
                      json={"traits": ["A", "B"]})
        self.assertEqual({"A", "B"}, self.client.node_traits("u1"))
        self.assertEqual("baremetal 1.61", self.mock.last_request.headers[
            "OpenStack-API-Version"])
