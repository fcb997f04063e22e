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

import fixtures

from nova_drain_filters import decisions
from nova_drain_filters.filters import baremetal_availability_filter
from tests.unit.filters import helpers

RC = decisions.ReasonCode
CLEANING = decisions.Reason(RC.BAREMETAL_UNAVAILABLE, "provision_state=clean")


class TestBaremetalAvailabilityFilter(helpers.ViewFilterTestCase):
    FILTER = baremetal_availability_filter.BaremetalAvailabilityFilter

    def test_flags(self) -> None:
        self.assertIs(True, self.filt.run_filter_once_per_request)
        self.assertIs(False, self.filt.RUN_ON_REBUILD)

    def test_non_ironic_hosts_pass_without_ironic(self) -> None:
        hosts = [self.host("h1"), self.host("h2", disabled=True)]
        self.assertEqual(hosts, self.filt.filter_all(hosts, self.spec()))
        self.assertEqual(0, self.view.started)
        self.assertEqual([], self.view.asked)

    def test_unavailable_node_rejected(self) -> None:
        busy = helpers.ironic_host("node-busy")
        free = helpers.ironic_host("node-free")
        kvm = self.host("h1")
        self.view.unavailable["node-busy"] = [CLEANING]
        hosts = [busy, free, kvm]
        found = self.filt.rejections(hosts, self.spec())
        self.assertEqual({id(busy): [CLEANING]}, found)
        self.assertEqual([free, kvm], self.filt.filter_all(hosts, self.spec()))
        self.assertEqual({("node-busy",), ("node-free",)}, set(self.view.asked))
        self.assertGreaterEqual(self.view.started, 1)

    def test_rebuild_passes_without_ironic(self) -> None:
        busy = helpers.ironic_host("node-busy")
        self.view.unavailable["node-busy"] = [CLEANING]
        self.assertEqual([busy], self.filt.filter_all(
            [busy], self.spec(rebuild=True)))
        self.assertEqual([], self.view.asked)

    def test_view_error_passes_host_and_logs(self) -> None:
        node = helpers.ironic_host("node-1")
        self.view.error = RuntimeError("snapshot broken")
        self.assertEqual([node], self.filt.filter_all([node], self.spec()))
        self.assertIn("BaremetalAvailabilityFilter failed on", self.log.output)
        self.assertIn("snapshot broken", self.log.output)

    def test_view_start_error_passes_every_host(self) -> None:
        nodes = [helpers.ironic_host("node-1"), helpers.ironic_host("node-2")]
        self.view.unavailable["node-1"] = [CLEANING]
        self.useFixture(fixtures.MockPatchObject(
            self.view, "ensure_running", side_effect=RuntimeError("no auth")))
        self.assertEqual(nodes, self.filt.filter_all(nodes, self.spec()))
        self.assertIn("BaremetalAvailabilityFilter failed; passing every host",
                      self.log.output)
