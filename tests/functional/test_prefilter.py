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

"""The placement pre-filter inside Nova's real scheduler and placement."""
import datetime
from typing import Any

import fixtures
from nova.scheduler import request_filter as nova_request_filter
from placement.objects import research_context

from nova_drain_filters import request_filter
from nova_drain_filters import traits
from tests.functional import base

BAD = ("bad1", "bad2", "bad3", "bad4")


class StarvationMixin(base.DrainTestBase):
    """Four drained hosts and one good one; placement returns only two.

    The drained hosts are forced down (so a host filter rejects them) and
    carry CUSTOM_DRAIN_HOST. Placement does not promise an order for its
    candidates (it builds them from sets), so the test pins the worst case
    that happens in real life: the drained providers come first and fill
    the ``max_placement_results`` slots.
    """

    HOSTS = BAD + ("good",)
    COMPUTE_DRIVER = "fake.FakeDriver"

    def setUp(self) -> None:
        super().setUp()
        self.flags(max_placement_results=2, group="scheduler")
        for host in BAD:
            self.admin_api.put_service_force_down(self.service_id(host), True)
            self.add_trait(host, traits.DRAIN_HOST)
        bad = {self._get_provider_uuid_by_host(host) for host in BAD}
        limit_results = research_context.RequestWideSearchContext.limit_results

        def drained_first(ctx: Any, requests: list, summaries: list) -> Any:
            def is_good(request: Any) -> bool:
                rp = request.resource_requests[0].resource_provider
                return rp.root_provider_uuid not in bad
            return limit_results(ctx, sorted(requests, key=is_good), summaries)

        self.useFixture(fixtures.MonkeyPatch(
            "placement.objects.research_context.RequestWideSearchContext."
            "limit_results", drained_first))


class PrefilterStarvationTest(StarvationMixin):
    def test_boots_succeed_with_prefilter(self) -> None:
        for _ in range(5):
            self.assertEqual("good", self.host_of(self.boot()))
        # placement's request log shows the query with the trait forbidden
        self.assertIn("%21CUSTOM_DRAIN_HOST", self.stdlog.logger.output)


class NoPrefilterStarvationTest(StarvationMixin):
    PREFILTER = False

    def test_boots_fail_without_prefilter(self) -> None:
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        line = self.summary_lines()[-1]
        self.assertIn("2 hosts in, 0 left", line)
        self.assertIn("2 x service forced down", line)
        self.assertNotIn(request_filter.drain_traits_filter,
                         nova_request_filter.ALL_REQUEST_FILTERS)


class FreshPlacementTest(base.DrainTestBase):
    """No CUSTOM_DRAIN_* trait exists yet: boots must not fail with 400."""

    def test_traits_are_created_once_and_boots_succeed(self) -> None:
        before = self.placement.get("/traits?name=startswith:CUSTOM_DRAIN",
                                    version="1.6").body["traits"]
        self.assertEqual([], before)
        for _ in range(3):
            self.assertIn(self.host_of(self.boot()), self.HOSTS)
        after = self.placement.get("/traits?name=startswith:CUSTOM_DRAIN",
                                   version="1.6").body["traits"]
        self.assertEqual(sorted(traits.DEFAULT_FORBIDDEN), sorted(after))
        log = self.stdlog.logger.output
        # One PUT per trait for the whole process, not one per boot.
        self.assertEqual(3, log.count('"PUT /placement/traits/CUSTOM_DRAIN_'))
        self.assertEqual(1, nova_request_filter.ALL_REQUEST_FILTERS.count(
            request_filter.drain_traits_filter))


class PlacementUnreachableTest(base.DrainTestBase):
    """The pre-filter cannot reach placement: boots go on, nothing forbidden."""

    def _setup_scheduler_service(self):  # type: ignore[no-untyped-def]
        service = super()._setup_scheduler_service()
        self.flags(group="placement", endpoint="http://127.0.0.1:9/none")
        return service

    def test_boot_succeeds_and_warns(self) -> None:
        self.assertIn(self.host_of(self.boot()), self.HOSTS)
        self.assertIn("Could not make sure the forbidden traits",
                      self.stdlog.logger.output)
        self.assertNotIn("%21CUSTOM_DRAIN", self.stdlog.logger.output)


class RebuildNotBlockedTest(base.DrainTestBase):
    HOSTS = ("host1",)
    DRAIN_OPTIONS = {"stale_node_max_age": 60}

    def test_rebuild_on_drained_host(self) -> None:
        server = self.boot()
        self.assertEqual("host1", self.host_of(server))
        # Drain host1 every way we can: trait, and a record older than the
        # age limit.
        self.add_trait("host1", traits.DRAIN_HOST)
        cn = self.compute_node("host1", "host1")
        base.backdate_compute_node(self.ctxt, cn.id, datetime.datetime(2020, 1, 1))
        self.assertEqual("ERROR", self.boot(expected_state="ERROR")["status"])

        # A rebuild with a new image goes through the scheduler
        # (nova/compute/api.py rebuild) but skips request filters and
        # filters with RUN_ON_REBUILD = False.
        rebuilt = self._rebuild_server(server, base.IMAGE_B)
        self.assertEqual("host1", self.host_of(rebuilt))
        self.assertEqual(base.IMAGE_B, rebuilt["image"]["id"])
