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

import types

import fixtures

from nova_drain_filters import decisions
from nova_drain_filters import traits
from nova_drain_filters.filters import stale_compute_node_filter
from tests.unit.filters import helpers

RC = decisions.ReasonCode


class TestStaleComputeNodeFilter(helpers.ViewFilterTestCase):
    FILTER = stale_compute_node_filter.StaleComputeNodeFilter

    def codes(self, hosts: list, host: object) -> list[RC]:
        found = self.filt.rejections(hosts, self.spec())
        return [r.code for r in found.get(id(host), [])]

    def test_flags(self) -> None:
        self.assertIs(True, self.filt.run_filter_once_per_request)
        self.assertIs(False, self.filt.RUN_ON_REBUILD)

    def test_distinct_nodes_pass(self) -> None:
        hosts = [self.host("h1"), self.host("h2"), self.host("h3")]
        self.assertEqual(hosts, self.filt.filter_all(hosts, self.spec()))

    def test_duplicate_with_dead_service_rejected(self) -> None:
        live = self.host("h1", nodename="node-a", updated=helpers.ago(9000))
        dead = self.host("h2", nodename="node-a",
                         last_seen_up=helpers.ago(3600))
        other = self.host("h3")
        self.assertEqual([live, other],
                         self.filt.filter_all([dead, live, other], self.spec()))
        found = self.filt.rejections([dead, live, other], self.spec())
        self.assertEqual([id(dead)], list(found))
        reason = found[id(dead)][0]
        self.assertEqual(RC.DUPLICATE_NODE, reason.code)
        self.assertEqual(f"node-a is also on host h1 ({live.uuid})",
                         reason.detail)
        self.assertEqual(traits.STALE_NODE, reason.trait)

    def test_duplicate_both_up_newest_kept(self) -> None:
        old = self.host("h1", nodename="node-a", updated=helpers.ago(600))
        new = self.host("h2", nodename="node-a", updated=helpers.ago(5))
        self.assertEqual([new], self.filt.filter_all([old, new], self.spec()))

    def test_three_way_duplicate(self) -> None:
        hosts = [self.host(f"h{n}", nodename="node-a",
                           updated=helpers.ago(100 * n)) for n in (1, 2, 3)]
        self.assertEqual([hosts[0]], self.filt.filter_all(hosts, self.spec()))

    def test_rebuild_passes_duplicates(self) -> None:
        hosts = [self.host("h1", nodename="n"), self.host("h2", nodename="n")]
        self.assertEqual(hosts, self.filt.filter_all(
            hosts, self.spec(rebuild=True)))

    def test_age_rule_off_by_default(self) -> None:
        old = self.host("h1", updated=helpers.ago(86400 * 30))
        self.assertEqual([old], self.filt.filter_all([old], self.spec()))

    def test_age_rule_on(self) -> None:
        self.conf.config(group="drain_filters", stale_node_max_age=3600)
        old = self.host("h1", updated=helpers.ago(3601))
        at_limit = self.host("h2", updated=helpers.ago(3600))
        never = self.host("h3", updated=None)
        hosts = [old, at_limit, never]
        self.assertEqual([RC.NODE_TOO_OLD], self.codes(hosts, old))
        self.assertEqual([at_limit, never],
                         self.filt.filter_all(hosts, self.spec()))

    def test_duplicate_and_old_give_both_reasons(self) -> None:
        self.conf.config(group="drain_filters", stale_node_max_age=60)
        keeper = self.host("h1", nodename="n", updated=helpers.ago(10))
        stale = self.host("h2", nodename="n", updated=helpers.ago(600))
        self.assertEqual([RC.DUPLICATE_NODE, RC.NODE_TOO_OLD],
                         self.codes([keeper, stale], stale))

    def test_non_ironic_never_starts_the_view(self) -> None:
        hosts = [self.host("h1"), self.host("h2")]
        self.filt.filter_all(hosts, self.spec())
        self.assertEqual(0, self.view.started)
        self.assertEqual([], self.view.asked)

    def test_ironic_node_missing(self) -> None:
        gone = helpers.ironic_host("node-gone")
        here = helpers.ironic_host("node-here")
        kvm = self.host("h1")
        self.view.missing["node-gone"] = decisions.Reason(
            RC.IRONIC_NODE_MISSING, "node-gone")
        self.view.snapshot = types.SimpleNamespace(nodes={"node-here": None})
        spec = self.spec()
        self.assertEqual([here, kvm],
                         self.filt.filter_all([gone, here, kvm], spec))
        self.assertEqual(1, self.view.started)
        # The listed node took the fast path; only the unlisted one is asked.
        self.assertEqual([("node-gone", gone.updated)], self.view.asked)
        self.assertEqual(["node-gone", "node-here"], self.view.observed)

    def test_no_trusted_snapshot_asks_nothing(self) -> None:
        gone = helpers.ironic_host("node-gone")
        self.view.missing["node-gone"] = decisions.Reason(
            RC.IRONIC_NODE_MISSING, "node-gone")
        self.assertEqual([gone], self.filt.filter_all([gone], self.spec()))
        self.assertEqual([], self.view.asked)
        self.assertEqual(["node-gone"], self.view.observed)

    def test_service_is_up_stubbed(self) -> None:
        a = self.host("h1", nodename="n", updated=helpers.ago(5))
        b = self.host("h2", nodename="n", updated=helpers.ago(500))
        self.useFixture(fixtures.MockPatchObject(
            self.filt, "service_is_up", lambda h: h is b))
        self.assertEqual([b], self.filt.filter_all([a, b], self.spec()))
