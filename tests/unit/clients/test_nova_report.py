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

"""Trait calls and the candidate watch on Nova's real report client.

``SchedulerReportClient`` runs its own code here (``get``, ``put``,
``get_allocation_candidates``); only the HTTP underneath is mocked.
"""
from typing import Any

import fixtures
import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from nova import context as nova_context
from nova.scheduler.client import report
from requests_mock.contrib import fixture as rm_fixture

from nova_drain_filters.clients import http
from nova_drain_filters.clients import nova_report

ENDPOINT = "http://placement.example"
CANDIDATES = ENDPOINT + "/allocation_candidates"
NO_SUCH_TRAIT = {"errors": [{
    "status": 400, "title": "Bad Request", "code": "placement.undefined_code",
    "detail": "No such trait(s): CUSTOM_A."}]}
GOOD = {"allocation_requests": [{"allocations": {}}],
        "provider_summaries": {}}


class Resources:
    """What ``get_allocation_candidates`` reads of a ResourceRequest."""

    def to_querystring(self) -> str:
        return "resources=VCPU:1&root_required=!CUSTOM_A"

    def __str__(self) -> str:
        return "VCPU:1 !CUSTOM_A"


class Handler:
    """A CandidateRepair that repairs when told to."""

    def __init__(self, fixes: bool) -> None:
        self.fixes = fixes
        self.repairs = 0
        self.request_ids: list[str | None] = []

    def repair(self, global_request_id: str | None) -> None:
        self.request_ids.append(global_request_id)
        if self.fixes:
            self.repairs += 1


class NovaReportTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.mock = self.useFixture(rm_fixture.Fixture())
        adapter = ks_adapter.Adapter(ks_session.Session(),
                                     endpoint_override=ENDPOINT,
                                     service_type="placement",
                                     raise_exc=False)
        self.client = report.SchedulerReportClient(adapter=adapter)
        self.store = nova_report.NovaPlacementTraits(lambda: self.client)
        self.context = nova_context.RequestContext(
            is_admin=True,
            global_request_id="req-11111111-2222-3333-4444-555555555555")

    def candidates(self) -> Any:
        return self.client.get_allocation_candidates(self.context,
                                                     Resources())


class TestTraits(NovaReportTestCase):
    def test_default_client_is_novas_singleton(self) -> None:
        self.useFixture(fixtures.MockPatchObject(report, "PLACEMENTCLIENT",
                                                 self.client))
        store = nova_report.NovaPlacementTraits()
        self.mock.get(ENDPOINT + "/traits", json={"traits": []})
        self.assertEqual(set(), store.existing_traits(["CUSTOM_A"]))
        self.assertTrue(self.mock.called)

    def test_existing_traits_one_request(self) -> None:
        self.mock.get(ENDPOINT + "/traits",
                      json={"traits": ["CUSTOM_B", "CUSTOM_UNASKED"]})
        found = self.store.existing_traits(["CUSTOM_B", "CUSTOM_A"], "req-g")
        self.assertEqual({"CUSTOM_B"}, found)
        last = self.mock.last_request
        self.assertEqual("name=in:CUSTOM_A,CUSTOM_B",
                         last.url.split("?", 1)[1].replace("%3A", ":")
                         .replace("%2C", ","))
        self.assertEqual("placement 1.6",
                         last.headers["OpenStack-API-Version"])
        self.assertEqual("req-g", last.headers["X-OpenStack-Request-ID"])
        self.assertEqual(1, self.mock.call_count)

    def test_existing_traits_nothing_asked(self) -> None:
        self.assertEqual(set(), self.store.existing_traits([]))
        self.assertFalse(self.mock.called)

    def test_create_trait(self) -> None:
        for status in (201, 204):
            self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=status)
            self.store.create_trait("CUSTOM_A", "req-g")
        self.assertEqual("placement 1.6", self.mock.last_request.headers[
            "OpenStack-API-Version"])

    def test_create_refused_names_status_and_request(self) -> None:
        self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=403,
                      headers={"openstack-request-id": "req-p"},
                      json={"errors": [{"title": "Forbidden",
                                        "detail": "Policy does not allow"}]})
        exc = self.assertRaises(http.ApiError, self.store.create_trait,
                                "CUSTOM_A")
        self.assertEqual(403, exc.status)
        self.assertEqual("req-p", exc.request_id)
        self.assertEqual("placement PUT /traits/CUSTOM_A: HTTP 403: Policy "
                         "does not allow (request-id req-p)", str(exc))

    def test_html_error_page_is_readable(self) -> None:
        self.mock.get(ENDPOINT + "/traits", status_code=502,
                      text="<html><body><h1>Bad Gateway</h1></body></html>")
        exc = self.assertRaises(http.ApiError, self.store.existing_traits,
                                ["CUSTOM_A"])
        self.assertIn("HTTP 502: Bad Gateway", str(exc))

    def test_connect_failure_is_an_api_error(self) -> None:
        self.mock.get(ENDPOINT + "/traits", exc=ks_exc.ConnectFailure("no"))
        exc = self.assertRaises(http.ApiError, self.store.existing_traits,
                                ["CUSTOM_A"])
        self.assertIsNone(exc.status)
        self.assertIn("ConnectFailure", str(exc))


class TestWatch(NovaReportTestCase):
    def test_healthy_query_untouched(self) -> None:
        handler = Handler(fixes=True)
        self.store.watch(handler)
        self.mock.get(CANDIDATES, json=GOOD)
        result = self.candidates()
        self.assertEqual(GOOD["allocation_requests"], result[0])
        self.assertEqual([], handler.request_ids)
        self.assertEqual(1, self.mock.call_count)

    def test_no_such_trait_repaired_and_sent_again(self) -> None:
        handler = Handler(fixes=True)
        self.store.watch(handler)
        self.mock.get(CANDIDATES, [{"status_code": 400, "json": NO_SUCH_TRAIT},
                                   {"json": GOOD}])
        result = self.candidates()
        self.assertEqual(GOOD["allocation_requests"], result[0])
        self.assertEqual([self.context.global_id], handler.request_ids)
        self.assertEqual(2, self.mock.call_count)

    def test_failure_not_repaired_not_sent_again(self) -> None:
        handler = Handler(fixes=False)
        self.store.watch(handler)
        self.mock.get(CANDIDATES, status_code=400, json=NO_SUCH_TRAIT)
        self.assertEqual((None, None, None), self.candidates())
        self.assertEqual(1, len(handler.request_ids))
        self.assertEqual(1, self.mock.call_count)

    def test_second_failure_not_retried_again(self) -> None:
        handler = Handler(fixes=True)
        self.store.watch(handler)
        self.mock.get(CANDIDATES, status_code=400, json=NO_SUCH_TRAIT)
        self.assertEqual((None, None, None), self.candidates())
        self.assertEqual(2, self.mock.call_count)

    def test_unreachable_placement_not_retried(self) -> None:
        # safe_connect turns a connection failure into None.
        handler = Handler(fixes=True)
        self.store.watch(handler)
        self.mock.get(CANDIDATES, exc=ks_exc.ConnectFailure("down"))
        self.assertIsNone(self.candidates())
        self.assertEqual([], handler.request_ids)

    def test_broken_handler_never_raises_into_the_scheduler(self) -> None:
        class Broken(Handler):
            def repair(self, global_request_id: str | None) -> None:
                raise RuntimeError("bug")

        self.store.watch(Broken(fixes=True))
        self.mock.get(CANDIDATES, status_code=400, json=NO_SUCH_TRAIT)
        self.assertEqual((None, None, None), self.candidates())
        self.assertIn("Could not check the forbidden traits", self.log.output)

    def test_watched_once_latest_handler_used(self) -> None:
        old, new = Handler(fixes=True), Handler(fixes=True)
        self.store.watch(old)
        wrapper = self.client.get_allocation_candidates
        self.store.watch(new)
        self.assertIs(wrapper, self.client.get_allocation_candidates)
        self.mock.get(CANDIDATES, [{"status_code": 400, "json": NO_SUCH_TRAIT},
                                   {"json": GOOD}])
        self.candidates()
        self.assertEqual([], old.request_ids)
        self.assertEqual(1, len(new.request_ids))
        self.assertEqual(2, self.mock.call_count)

    def test_a_new_client_is_watched_too(self) -> None:
        self.store.watch(Handler(fixes=True))
        first = self.client
        self.client = report.SchedulerReportClient(adapter=first._adapter)
        self.assertNotIn("get_allocation_candidates", vars(self.client))
        self.store.watch(Handler(fixes=True))
        self.assertIn("get_allocation_candidates", vars(self.client))
