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

"""The once-per-client microversion check, against requests_mock."""
from typing import Any

import ddt
import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from requests_mock.contrib import fixture as rm_fixture

from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement
from tests.unit import fakes

#: Each client, its service type, its endpoint, and one cheap call.
CLIENTS = {
    "compute": (compute.ComputeClient, "http://nova.example/v2.1",
                "/os-services?binary=nova-compute", {"services": []},
                lambda c: c.services()),
    "placement": (placement.PlacementClient, "http://placement.example",
                  "/traits/CUSTOM_A", None, lambda c: c.ensure_trait("CUSTOM_A")),
    "baremetal": (ironic.IronicClient, "http://ironic.example",
                  "/v1/nodes/n1/traits/CUSTOM_A", None,
                  lambda c: c.add_trait("n1", "CUSTOM_A")),
}


@ddt.ddt
class TestMicroversionRange(testtools.TestCase):
    @ddt.data("placement", "baremetal", "compute")
    def test_each_service_shape(self, service_type: str) -> None:
        body = fakes.version_document(service_type, "1.2", "1.40")
        self.assertEqual(((1, 2), (1, 40)),
                         http.microversion_range(body, 1))

    def test_nova_unversioned_root_skips_v2_0(self) -> None:
        body = {"versions": [
            {"id": "v2.0", "status": "SUPPORTED", "version": "",
             "min_version": ""},
            {"id": "v2.1", "status": "CURRENT", "version": "2.96",
             "min_version": "2.1"}]}
        self.assertEqual(((2, 1), (2, 96)), http.microversion_range(body, 2))

    @ddt.data({}, {"versions": []}, {"nodes": []}, [], "text",
              {"version": {"id": "v2.0", "version": "", "min_version": ""}},
              {"versions": [{"id": "v1", "version": "1.80",
                             "min_version": "1.1"}]})
    def test_nothing_usable(self, body: Any) -> None:
        self.assertIsNone(http.microversion_range(body, 2))


@ddt.ddt
class TestClientCheck(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.mock = self.useFixture(rm_fixture.Fixture())

    def client(self, service_type: str, low: str | None = None,
               high: str | None = None) -> tuple[http.ServiceClient, Any]:
        cls, endpoint, path, body, call = CLIENTS[service_type]
        pinned = cls.microversion
        major = pinned.split(".")[0]
        self.mock.get(endpoint + "/", json=fakes.version_document(
            service_type, low or f"{major}.1", high or f"{major}.99"),
            headers={"x-openstack-request-id": "req-v"})
        self.mock.register_uri(("GET" if body else "PUT"), endpoint + path,
                               json=body, status_code=200 if body else 204)
        adapter = ks_adapter.Adapter(ks_session.Session(),
                                     endpoint_override=endpoint,
                                     service_type=service_type)
        return cls(adapter), call

    def version_gets(self) -> int:
        return sum(1 for r in self.mock.request_history
                   if r.method == "GET" and r.path.rstrip("/") in (
                       "", "/v2.1"))

    @ddt.data("placement", "baremetal", "compute")
    def test_checked_once_and_counted(self, service_type: str) -> None:
        client, call = self.client(service_type)
        call(client)
        call(client)
        self.assertEqual(1, self.version_gets())
        self.assertEqual(3, client.requests)  # the check, then two calls
        check = self.mock.request_history[0]
        self.assertNotIn("OpenStack-API-Version", check.headers)
        self.assertIsNotNone(client.supported)

    @ddt.data(("placement", "1.37"), ("baremetal", "1.60"),
              ("compute", "2.58"))
    @ddt.unpack
    def test_too_old_is_one_clear_error(self, service_type: str,
                                        high: str) -> None:
        client, call = self.client(service_type, high=high)
        exc = self.assertRaises(http.MicroversionUnsupported, call, client)
        low = high.split(".")[0] + ".1"
        self.assertIn(f"the service supports microversions {low} to {high}; "
                      f"this client needs {client.microversion}",
                      str(exc))
        self.assertIn("(request-id req-v)", str(exc))
        self.assertIsNone(exc.status)
        self.assertEqual(1, len(self.mock.request_history))  # nothing else
        # Not cached: the next use looks again (the cloud may be upgraded).
        self.assertRaises(http.MicroversionUnsupported, call, client)
        self.assertEqual(2, self.version_gets())

    def test_too_new_minimum(self) -> None:
        client, call = self.client("compute", low="2.60", high="2.99")
        exc = self.assertRaises(http.MicroversionUnsupported, call, client)
        self.assertIn("supports microversions 2.60 to 2.99", exc.message)

    def test_document_without_versions(self) -> None:
        client, call = self.client("placement")
        self.mock.get("http://placement.example/", json={"hello": "proxy"})
        exc = self.assertRaises(http.MicroversionUnsupported, call, client)
        self.assertIn("shows no 1.x microversions; this client needs 1.38",
                      exc.message)

    def test_version_document_error_is_the_error(self) -> None:
        client, call = self.client("baremetal")
        self.mock.get("http://ironic.example/", status_code=503,
                      text="<h1>Service Unavailable</h1>")
        exc = self.assertRaises(http.ApiError, call, client)
        self.assertEqual((503, "GET", "/"), (exc.status, exc.method, exc.url))
        self.assertIsNone(client.supported)

    def test_version_document_not_json(self) -> None:
        client, call = self.client("placement")
        self.mock.get("http://placement.example/", text="<html>login</html>")
        exc = self.assertRaises(http.ApiError, call, client)
        self.assertIn("response is not JSON", exc.message)
