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

"""A provider whose compute node record Nova deleted: ``orphan list``,
``orphan clear`` and ``stale list`` judge it, and agree.

The node is deleted the way Nova deletes one: the driver stops reporting it,
``update_available_resource`` destroys the record and cannot delete the
provider, which still holds an orphaned allocation
(``nova/compute/manager.py`` ``update_available_resource``, then
``SchedulerReportClient.delete_resource_provider`` swallowing the 409).

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
import io
import json
from contextlib import redirect_stdout

import fixtures
from nova.cmd import manage

from tests.functional import cli_harness
from tests.functional import fake_ironic_driver

GOLD = fake_ironic_driver.GOLD
NODES = ["6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000011",
         "6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000012"]
DRIVER = "tests.functional.fake_ironic_driver.FakeIronicDriver"


class NodeRecordGoneTest(cli_harness.CliTestBase):
    """Two baremetal nodes of one CUSTOM_BAREMETAL_GOLD each."""

    HOSTS = ("bm-compute",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"

    def setUp(self) -> None:
        self.useFixture(fixtures.MonkeyPatch(f"{DRIVER}.NODES", list(NODES)))
        self.useFixture(fixtures.MonkeyPatch(f"{DRIVER}.RESOURCE_CLASS", GOLD))
        super().setUp()
        self.flavor = fake_ironic_driver.post_gold_flavor(self.admin_api)

    def delete_node_with_orphan(self) -> tuple[dict, dict, str]:
        """A live server on one node; the other node's server is deleted
        while the allocation removal fails, then that node is deleted."""
        live = self._create_server(flavor_id=self.flavor, networks="none")
        doomed = self._create_server(flavor_id=self.flavor, networks="none")
        gone = doomed["OS-EXT-SRV-ATTR:hypervisor_hostname"]
        with fixtures.MockPatch(
                "nova.scheduler.client.report.SchedulerReportClient."
                "delete_allocation_for_instance", return_value=False):
            self._delete_server(doomed)
        self.computes["bm-compute"].driver._set_nodes(
            [n for n in NODES if n != gone])
        # Nova's Ironic driver asks Ironic (driver.py is_node_deleted).
        with fixtures.MonkeyPatch(f"{DRIVER}.is_node_deleted",
                                  lambda _self, _node: True):
            self._run_periodics()
        hypervisors = self.admin_api.api_get(
            "/os-hypervisors/detail").body["hypervisors"]
        self.assertNotIn(gone, [h["id"] for h in hypervisors])
        provider = self.placement.get(f"/resource_providers/{gone}",
                                      version="1.14")
        self.assertEqual(200, provider.status)
        traits = self.placement.get(f"/resource_providers/{gone}/traits",
                                    version="1.6").body["traits"]
        self.assertIn("COMPUTE_NODE", traits)
        return live, doomed, gone

    def test_listed_cleared_and_agreed_on(self) -> None:
        live, doomed, gone = self.delete_node_with_orphan()
        live_before = self.placement.get(f"/allocations/{live['id']}",
                                         version="1.28").body

        out = io.StringIO()
        with redirect_stdout(out):
            manage.PlacementCommands().audit(verbose=True)
        self.assertIn(f"The compute node for UUID {gone} can not be found",
                      out.getvalue())

        rows = self.cli_json("drain", "orphan", "list")
        self.assertEqual(
            [(doomed["id"], gone, "", gone, f"{GOLD}=1",
              "consumer does not exist")],
            [(r["Consumer"], r["Resource Provider"], r["Host"], r["Node"],
              r["Resources"], r["Reason"]) for r in rows])

        stale = self.cli_json("drain", "stale", "list")
        self.assertEqual([(gone, "resource_provider", gone, 1)],
                         [(r["UUID"], r["Kind"], r["Node"], r["Allocations"])
                          for r in stale])

        done = self.cli("drain", "orphan", "clear", doomed["id"], "--yes",
                        "-f", "json")
        self.assertEqual(0, done.rc, done.stderr)
        self.assertIn('"deleted"', done.stdout)
        self.assertEqual([], self.cli_json("drain", "orphan", "list"))
        self.assertEqual([(gone, 0)], [
            (r["UUID"], r["Allocations"])
            for r in self.cli_json("drain", "stale", "list")])
        self.assertEqual(live_before, self.placement.get(
            f"/allocations/{live['id']}", version="1.28").body)

        # With its dead consumer gone, stale clear deletes the provider.
        cleared = self.cli("drain", "stale", "clear", gone, "--yes", "-f",
                           "json")
        self.assertEqual(0, cleared.rc, cleared.stderr)
        self.assertEqual([("delete resource provider", gone)],
                         [(r["Step"], r["Target"])
                          for r in json.loads(cleared.stdout)])
        self.assertEqual([], self.cli_json("drain", "stale", "list"))
