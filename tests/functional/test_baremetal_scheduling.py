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

"""BaremetalAvailabilityFilter and the missing-node rule: Nova's real
scheduler with a real Ironic.

One nova-compute fronts several nodes whose UUIDs are real Ironic node
UUIDs (``FakeIronicDriver``). The nodes move through real Ironic state
changes; the filters learn of them from the Ironic view's refresher, with no
nova-compute periodic in between.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
import time

from tests.functional.baremetal_base import REFRESH
from tests.functional.baremetal_base import BaremetalTestBase


class BootsLandOnAvailableNodesTest(BaremetalTestBase):
    NODES = {"avail-a": "available", "avail-b": "available",
             "maint": "maintenance", "managed": "manageable",
             "cleanfail": "clean failed", "gone": "deleted"}

    def test_only_available_nodes_are_chosen(self) -> None:
        landed = {self.node_of(self.boot()) for _ in range(4)}
        self.assertTrue(landed <= {"avail-a", "avail-b"}, landed)
        line = self.summary_lines()[0]
        self.assertIn("6 hosts in, 2 left", line)
        for reason in ("baremetal: maintenance (disk swap)",
                       "baremetal: provision_state=manageable",
                       "baremetal: provision_state=clean failed",
                       "node missing from Ironic: " + self.nodes["gone"]):
            self.assertIn(reason, line)
        self.assertIn("StaleComputeNodeFilter rejected 1", line)


class ExcludedWithinOneRefreshTest(BaremetalTestBase):
    NODES = {"a": "available", "b": "available", "c": "available"}

    def test_state_changes_reach_the_scheduler_without_nova(self) -> None:
        updated = {n: self.compute_node("bm-compute", u).updated_at
                   for n, u in self.nodes.items()}
        self.ironic.set_maintenance(self.nodes["a"], True, reason="bmc")
        self.ironic.manage(self.nodes["b"])
        self.ironic.fail_cleaning(self.nodes["b"])
        # Only once the calls have returned is the change in Ironic's
        # database: a listing that started while they ran (even inside the
        # maintenance PUT) may have read the old state.
        self.wait_for_refresh_after(time.monotonic())
        for _ in range(3):
            self.assertEqual("c", self.node_of(self.boot()))

        # Nova's records of a and b did not move: no resource update ran
        # for them (c's changed only because it took the servers).
        for name in ("a", "b"):
            self.assertEqual(updated[name], self.compute_node(
                "bm-compute", self.nodes[name]).updated_at)

        # And back: a leaves maintenance, c goes in.
        self.ironic.set_maintenance(self.nodes["a"], False)
        self.ironic.set_maintenance(self.nodes["c"], True)
        self.wait_for_refresh_after(time.monotonic())
        self.assertEqual("a", self.node_of(self.boot()))


class IronicOutageTest(BaremetalTestBase):
    """Ironic goes away: scheduling goes on as baremetal_failure_mode says."""

    NODES = {"a": "available", "b": "maintenance"}
    DRAIN_OPTIONS = {"baremetal_refresh_interval": REFRESH,
                     "baremetal_max_snapshot_age": 2}

    def stop_ironic_and_wait_untrusted(self, timeout: float = 15) -> None:
        self.ironic_fixture.server.stop()
        deadline = time.monotonic() + timeout
        while self.drain.view.trusted() is not None:
            if time.monotonic() > deadline:
                self.fail("snapshot still trusted with Ironic stopped")
            time.sleep(0.05)

    def test_pass_mode_schedules_on_every_node(self) -> None:
        self.assertEqual("a", self.node_of(self.boot()))
        self.stop_ironic_and_wait_untrusted()
        # b is in maintenance but nobody can tell: Nova's own checks decide.
        landed = {self.node_of(self.boot()) for _ in range(6)}
        self.assertIn("b", landed)
        self.assertIn("Ironic node refresh failed", self.stdlog.logger.output)
        self.assertIn("baremetal_failure_mode=pass", self.stdlog.logger.output)

    def test_reject_mode_gives_no_valid_host(self) -> None:
        self.flags(baremetal_failure_mode="reject", group="drain_filters")
        self.stop_ironic_and_wait_untrusted()
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        self.assertIn("2 x baremetal state unknown", self.summary_lines()[-1])
