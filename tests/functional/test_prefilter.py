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
from collections.abc import Collection
from typing import Any

import fixtures
from nova.scheduler import request_filter as nova_request_filter
from nova.tests.functional import integrated_helpers
from placement.objects import research_context
from placement.tests.unit import policy_fixture

from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import request_filter
from nova_drain_filters import traits
from nova_drain_filters.filters import summary
from tests.functional import base

BAD = ("bad1", "bad2", "bad3", "bad4")


def pin_drained_first(test: fixtures.TestWithFixtures,
                      bad: Collection[str]) -> None:
    """Make placement list the ``bad`` providers' candidates first.

    Placement does not promise an order for its candidates (it builds them
    from sets), so this pins the worst case that happens in real life: the
    drained providers fill the ``max_placement_results`` slots.
    """
    limit_results = research_context.RequestWideSearchContext.limit_results

    def drained_first(ctx: Any, requests: list, summaries: list) -> Any:
        def is_good(request: Any) -> bool:
            rp = request.resource_requests[0].resource_provider
            return rp.root_provider_uuid not in bad
        return limit_results(ctx, sorted(requests, key=is_good), summaries)

    test.useFixture(fixtures.MonkeyPatch(
        "placement.objects.research_context.RequestWideSearchContext."
        "limit_results", drained_first))


class StarvationMixin(base.DrainTestBase):
    """Four drained hosts and one good one; placement returns only two.

    The drained hosts are forced down (so a host filter rejects them) and
    carry CUSTOM_DRAIN_HOST; placement lists them first.
    """

    HOSTS = BAD + ("good",)
    COMPUTE_DRIVER = "fake.FakeDriver"

    def setUp(self) -> None:
        super().setUp()
        self.flags(max_placement_results=2, group="scheduler")
        for host in BAD:
            self.admin_api.put_service_force_down(self.service_id(host), True)
            self.add_trait(host, traits.DRAIN_HOST)
        pin_drained_first(
            self, {self._get_provider_uuid_by_host(host) for host in BAD})


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


class OperatorConfiguredBase(integrated_helpers._IntegratedTestBase):
    """The filters turned on as an operator does: nova.conf, nothing else.

    No project fixture configures anything: the pre-filter has to reach
    placement the way nova-scheduler does. Five hosts; ``mark_bad_hosts``
    marks four of them ``CUSTOM_DRAIN_STALE_NODE`` (their services are up,
    so only the pre-filter keeps boots off them). Placement lists the
    marked ones first and returns one candidate per query.
    """

    ADMIN_API = True
    microversion = "latest"
    HOSTS = BAD + ("good",)

    def setUp(self) -> None:
        # Where the nova wheel put api-paste.ini: harness plumbing.
        self.useFixture(ndf_fixtures.NovaApiPaste())
        # Process-wide state that outlives a test: Nova's filter list and
        # what the pre-filter learnt about the last test's placement.
        request_filter.reset()
        self.addCleanup(request_filter.reset)
        self.addCleanup(request_filter.uninstall)
        self.addCleanup(summary.reset)
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group="quota")
        self.bad = {self._get_provider_uuid_by_host(h): h for h in BAD}
        pin_drained_first(self, self.bad)

    def _setup_scheduler_service(self) -> Any:
        self.flags(available_filters=[
            "nova.scheduler.filters.all_filters",
            "nova_drain_filters.filters.all_filters"],
            group="filter_scheduler")
        self.flags(max_placement_results=1, group="scheduler")
        return super()._setup_scheduler_service()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver="fake.FakeDriver")
        for host in self.HOSTS:
            self._start_compute(host)
        return self.computes[self.HOSTS[0]]

    def boot(self) -> str:
        """Boot a server; return the host it landed on."""
        server = self._create_server(networks="none")
        return str(server["OS-EXT-SRV-ATTR:host"])

    def mark_bad_hosts(self) -> None:
        self._create_trait(traits.STALE_NODE)
        for rp_uuid in self.bad:
            self._set_provider_traits(
                rp_uuid,
                self._get_provider_traits(rp_uuid) + [traits.STALE_NODE])

    def drain_traits(self) -> list[str]:
        return sorted(self.placement.get(
            "/traits?name=startswith:CUSTOM_DRAIN",
            version="1.6").body["traits"])

    def assert_boots_on_good(self, count: int) -> None:
        for _ in range(count):
            self.assertEqual("good", self.boot())

    def refuse_trait_writes(self) -> None:
        """Placement's own policy refuses ``PUT /traits/{name}`` (403)."""
        policy_fixture.PolicyFixture.set_rules(
            {"placement:traits:update": "!"}, overwrite=False)


class OperatorConfiguredTest(OperatorConfiguredBase):
    def test_marked_hosts_avoided_with_unseen_traits(self) -> None:
        self.mark_bad_hosts()
        # The other forbidden traits placement has never seen: forbidding
        # them as they are would get 400 and NoValidHost.
        self.assertEqual([traits.STALE_NODE], self.drain_traits())
        self.assert_boots_on_good(5)
        self.assertEqual(sorted(traits.DEFAULT_FORBIDDEN), self.drain_traits())
        log = self.stdlog.logger.output
        self.assertIn("%21CUSTOM_DRAIN_STALE_NODE", log)
        self.assertNotIn("Could not make sure the forbidden traits", log)
        self.assertNotIn("pre-filter forbade", log)

    def test_first_boot_on_fresh_placement_then_marked(self) -> None:
        self.assertEqual([], self.drain_traits())
        self.assertIn(self.boot(), self.HOSTS)
        self.assertEqual(sorted(traits.DEFAULT_FORBIDDEN), self.drain_traits())
        self.mark_bad_hosts()
        self.assert_boots_on_good(3)

    def test_trait_deleted_between_boots(self) -> None:
        self.mark_bad_hosts()
        self.assert_boots_on_good(1)
        # An operator tidies up a custom trait no provider carries.
        unused = traits.BAREMETAL_UNAVAILABLE
        self.assertEqual(204, self._delete_trait(unused).status)
        self.assertNotIn(unused, self.drain_traits())
        # The pre-filter still forbids it: placement answers 400, the
        # pre-filter re-creates it and Nova's query is sent again.
        self.assert_boots_on_good(1)
        self.assertIn(unused, self.drain_traits())
        log = self.stdlog.logger.output
        self.assertIn("No such trait(s): " + unused, log)
        self.assertIn("Placement no longer had the forbidden traits "
                      f"['{unused}']", log)
        self.assert_boots_on_good(1)


class TraitWritesRefusedTest(OperatorConfiguredBase):
    """Placement will not create the traits: the summary line says so."""

    def test_forbids_what_exists_and_says_what_not(self) -> None:
        self.mark_bad_hosts()
        self.refuse_trait_writes()
        self.assert_boots_on_good(3)
        lines = [line for line in self.stdlog.logger.output.splitlines()
                 if "nova-drain-filters: request for instance" in line]
        self.assertEqual(3, len(lines), lines)
        self.assertIn(
            "pre-filter forbade CUSTOM_DRAIN_STALE_NODE but not "
            "CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE, CUSTOM_DRAIN_HOST "
            "(placement did not confirm or create them: placement PUT "
            "/traits/CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE: HTTP 403", lines[0])

    def test_forbids_nothing_and_says_why(self) -> None:
        self.refuse_trait_writes()
        self.assertIn(self.boot(), self.HOSTS)
        self.assertIn(
            "pre-filter forbade nothing (placement did not confirm or create "
            "them: placement PUT /traits/CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE: "
            "HTTP 403", self.stdlog.logger.output)
        self.assertEqual([], self.drain_traits())
