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

import json
from typing import Any

import ddt
import fixtures
import requests
import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from requests_mock.contrib import fixture as rm_fixture

from nova_drain_filters.clients import http

ENDPOINT = "http://placement.example"


class TestErrorMessage(testtools.TestCase):
    def test_placement_errors(self) -> None:
        body = json.dumps({"errors": [{
            "status": 409, "title": "Conflict",
            "detail": "There was a conflict when trying to complete your "
                      "request.\n\n resource provider generation conflict  ",
            "code": "placement.concurrent_update"}]})
        self.assertEqual(
            "There was a conflict when trying to complete your request. "
            "resource provider generation conflict",
            http.error_message(body, "application/json"))

    def test_placement_errors_title_only(self) -> None:
        body = json.dumps({"errors": [{"status": 404, "title": "Not Found"}]})
        self.assertEqual("Not Found", http.error_message(body))

    def test_nova_wrapped_message(self) -> None:
        body = json.dumps({"itemNotFound": {
            "code": 404, "message": "Compute host h1 could not be found."}})
        self.assertEqual("Compute host h1 could not be found.",
                         http.error_message(body, "application/json"))

    def test_ironic_double_encoded(self) -> None:
        body = json.dumps({"error_message": json.dumps({
            "faultstring": "Node x could not be found.", "debuginfo": None,
            "faultcode": "Client"})})
        self.assertEqual("Node x could not be found.",
                         http.error_message(body, "application/json"))

    def test_ironic_plain_error_message(self) -> None:
        body = json.dumps({"error_message": "{not json"})
        self.assertEqual("{not json", http.error_message(body))

    def test_html_proxy_page(self) -> None:
        body = "<html><body><h1>502 Bad Gateway</h1></body></html>"
        self.assertEqual("502 Bad Gateway",
                         http.error_message(body, "text/html"))

    def test_html_entities_unescaped(self) -> None:
        body = "<p>Service &amp; proxy &lt;down&gt;</p>"
        self.assertEqual("Service & proxy <down>", http.error_message(body))

    def test_plain_text(self) -> None:
        self.assertEqual("upstream timed out",
                         http.error_message("  upstream\n timed   out \n"))

    def test_empty_body(self) -> None:
        self.assertEqual("(empty response body)", http.error_message(""))
        self.assertEqual("(empty response body)", http.error_message("  \n"))
        self.assertEqual("(empty response body)",
                         http.error_message(None))  # type: ignore[arg-type]

    def test_json_without_message_falls_back_to_text(self) -> None:
        self.assertEqual('{"code": 500}', http.error_message('{"code": 500}'))

    def test_broken_json_is_text(self) -> None:
        self.assertEqual('{"errors": [', http.error_message(
            '{"errors": [', "application/json"))

    def test_long_body_truncated(self) -> None:
        message = http.error_message("x" * 10000)
        self.assertEqual(http.MAX_MESSAGE, len(message))
        self.assertTrue(message.endswith("..."))
        self.assertEqual("x" * http.MAX_MESSAGE,
                         http.error_message("x" * http.MAX_MESSAGE))

    def test_one_line(self) -> None:
        body = json.dumps({"errors": [{"detail": "a\nb\r\nc\td"}]})
        self.assertEqual("a b c d", http.error_message(body))


class TestApiError(testtools.TestCase):
    def test_str(self) -> None:
        err = http.ApiError("placement", "GET", "/traits", 404, "gone", "req-1")
        self.assertEqual(
            "placement GET /traits: HTTP 404: gone (request-id req-1)",
            str(err))
        self.assertEqual("req-1", err.request_id)
        err = http.ApiError("ironic", "GET", "/v1/nodes", None, "refused")
        self.assertEqual("ironic GET /v1/nodes: refused", str(err))
        self.assertIsNone(err.status)


@ddt.ddt
class TestServiceClient(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.mock = self.useFixture(rm_fixture.Fixture())
        session = ks_session.Session()
        adapter = ks_adapter.Adapter(session, endpoint_override=ENDPOINT,
                                     service_type="placement")
        self.client = http.ServiceClient(adapter)
        self.client.service = "placement"

    def test_success_json(self) -> None:
        self.mock.get(ENDPOINT + "/traits", json={"traits": ["CUSTOM_A"]})
        status, body = self.client.request("GET", "/traits",
                                           microversion="1.6")
        self.assertEqual(200, status)
        self.assertEqual({"traits": ["CUSTOM_A"]}, body)
        self.assertEqual({"traits": ["CUSTOM_A"]},
                         self.client.get("/traits", microversion="1.6"))

    def test_no_content(self) -> None:
        self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=204)
        self.assertEqual((204, None), self.client.request(
            "PUT", "/traits/CUSTOM_A", microversion="1.6"))

    def test_microversion_and_headers_sent(self) -> None:
        self.mock.put(ENDPOINT + "/x", status_code=204)
        self.client.request("PUT", "/x", microversion="1.6",
                            headers={"X-Test": "yes"}, json_body={"a": 1})
        sent = self.mock.last_request
        self.assertEqual("placement 1.6", sent.headers["OpenStack-API-Version"])
        self.assertEqual("yes", sent.headers["X-Test"])
        self.assertEqual({"a": 1}, sent.json())
        self.assertEqual("PUT", sent.method)

    def test_no_body_without_json_body(self) -> None:
        self.mock.get(ENDPOINT + "/x", json={})
        self.client.request("GET", "/x", microversion="1.6")
        self.assertIsNone(self.mock.last_request.body)

    def test_error_status(self) -> None:
        self.mock.put(
            ENDPOINT + "/rp/traits", status_code=409,
            headers={"x-openstack-request-id": "req-abc",
                     "content-type": "application/json"},
            json={"errors": [{"status": 409, "title": "Conflict",
                              "detail": "generation conflict"}]})
        exc = self.assertRaises(http.ApiError, self.client.request,
                                "PUT", "/rp/traits", microversion="1.6")
        self.assertEqual(409, exc.status)
        self.assertEqual("generation conflict", exc.message)
        self.assertEqual("req-abc", exc.request_id)
        self.assertEqual(("placement", "PUT", "/rp/traits"),
                         (exc.service, exc.method, exc.url))
        self.assertIn("HTTP 409: generation conflict", str(exc))

    def test_error_status_html(self) -> None:
        self.mock.get(ENDPOINT + "/x", status_code=502,
                      headers={"content-type": "text/html"},
                      text="<html><body><h1>502 Bad Gateway</h1></body></html>")
        exc = self.assertRaises(http.ApiError, self.client.get, "/x",
                                microversion="1.6")
        self.assertEqual(502, exc.status)
        self.assertEqual("502 Bad Gateway", exc.message)

    def test_compute_request_id(self) -> None:
        self.mock.get(ENDPOINT + "/x", status_code=500,
                      headers={"x-compute-request-id": "req-nova"}, text="")
        exc = self.assertRaises(http.ApiError, self.client.get, "/x",
                                microversion="1.6")
        self.assertEqual("req-nova", exc.request_id)
        self.assertEqual("(empty response body)", exc.message)

    def test_status_outside_ok(self) -> None:
        self.mock.put(ENDPOINT + "/x", status_code=200, json={})
        exc = self.assertRaises(http.ApiError, self.client.request, "PUT",
                                "/x", microversion="1.6", ok=(201, 204))
        self.assertEqual(200, exc.status)

    @ddt.data((requests.exceptions.ConnectionError("refused"), "ConnectFailure"),
              (requests.exceptions.ConnectTimeout("slow"), "ConnectTimeout"))
    @ddt.unpack
    def test_no_answer(self, error: Exception, name: str) -> None:
        self.mock.get(ENDPOINT + "/x", exc=error)
        exc = self.assertRaises(http.ApiError, self.client.get, "/x",
                                microversion="1.6")
        self.assertIs(http.ApiError, type(exc))
        self.assertIsNone(exc.status)
        self.assertIn(name, exc.message)
        self.assertNotIn("HTTP", str(exc))

    def test_non_json_success_body(self) -> None:
        self.mock.get(ENDPOINT + "/x", status_code=200,
                      text="<html><body>Login portal</body></html>")
        exc = self.assertRaises(http.ApiError, self.client.get, "/x",
                                microversion="1.6")
        self.assertEqual(200, exc.status)
        self.assertEqual("response is not JSON: Login portal", exc.message)

    @ddt.data((404, http.NotFound), (409, http.Conflict),
              (400, http.ApiError), (500, http.ApiError))
    @ddt.unpack
    def test_error_type_by_status(self, status: int,
                                  kind: type[http.ApiError]) -> None:
        self.mock.get(ENDPOINT + "/x", status_code=status, text="no",
                      headers={"x-openstack-request-id": "req-7"})
        exc = self.assertRaises(http.ApiError, self.client.get, "/x",
                                microversion="1.6")
        self.assertIs(kind, type(exc))
        self.assertEqual((status, "no", "req-7"),
                         (exc.status, exc.message, exc.request_id))
        self.assertEqual(f"placement GET /x: HTTP {status}: no "
                         "(request-id req-7)", str(exc))

    def test_no_request_id_no_suffix(self) -> None:
        self.mock.get(ENDPOINT + "/x", status_code=409, text="busy")
        exc = self.assertRaises(http.Conflict, self.client.get, "/x",
                                microversion="1.6")
        self.assertEqual("placement GET /x: HTTP 409: busy", str(exc))

    def test_no_endpoint_in_the_catalog(self) -> None:
        adapter = ks_adapter.Adapter(ks_session.Session(auth=noauth.NoAuth()),
                                     service_type="placement")
        client = http.ServiceClient(adapter)
        exc = self.assertRaises(http.NoEndpoint, client.get, "/x",
                                microversion="1.6")
        self.assertIsNone(exc.status)
        self.assertIn("EndpointNotFound", exc.message)
        self.assertEqual(0, self.mock.call_count)


class TestPages(testtools.TestCase):
    """``ServiceClient.pages``: the one limit/marker loop every list uses."""

    def setUp(self) -> None:
        super().setUp()
        self.mock = self.useFixture(rm_fixture.Fixture())
        adapter = ks_adapter.Adapter(ks_session.Session(),
                                     endpoint_override=ENDPOINT,
                                     service_type="placement")
        self.client = http.ServiceClient(adapter)
        self.client.service = "placement"
        self.asked: list[list[str]] = []

    def serve(self, *pages: list[str]) -> None:
        """Answer GET /things with ``pages``, chosen by the marker; each
        page links a next one while one is left."""
        by_marker: dict[str | None, dict[str, Any]] = {}
        marker = None
        for i, ids in enumerate(pages):
            by_marker[marker] = {"things": ids, "more": i < len(pages) - 1}
            marker = ids[-1] if ids else marker

        def answer(request: Any, context: Any) -> dict[str, Any]:
            return by_marker[request.qs.get("marker", [None])[0]]

        self.mock.get(ENDPOINT + "/things", json=answer)

    def pages(self) -> Any:
        def items(body: Any, url: str) -> list[str]:
            return list(body["things"])

        def next_marker(body: Any, found: list[str]) -> str | None:
            self.asked.append(found)
            return found[-1] if body["more"] else None

        return self.client.pages("/things", {"limit": "2"},
                                 microversion="1.0", items=items,
                                 next_marker=next_marker)

    def queries(self) -> list[dict[str, list[str]]]:
        return [r.qs for r in self.mock.request_history]

    def test_follows_the_marker_a_page_at_a_time(self) -> None:
        self.serve(["a", "b"], ["c", "d"], ["e"])
        pages = self.pages()
        self.assertEqual(0, self.mock.call_count)  # lazy
        self.assertEqual(["a", "b"], next(pages))
        self.assertEqual(1, self.mock.call_count)
        self.assertEqual([["c", "d"], ["e"]], list(pages))
        self.assertEqual([{"limit": ["2"]},
                          {"limit": ["2"], "marker": ["b"]},
                          {"limit": ["2"], "marker": ["d"]}], self.queries())

    def test_an_empty_page_ends_the_list(self) -> None:
        self.mock.get(ENDPOINT + "/things", json={"things": [], "more": True})
        self.assertEqual([[]], list(self.pages()))
        self.assertEqual([], self.asked)  # its link is not even read
        self.assertEqual(1, self.mock.call_count)

    def test_a_marker_that_does_not_advance_is_an_error(self) -> None:
        self.mock.get(ENDPOINT + "/things",
                      json={"things": ["a", "b"], "more": True})
        exc = self.assertRaises(http.ApiError, list, self.pages())
        self.assertEqual("pagination marker did not advance", exc.message)
        self.assertEqual((200, "placement"), (exc.status, exc.service))
        self.assertEqual(2, self.mock.call_count)

    def test_one_page_cap(self) -> None:
        self.useFixture(fixtures.MockPatchObject(http, "MAX_PAGES", 2))
        self.serve(["a"], ["b"], ["c"])
        exc = self.assertRaises(http.ApiError, list, self.pages())
        self.assertEqual("too many pages (more than 2)", exc.message)
        self.assertEqual(2, self.mock.call_count)

    def test_a_malformed_page_raises_what_items_raises(self) -> None:
        self.mock.get(ENDPOINT + "/things", json={"nothing": []})
        self.assertRaises(KeyError, list, self.pages())
