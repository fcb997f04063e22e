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

"""StaleComputeNodeFilter inside Nova's real scheduler."""
import datetime

from tests.functional import base


class DuplicateNodeTest(base.RebalanceDuplicateMixin):
    def test_duplicate_rejected_and_boot_lands_on_live_record(self) -> None:
        server = self.boot()
        landed = (server["OS-EXT-SRV-ATTR:host"],
                  server["OS-EXT-SRV-ATTR:hypervisor_hostname"])
        self.assertNotEqual(("host1", "node-x"), landed)
        log = self.stdlog.logger.output
        self.assertNotIn("Error from last host", log)
        line = self.summary_lines()[0]
        self.assertIn("StaleComputeNodeFilter rejected 1 (1 x duplicate "
                      "compute node: node-x is also on host host2", line)
        # The live record is never the one rejected.
        allocations = self.placement.get(
            f"/resource_providers/{self.dup_uuid}/allocations").body
        self.assertEqual({}, allocations["allocations"])


class DuplicateNodeWithoutFiltersTest(base.RebalanceDuplicateMixin):
    DRAIN = False

    def test_duplicate_is_chosen_first(self) -> None:
        # Without the filter the scheduler picks the duplicate (it weighs
        # best) and the build on host1 fails and is rescheduled.
        server = self.boot()
        log = self.stdlog.logger.output
        # nova/scheduler/utils.py populate_retry logs the failed attempt.
        self.assertIn("Error from last host: host1 (node node-x)", log)
        # The retry lands elsewhere (host1's own node is fine).
        self.assertNotEqual(("host1", "node-x"),
                            (server["OS-EXT-SRV-ATTR:host"],
                             server["OS-EXT-SRV-ATTR:hypervisor_hostname"]))


class NodeAgeRuleTest(base.DrainTestBase):
    DRAIN_OPTIONS = {"stale_node_max_age": 3600}

    def test_age_rule_is_opt_in_and_rejects_old_records(self) -> None:
        cn = self.compute_node("host1", "host1")
        old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(
            hours=5)
        # updated_at is written only on resource changes; set it directly.
        base.backdate_compute_node(self.ctxt, cn.id, old)
        for _ in range(3):
            self.assertEqual("host2", self.host_of(self.boot()))
        self.assertIn("compute node not updated: last updated",
                      self.summary_lines()[0])


class NodeAgeRuleOffTest(base.DrainTestBase):
    def test_old_records_pass_by_default(self) -> None:
        for host in self.HOSTS:
            cn = self.compute_node(host, host)
            base.backdate_compute_node(
                self.ctxt, cn.id, datetime.datetime(2020, 1, 1))
        hosts = {self.host_of(self.boot()) for _ in range(6)}
        self.assertTrue(hosts <= set(self.HOSTS))
        self.assertEqual([], [line for line in self.summary_lines()
                              if "rejected 1" in line or "rejected 2" in line])
