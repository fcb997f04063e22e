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

"""IronicClient against requests_mock behind a real keystoneauth1 Adapter."""
from typing import Any

import ddt
import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session

from nova_drain_filters import traits
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from tests.unit import fakes
from tests.unit.clients.ironic_api import ENDPOINT
from tests.unit.clients.ironic_api import NODE
from tests.unit.clients.ironic_api import NODE_TRAITS
from tests.unit.clients.ironic_api import NODES
from tests.unit.clients.ironic_api import TRAIT_URL
from tests.unit.clients.ironic_api import IronicTestCase
from tests.unit.clients.ironic_api import ironic_error
from tests.unit.clients.ironic_api import page
from tests.unit.clients.ironic_api import uuids


@ddt.ddt
class TestListNodes(IronicTestCase):
    @ddt.data((5, 2, 2), (2500, 5000, 1000))
    @ddt.unpack
    def test_pages(self, count: int, asked: int, served: int) -> None:
        """``served`` nodes a page (Ironic caps ``limit`` at its max_limit)."""
        ids = uuids(count)
        chunks = [ids[i:i + served] for i in range(0, count, served)]
        self.serve([page(c, i < len(chunks) - 1)
                    for i, c in enumerate(chunks)])
        nodes = self.client.list_nodes(asked)
        self.assertEqual(ids, [n.uuid for n in nodes])
        self.assertEqual(3, len(self.api_calls()))
        self.assertEqual(fakes.VERSION_CHECK + 3, self.client.requests)
        sent = self.sent()
        self.assertEqual([None] + [c[-1] for c in chunks[:-1]],
                         [q.get("marker") for q in sent])
        for q in sent:
            self.assertEqual(str(asked), q["limit"])
            self.assertEqual(",".join(ironic.NODE_FIELDS), q["fields"])
        for request in self.api_calls():
            self.assertEqual("GET", request.method)
            self.assertEqual(
                "1.61", request.headers["X-OpenStack-Ironic-API-Version"])

    def test_fields_are_what_the_decisions_need(self) -> None:
        self.serve([page(uuids(1), False)])
        self.client.list_nodes(10)
        fields = self.sent()[0]["fields"].split(",")
        for name in ("uuid", "provision_state", "power_state", "maintenance",
                     "retired", "fault", "instance_uuid", "traits"):
            self.assertIn(name, fields)
        # ironic answers 500 when allocation_uuid is named in fields.
        self.assertNotIn("allocation_uuid", fields)

    def test_extra_fields_for_the_report(self) -> None:
        self.serve([{"nodes": [{"uuid": "u1", "resource_class": "gold"}]}])
        node, = self.client.list_nodes(10, ironic.REPORT_FIELDS)
        self.assertEqual("gold", node.resource_class)
        self.assertEqual(",".join(ironic.NODE_FIELDS + ("resource_class",)),
                         self.sent()[0]["fields"])

    def test_pages_yielded_one_at_a_time(self) -> None:
        ids = uuids(3)
        self.serve([page(ids[0:2], True), page(ids[2:], False)])
        pages = self.client.iter_node_pages(2)
        self.assertEqual(ids[0:2], [n.uuid for n in next(pages)])
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)
        self.assertEqual(ids[2:], [n.uuid for n in next(pages)])
        self.assertEqual([], list(pages))
        self.assertEqual(fakes.VERSION_CHECK + 2, self.client.requests)

    def test_full_last_page_without_next_stops(self) -> None:
        ids = uuids(2)
        self.serve([page(ids, False)])
        self.assertEqual(ids, [n.uuid for n in self.client.list_nodes(2)])
        self.assertEqual(1, len(self.api_calls()))

    def test_empty_first_page(self) -> None:
        self.mock.get(NODES, json={"nodes": []})
        self.assertEqual([], self.client.list_nodes(1000))
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)

    def test_empty_page_with_next_stops(self) -> None:
        self.mock.get(NODES, json={"nodes": [], "next": NODES + "?marker=x"})
        self.assertEqual([], self.client.list_nodes(1000))
        self.assertEqual(1, len(self.api_calls()))

    def test_node_without_uuid(self) -> None:
        self.mock.get(NODES, json={"nodes": [{"uuid": NODE},
                                             {"name": "no-uuid"}]})
        exc = self.assertRaises(http.ApiError, self.client.list_nodes, 10)
        self.assertEqual(200, exc.status)
        self.assertEqual("ironic", exc.service)
        self.assertIn("malformed node list", exc.message)
        self.assertIn("uuid", exc.message)

    def test_node_with_null_uuid(self) -> None:
        self.mock.get(NODES, json={"nodes": [{"uuid": None}]})
        self.assertRaises(http.ApiError, self.client.list_nodes, 10)

    @ddt.data({"error": "x"}, [], {"nodes": None}, {"nodes": ["x"]})
    def test_body_without_nodes(self, body: Any) -> None:
        self.mock.get(NODES, json=body)
        exc = self.assertRaises(http.ApiError, self.client.list_nodes, 10)
        self.assertIn("malformed node list", exc.message)

    def test_marker_not_advancing(self) -> None:
        ids = uuids(2)
        # A broken server that ignores the marker: the same full page again.
        self.mock.get(NODES, json=page(ids, True))
        exc = self.assertRaises(http.ApiError, self.client.list_nodes, 2)
        self.assertEqual("pagination marker did not advance", exc.message)
        self.assertEqual(2, len(self.api_calls()))
        self.assertEqual(ids[1], self.sent()[1]["marker"])

    def test_server_error_html(self) -> None:
        self.mock.get(NODES, status_code=500,
                      headers={"content-type": "text/html"},
                      text="<html><head><title>500</title></head><body>"
                           "<h1>Internal Server Error</h1></body></html>")
        exc = self.assertRaises(http.ApiError, self.client.list_nodes, 10)
        self.assertEqual(500, exc.status)
        self.assertEqual("500 Internal Server Error", exc.message)
        self.assertTrue(str(exc).startswith("ironic GET /v1/nodes?"))
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)

    def test_error_on_a_later_page(self) -> None:
        ids = uuids(2)
        self.mock.get(NODES, [{"json": page(ids, True)},
                              {"status_code": 503, "text": "Unavailable"}])
        exc = self.assertRaises(http.ApiError, self.client.list_nodes, 2)
        self.assertEqual(503, exc.status)
        self.assertEqual(fakes.VERSION_CHECK + 2, self.client.requests)


@ddt.ddt
class TestTraits(IronicTestCase):
    def test_add_trait(self) -> None:
        self.mock.put(TRAIT_URL, status_code=204)
        self.client.add_trait(NODE, traits.BAREMETAL_UNAVAILABLE)
        sent = self.mock.last_request
        self.assertEqual("PUT", sent.method)
        self.assertEqual(TRAIT_URL, sent.url)
        self.assertEqual("1.61",
                         sent.headers["X-OpenStack-Ironic-API-Version"])
        self.assertIsNone(sent.body)
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)

    def test_add_trait_conflict(self) -> None:
        self.mock.put(TRAIT_URL, status_code=409, json=ironic_error(
            f"Node {NODE} is locked by host c1, please retry after the "
            "current operation is completed."))
        exc = self.assertRaises(http.Conflict, self.client.add_trait, NODE,
                                traits.BAREMETAL_UNAVAILABLE)
        self.assertEqual(409, exc.status)
        self.assertIn("is locked by host c1", exc.message)

    def test_remove_trait(self) -> None:
        self.mock.delete(TRAIT_URL, status_code=204)
        self.client.remove_trait(NODE, traits.BAREMETAL_UNAVAILABLE)
        sent = self.mock.last_request
        self.assertEqual("DELETE", sent.method)
        self.assertEqual("1.61",
                         sent.headers["X-OpenStack-Ironic-API-Version"])

    def test_remove_trait_already_gone(self) -> None:
        # NodeTraitNotFound: a 404 like a missing node's; the node answers.
        self.mock.delete(TRAIT_URL, status_code=404, json=ironic_error(
            f"Node {NODE} doesn't have a trait "
            f"'{traits.BAREMETAL_UNAVAILABLE}'"))
        self.mock.get(NODE_TRAITS, json={"traits": ["CUSTOM_OTHER"]})
        self.assertIsNone(self.client.remove_trait(
            NODE, traits.BAREMETAL_UNAVAILABLE))
        self.assertEqual(fakes.VERSION_CHECK + 2, self.client.requests)

    def test_remove_trait_node_not_found(self) -> None:
        gone = ironic_error(f"Node {NODE} could not be found.")
        self.mock.delete(TRAIT_URL, status_code=404, json=gone)
        self.mock.get(NODE_TRAITS, status_code=404, json=gone,
                      headers={"x-openstack-request-id": "req-gone"})
        exc = self.assertRaises(http.NotFound, self.client.remove_trait, NODE,
                                traits.BAREMETAL_UNAVAILABLE)
        self.assertEqual(404, exc.status)
        self.assertEqual(f"Node {NODE} could not be found.", exc.message)
        self.assertIn("(request-id req-gone)", str(exc))

    def test_remove_trait_proxy_404_is_an_error(self) -> None:
        page = (f"<html><body>404: /v1/nodes/{NODE} not found</body></html>")
        self.mock.delete(TRAIT_URL, status_code=404, text=page)
        self.mock.get(NODE_TRAITS, status_code=404, text=page)
        exc = self.assertRaises(http.NotFound, self.client.remove_trait, NODE,
                                traits.BAREMETAL_UNAVAILABLE)
        self.assertEqual(404, exc.status)

    def test_remove_trait_put_back_in_between_is_an_error(self) -> None:
        self.mock.delete(TRAIT_URL, status_code=404, json=ironic_error(
            f"Node {NODE} doesn't have a trait "
            f"'{traits.BAREMETAL_UNAVAILABLE}'"))
        self.mock.get(NODE_TRAITS,
                      json={"traits": [traits.BAREMETAL_UNAVAILABLE]})
        exc = self.assertRaises(http.NotFound, self.client.remove_trait, NODE,
                                traits.BAREMETAL_UNAVAILABLE)
        self.assertEqual("DELETE", exc.method)

    @ddt.data((400, http.ApiError), (409, http.Conflict),
              (500, http.ApiError))
    @ddt.unpack
    def test_remove_trait_other_errors(self, status: int,
                                       kind: type[http.ApiError]) -> None:
        self.mock.delete(TRAIT_URL, status_code=status,
                         json=ironic_error("trait operation failed"))
        exc = self.assertRaises(http.ApiError, self.client.remove_trait,
                                NODE, traits.BAREMETAL_UNAVAILABLE)
        self.assertIs(kind, type(exc))
        self.assertEqual(status, exc.status)
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)


class TestNodeFacts(testtools.TestCase):
    def test_maps_every_field(self) -> None:
        facts = ironic.node_facts({
            "uuid": NODE, "name": "rack1-u12", "provision_state": "active",
            "power_state": "power on", "maintenance": True,
            "maintenance_reason": "fan", "retired": True,
            "retired_reason": "eol", "fault": "power failure",
            "instance_uuid": "inst-1", "allocation_uuid": "alloc-1",
            "traits": ["CUSTOM_A", traits.BAREMETAL_UNAVAILABLE, "CUSTOM_A"],
            "driver": "ipmi"})
        self.assertEqual(NODE, facts.uuid)
        self.assertEqual("rack1-u12", facts.name)
        self.assertEqual("active", facts.provision_state)
        self.assertEqual("power on", facts.power_state)
        self.assertIs(True, facts.maintenance)
        self.assertEqual("fan", facts.maintenance_reason)
        self.assertIs(True, facts.retired)
        self.assertEqual("eol", facts.retired_reason)
        self.assertEqual("power failure", facts.fault)
        self.assertEqual("inst-1", facts.instance_uuid)
        self.assertEqual("alloc-1", facts.allocation_uuid)
        self.assertEqual(
            frozenset({"CUSTOM_A", traits.BAREMETAL_UNAVAILABLE}),
            facts.traits)

    def test_defaults(self) -> None:
        facts = ironic.node_facts({"uuid": NODE})
        self.assertEqual(NODE, facts.uuid)
        for name in ("name", "provision_state", "power_state",
                     "maintenance_reason", "retired_reason", "fault",
                     "instance_uuid", "allocation_uuid"):
            self.assertIsNone(getattr(facts, name), name)
        self.assertIs(False, facts.maintenance)
        self.assertIs(False, facts.retired)
        self.assertEqual(frozenset(), facts.traits)

    def test_nulls(self) -> None:
        facts = ironic.node_facts({"uuid": NODE, "maintenance": None,
                                   "retired": None, "traits": None})
        self.assertIs(False, facts.maintenance)
        self.assertIs(False, facts.retired)
        self.assertEqual(frozenset(), facts.traits)

    def test_missing_uuid(self) -> None:
        self.assertRaises(KeyError, ironic.node_facts, {"name": "x"})


class TestGetNode(IronicTestCase):
    def test_one_request_with_the_listing_fields(self) -> None:
        self.mock.get(f"{NODES}/{NODE}", json={
            "uuid": NODE, "provision_state": "cleaning", "maintenance": True,
            "traits": ["CUSTOM_A"]})
        facts = self.client.get_node(NODE)
        assert facts is not None
        self.assertEqual(("cleaning", True, frozenset({"CUSTOM_A"})),
                         (facts.provision_state, facts.maintenance,
                          facts.traits))
        self.assertEqual(fakes.VERSION_CHECK + 1, self.client.requests)
        sent = self.sent()[-1]
        self.assertEqual(",".join(ironic.NODE_FIELDS), sent["fields"])
        self.assertEqual("1.61", self.mock.last_request.headers[
            "X-OpenStack-Ironic-API-Version"])

    def test_not_found_is_none(self) -> None:
        self.mock.get(f"{NODES}/{NODE}", status_code=404, json=ironic_error(
            f"Node {NODE} could not be found."))
        self.assertIsNone(self.client.get_node(NODE))

    def test_other_errors_raise(self) -> None:
        self.mock.get(f"{NODES}/{NODE}", status_code=503, text="<h1>down</h1>")
        exc = self.assertRaises(http.ApiError, self.client.get_node, NODE)
        self.assertEqual(503, exc.status)

    def test_malformed_node(self) -> None:
        self.mock.get(f"{NODES}/{NODE}", json=["not", "a", "node"])
        exc = self.assertRaises(http.ApiError, self.client.get_node, NODE)
        self.assertIn("malformed node", exc.message)


class TestReadTimeout(IronicTestCase):
    def timeouts(self) -> list[Any]:
        return [r.timeout for r in self.mock.request_history]

    def client_with(self, session_timeout: float | None,
                    default: float | None) -> ironic.IronicClient:
        adapter = ks_adapter.Adapter(
            ks_session.Session(timeout=session_timeout),
            endpoint_override=ENDPOINT, service_type="baremetal")
        return ironic.IronicClient(adapter, default_timeout=default)

    def test_unbounded_without_a_default(self) -> None:
        # Issue 14 item 5: with [ironic] timeout unset, keystoneauth sends
        # no timeout and a hung Ironic hangs the refresher.
        self.serve([page(uuids(1), False)])
        client = self.client_with(None, None)
        client.list_nodes(10)
        # Every request, the version check too.
        self.assertEqual([None] * (fakes.VERSION_CHECK + 1), self.timeouts())
        self.assertIsNone(client.read_timeout)

    def test_default_bounds_an_unset_timeout(self) -> None:
        self.serve([page(uuids(1), False)])
        client = self.client_with(None, ironic.DEFAULT_READ_TIMEOUT)
        client.list_nodes(10)
        # Every request, the version check too.
        self.assertEqual([30.0] * (fakes.VERSION_CHECK + 1), self.timeouts())
        self.assertEqual(30.0, client.read_timeout)

    def test_the_operators_timeout_wins(self) -> None:
        self.serve([page(uuids(1), False)])
        client = self.client_with(7, ironic.DEFAULT_READ_TIMEOUT)
        client.list_nodes(10)
        # Every request, the version check too.
        self.assertEqual([7.0] * (fakes.VERSION_CHECK + 1), self.timeouts())
        self.assertEqual(7.0, client.read_timeout)
