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

"""The baremetal filters as an operator turns them on: nova.conf only.

Nova's real scheduler with a real Ironic; nothing of this project is set
up by a fixture and no refresh is called by hand. The filters and the
Ironic view start because Nova loads ``all_filters``.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
from typing import Any

from nova.tests.functional import integrated_helpers

from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import summary
from tests.functional import base
from tests.functional import fake_ironic_driver
from tests.functional.services import ironic_server

SUMMARY = "nova-drain-filters: request for instance"


class FlagsOnlyTestBase(integrated_helpers._IntegratedTestBase):
    """Enables the filters with ``self.flags`` and points [ironic] at a
    real Ironic; ``NODES`` says how to prepare each node, ``NOVA_ONLY``
    lists node UUIDs Nova reports that this Ironic never had."""

    ADMIN_API = True
    microversion = "latest"
    NODES: dict[str, str] = {}
    NOVA_ONLY = 0
    FAILURE_MODE = "pass"

    def setUp(self) -> None:
        # Harness plumbing only: where the nova wheel put api-paste.ini.
        self.useFixture(ndf_fixtures.NovaApiPaste())
        server = self.useFixture(ironic_server.IronicServerFixture())
        self.ironic_url = server.url
        self.ironic = ironic_server.IronicTestClient(server.url)
        self.addCleanup(self.ironic.close)
        self.nodes = {name: self._prepare(name, how)
                      for name, how in self.NODES.items()}
        for i in range(self.NOVA_ONLY):
            self.nodes[f"elsewhere-{i}"] = (
                f"00000000-0000-4000-8000-{i:012d}")
        self.by_uuid = {uuid: name for name, uuid in self.nodes.items()}
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "NODES", driver.NODES)
        driver.NODES = list(self.nodes.values())
        # Each test is a fresh scheduler process: no view left by another.
        ironic_view.set_view(None)
        self.addCleanup(ironic_view.set_view, None)
        self.addCleanup(summary.reset)
        super().setUp()

    def _prepare(self, name: str, how: str) -> str:
        if how == "enroll":
            return self.ironic.create_node(name=name)["uuid"]
        uuid = self.ironic.make_available_node(name=name)["uuid"]
        self.ironic.set_power_state(uuid, "power off")
        if how == "maintenance":
            self.ironic.set_maintenance(uuid, True, reason="disk swap")
        elif how == "deleted":
            self.ironic.delete_node(uuid)
        return uuid

    def _setup_scheduler_service(self) -> Any:
        self.flags(available_filters=[
            "nova.scheduler.filters.all_filters",
            "nova_drain_filters.filters.all_filters"],
            enabled_filters=[
                "DisabledServiceFilter", "StaleComputeNodeFilter",
                "BaremetalAvailabilityFilter", *base.NOVA_FILTERS],
            group="filter_scheduler")
        self.flags(auth_type="none", endpoint_override=self.ironic_url,
                   group="ironic")
        self.flags(baremetal_refresh_interval=1, placement_prefilter=False,
                   baremetal_failure_mode=self.FAILURE_MODE,
                   group="drain_filters")
        return super()._setup_scheduler_service()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver="drain_fake_ironic.FakeIronicDriver")
        return self._start_compute("bm-compute")

    def restart_scheduler(self) -> None:
        """Stop the scheduler and start a new one, as a new process would
        (in one test process the old view would live on)."""
        self.scheduler.stop()
        ironic_view.set_view(None)
        self.scheduler = self.start_service("scheduler")

    def boot(self, expected_state: str = "ACTIVE") -> dict:
        return self._create_server(networks="none",
                                   expected_state=expected_state)

    def node_of(self, server: dict) -> str:
        return self.by_uuid[server["OS-EXT-SRV-ATTR:hypervisor_hostname"]]

    def summary_lines(self) -> list[str]:
        return [line for line in self.stdlog.logger.output.splitlines()
                if SUMMARY in line]


class FirstBootAfterStartTest(FlagsOnlyTestBase):
    """Issue 7: the first request after a start passed every node."""

    NODES = {"good": "available", "maint": "maintenance",
             "gone": "deleted", "new": "enroll"}

    def test_first_boot_avoids_unusable_and_deleted_nodes(self) -> None:
        self.restart_scheduler()
        server = self.boot()  # at once: no wait, no refresh by hand
        self.assertEqual("good", self.node_of(server))
        lines = self.summary_lines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn("4 hosts in, 1 left", lines[0])
        self.assertIn("DisabledServiceFilter rejected 0", lines[0])
        self.assertIn("StaleComputeNodeFilter rejected 1 (1 x node missing "
                      "from Ironic: " + self.nodes["gone"], lines[0])
        self.assertIn("baremetal: maintenance (disk swap)", lines[0])
        self.assertIn("baremetal: provision_state=enroll", lines[0])


class UntrustedListingTest(FlagsOnlyTestBase):
    """Issue 14 item 1: a listing that lacks most of Nova's Ironic nodes
    (credentials that see only their own nodes) rejected them all."""

    NODES = {"good": "available"}
    NOVA_ONLY = 3

    def test_partial_listing_rejects_nothing_in_pass_mode(self) -> None:
        self.restart_scheduler()
        landed = {self.node_of(self.boot()) for _ in range(3)}
        self.assertLessEqual(landed, set(self.nodes))
        # Summary lines without a rejection are debug lines; any line at
        # info level is a rejection.
        self.assertEqual([], self.summary_lines())
        self.assertIn("lacks 3 of the 4 Ironic compute nodes Nova knows",
                      self.stdlog.logger.output)


class EmptyListingTest(FlagsOnlyTestBase):
    """The issue's own log: "3 hosts in, 0 left: StaleComputeNodeFilter
    rejected 3 (node missing from Ironic ...)" with failure mode pass."""

    NOVA_ONLY = 3

    def test_empty_listing_rejects_nothing_in_pass_mode(self) -> None:
        self.restart_scheduler()
        for _ in range(3):
            self.boot()
        self.assertEqual([], self.summary_lines())
        self.assertIn("lacks 3 of the 3 Ironic compute nodes Nova knows",
                      self.stdlog.logger.output)


class EmptyListingRejectModeTest(FlagsOnlyTestBase):
    """With ``reject``, the operator chose no boot over a blind one."""

    NOVA_ONLY = 2
    FAILURE_MODE = "reject"

    def test_reject_mode_names_the_untrusted_listing(self) -> None:
        self.restart_scheduler()
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        line = self.summary_lines()[-1]
        self.assertIn("2 hosts in, 0 left", line)
        self.assertIn("StaleComputeNodeFilter rejected 0", line)
        self.assertIn("BaremetalAvailabilityFilter rejected 2 (2 x baremetal "
                      "state unknown: not in a partial Ironic listing", line)
