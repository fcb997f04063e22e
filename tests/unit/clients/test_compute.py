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

"""ComputeClient against requests_mock, through a real keystoneauth1 Adapter."""

from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from tests.unit import fakes
from tests.unit.clients.nova_api import ENDPOINT
from tests.unit.clients.nova_api import HV1
from tests.unit.clients.nova_api import HV2
from tests.unit.clients.nova_api import HV3
from tests.unit.clients.nova_api import MIG1
from tests.unit.clients.nova_api import MIG2
from tests.unit.clients.nova_api import SRV1
from tests.unit.clients.nova_api import SRV2
from tests.unit.clients.nova_api import SVC
from tests.unit.clients.nova_api import NovaTestCase
from tests.unit.clients.nova_api import hv_body
from tests.unit.clients.nova_api import mig_body
from tests.unit.clients.nova_api import page
from tests.unit.clients.nova_api import server_body


class TestPagination(NovaTestCase):
    def test_hypervisors_follow_next_with_last_uuid_as_marker(self) -> None:
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", response_list=[
            page("hypervisors", [hv_body(HV1, "n1"), hv_body(HV2, "n2")],
                 more=True),
            page("hypervisors", [hv_body(HV3, "n3")])])
        found = self.client.hypervisors()
        self.assertEqual([HV1, HV2, HV3], [h.uuid for h in found])
        self.assertEqual([{"limit": ["1000"]},
                          {"limit": ["1000"], "marker": [HV2]}],
                         self.queries())
        self.assertEqual(fakes.VERSION_CHECK + 2, self.client.requests)

    def test_compute_microversion_headers(self) -> None:
        self.mock.get(ENDPOINT + "/os-hypervisors/detail",
                      **page("hypervisors", []))
        self.client.hypervisors()
        headers = self.mock.last_request.headers
        self.assertEqual("2.59", headers["X-OpenStack-Nova-API-Version"])
        self.assertEqual("compute 2.59", headers["OpenStack-API-Version"])

    def test_no_next_link_is_the_last_page(self) -> None:
        self.mock.get(ENDPOINT + "/os-hypervisors/detail",
                      **page("hypervisors", [hv_body(HV1, "n1")]))
        self.assertEqual(1, len(self.client.hypervisors()))
        self.assertEqual(1, len(self.api_calls()))

    def test_link_without_rel_next_is_the_last_page(self) -> None:
        body = page("hypervisors", [hv_body(HV1, "n1")])
        body["json"]["hypervisors_links"] = [{"rel": "self", "href": "x"}]
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", **body)
        self.client.hypervisors()
        self.assertEqual(1, len(self.api_calls()))

    def test_empty_page_stops_even_with_next(self) -> None:
        self.mock.get(ENDPOINT + "/os-hypervisors/detail",
                      **page("hypervisors", [], more=True))
        self.assertEqual([], self.client.hypervisors())
        self.assertEqual(1, len(self.api_calls()))

    def test_marker_that_does_not_advance_is_an_error(self) -> None:
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", **page(
            "hypervisors", [hv_body(HV1, "n1")], more=True))
        exc = self.assertRaises(http.ApiError, self.client.hypervisors)
        self.assertIn("pagination marker did not advance", str(exc))
        self.assertEqual(2, len(self.api_calls()))

    def test_too_many_pages(self) -> None:
        self.patch(http, "MAX_PAGES", 2)
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", response_list=[
            page("hypervisors", [hv_body(HV1, "n1")], more=True),
            page("hypervisors", [hv_body(HV2, "n2")], more=True),
            page("hypervisors", [hv_body(HV3, "n3")])])
        exc = self.assertRaises(http.ApiError, self.client.hypervisors)
        self.assertIn("too many pages", str(exc))

    def test_servers_all_tenants_on_every_page(self) -> None:
        self.mock.get(ENDPOINT + "/servers/detail", response_list=[
            page("servers", [server_body(SRV1)], more=True),
            page("servers", [server_body(SRV2, None, None)])])
        found = self.client.servers()
        self.assertEqual([
            compute.Server(SRV1, "ACTIVE", "c1", "n1", "proj"),
            compute.Server(SRV2, "ACTIVE", None, None, "proj")], found)
        self.assertEqual(
            [{"all_tenants": ["1"], "limit": ["1000"]},
             {"all_tenants": ["1"], "limit": ["1000"], "marker": [SRV1]}],
            self.queries())

    def test_migrations_marker_is_uuid_and_done_ones_dropped(self) -> None:
        self.mock.get(ENDPOINT + "/os-migrations", response_list=[
            page("migrations", [mig_body(MIG1, "running", 7),
                                mig_body(MIG2, "confirmed", 8)], more=True),
            page("migrations", [mig_body(MIG1, "finished", 9)])])
        found = self.client.migrations_in_progress()
        self.assertEqual(
            [compute.Migration(MIG1, SRV1, "running", "n1", "n2"),
             compute.Migration(MIG1, SRV1, "finished", "n1", "n2")], found)
        self.assertEqual([MIG2], self.queries()[1]["marker"])

    def test_every_done_status_is_dropped(self) -> None:
        done = sorted(compute.MIGRATION_DONE)
        self.mock.get(ENDPOINT + "/os-migrations", **page(
            "migrations", [mig_body(MIG1, s, i) for i, s in enumerate(done)]
            + [mig_body(MIG2, "post-migrating", 99)]))
        found = self.client.migrations_in_progress()
        self.assertEqual([MIG2], [m.uuid for m in found])
        self.assertEqual({"confirmed", "reverted", "error", "failed",
                          "completed", "done", "cancelled"}, set(done))


class TestRecords(NovaTestCase):
    def test_hypervisor_fields_and_facts(self) -> None:
        down = hv_body(HV2, "n2", host="c2", state="down", htype="QEMU")
        bare = {"id": HV3, "state": "up", "status": "disabled"}
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", **page(
            "hypervisors", [hv_body(HV1, "n1"), down, bare]))
        one, two, three = self.client.hypervisors()
        self.assertEqual(compute.Hypervisor(HV1, "n1", "ironic", "c1", SVC, "up",
                                         "enabled"), one)
        self.assertEqual(("c1", "n1", HV1, True, "ironic"), (
            one.facts.host, one.facts.nodename, one.facts.uuid,
            one.facts.service_up, one.facts.hypervisor_type))
        self.assertIs(False, two.facts.service_up)
        self.assertEqual(("c2", "n2"), two.facts.key)
        self.assertEqual(("", "", None, None), (
            three.host, three.hypervisor_hostname, three.service_id,
            three.hypervisor_type))

    def test_hypervisor_totals(self) -> None:
        # COMPUTE_VERSION is older than 2.88, which dropped these fields;
        # Nova's Ironic driver reports 0, which is no inventory.
        vm = dict(hv_body(HV1, "n1", htype="QEMU"), vcpus=8, memory_mb=4096,
                  local_gb=100)
        bm = dict(hv_body(HV2, "n2"), vcpus=0, memory_mb=0, local_gb=0)
        self.mock.get(ENDPOINT + "/os-hypervisors/detail", **page(
            "hypervisors", [vm, bm]))
        one, two = self.client.hypervisors()
        self.assertEqual(
            (("VCPU", 8), ("MEMORY_MB", 4096), ("DISK_GB", 100)), one.totals)
        self.assertEqual((), two.totals)

    def test_services(self) -> None:
        self.mock.get(ENDPOINT + "/os-services", json={"services": [
            {"id": SVC, "host": "c1", "state": "down", "status": "enabled",
             "forced_down": True, "disabled_reason": None,
             "updated_at": "2024-05-01T11:00:00.000000"}]})
        self.assertEqual([compute.Service(SVC, "c1", "down", "enabled", True,
                                       None, "2024-05-01T11:00:00.000000")],
                         self.client.services())
        self.assertEqual({"binary": ["nova-compute"]}, self.queries()[0])

    def test_server_found(self) -> None:
        self.mock.get(f"{ENDPOINT}/servers/{SRV1}",
                      json={"server": server_body(SRV1, "c2", "n2")})
        self.assertEqual(compute.Server(SRV1, "ACTIVE", "c2", "n2", "proj"),
                         self.client.server(SRV1))
        self.assertEqual("compute 2.59", self.mock.last_request.headers[
            "OpenStack-API-Version"])

    def test_server_missing_is_none(self) -> None:
        self.mock.get(f"{ENDPOINT}/servers/{SRV1}", status_code=404, json={
            "itemNotFound": {"code": 404, "message": "not found"}})
        self.assertIsNone(self.client.server(SRV1))

    def test_server_error_raises(self) -> None:
        self.mock.get(f"{ENDPOINT}/servers/{SRV1}", status_code=500, json={
            "computeFault": {"code": 500, "message": "db down"}})
        exc = self.assertRaises(http.ApiError, self.client.server, SRV1)
        self.assertEqual(500, exc.status)
        self.assertEqual("db down", exc.message)

    def test_delete_service(self) -> None:
        self.mock.delete(f"{ENDPOINT}/os-services/{SVC}", status_code=204)
        self.client.delete_service(SVC)
        self.assertEqual("DELETE", self.mock.last_request.method)
        self.assertEqual("2.59", self.mock.last_request.headers[
            "X-OpenStack-Nova-API-Version"])

    def test_delete_service_refused(self) -> None:
        self.mock.delete(f"{ENDPOINT}/os-services/{SVC}", status_code=409,
                         json={"conflictingRequest": {
                             "code": 409, "message": "hosting instances"}})
        exc = self.assertRaises(http.ApiError, self.client.delete_service, SVC)
        self.assertEqual((409, "hosting instances"), (exc.status, exc.message))
