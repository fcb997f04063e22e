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


"""The agent's writer: only verdict changes write, trusted, budgeted."""
import fixtures
import testtools

from nova_drain_filters import traits
from nova_drain_filters.agent import writer
from nova_drain_filters.clients import http
from tests.unit import ironic_fakes
from tests.unit.agent import agent_fakes

BM = traits.BAREMETAL_UNAVAILABLE
inode = ironic_fakes.ironic_node
MAINT = {"maintenance": True, "maintenance_reason": "psu"}


class TestWriter(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.fx = agent_fakes.AgentWriter()

    def test_reconcile_marks_then_only_verdict_changes_write(self) -> None:
        self.fx.install(inode("n1", **MAINT), inode("n2"))
        self.assertEqual([("placement.update", "n1", {BM}, set()),
                          ("ironic.add_trait", "n1", BM)],
                         self.fx.writes())
        del self.fx.log[:]
        # Same verdicts again (a field that changes nothing): no write.
        self.fx.event(inode("n1", maintenance=True, maintenance_reason="x"),
                      inode("n2", power_state="power on"))
        self.assertEqual([], self.fx.writes())
        # A change of verdict writes, Ironic first, once.
        self.fx.event(inode("n1"), stamps={"n1": 990.0})
        self.assertEqual([("ironic.remove_trait", "n1", BM),
                          ("placement.update", "n1", set(), {BM})],
                         self.fx.writes())
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_events_applied_total"))
        self.assertEqual(10.0, self.fx.value(
            "nova_drain_agent_event_lag_seconds_sum"))

    def test_another_agents_write_is_read_not_assumed(self) -> None:
        # Another agent of the pool marked n1 (its event went there);
        # this agent's picture never saw it, and gets the clearing event.
        self.fx.install(inode("n1"))
        self.fx.ironic.add_trait("n1", BM)
        self.fx.placement.update_provider_traits("n1", {BM})
        self.fx.ironic.set(inode("n1", **MAINT))
        del self.fx.log[:]
        self.fx.event(inode("n1"))
        self.assertEqual([("ironic.remove_trait", "n1", BM),
                          ("placement.update", "n1", set(), {BM})],
                         self.fx.writes())

    def test_untrusted_picture_writes_nothing(self) -> None:
        self.fx.install(inode("n1"))
        self.fx.writer.untrust()
        self.fx.event(inode("n1", **MAINT))
        self.assertEqual([], self.fx.writes())
        self.assertEqual(0, self.fx.value("nova_drain_agent_picture_trusted"))
        # The next trusted picture writes it, even from a listing read
        # before the event: the node is read again.
        self.fx.writer.begin_gather()
        stale = writer.Picture([agent_fakes.record("n1")],
                               {"n1": inode("n1")}, {})
        self.fx.event(inode("n1", **MAINT))
        self.fx.writer.install(stale)
        self.assertEqual([("placement.update", "n1", {BM}, set()),
                          ("ironic.add_trait", "n1", BM)],
                         self.fx.writes())

    def test_a_node_in_use_needs_no_trait(self) -> None:
        self.fx.install(inode("n1", provision_state="active",
                              instance_uuid="i-1"))
        self.fx.event(inode("n1", provision_state="deploying",
                            instance_uuid="i-1", maintenance=True))
        self.assertEqual([], self.fx.writes())
        # Free again but cleaning: now it needs the trait.
        self.fx.event(inode("n1", provision_state="cleaning"))
        self.assertEqual(2, len(self.fx.writes()))

    def test_node_locked_is_retried_with_backoff_then_lands(self) -> None:
        self.fx.install(inode("n1"))
        self.fx.ironic.failures[("n1", BM)] = [
            ironic_fakes.api_error(409, "NodeLocked")] * 2
        self.fx.event(inode("n1", **MAINT))
        self.assertEqual([("placement.update", "n1", {BM}, set())]
                         + [("ironic.add_trait", "n1", BM)] * 3,
                         self.fx.writes())
        self.assertEqual([0.5, 1.0], self.fx.sleeps)

    def test_a_write_that_keeps_failing_is_logged_once(self) -> None:
        log = self.useFixture(fixtures.FakeLogger())
        self.fx.install(inode("n1"))
        self.fx.ironic.failures[("n1", BM)] = [
            ironic_fakes.api_error(409, "NodeLocked")] * 8
        self.fx.event(inode("n1", **MAINT))
        # Placement keeps the node out at once; Ironic refused, so the
        # node's trait is tried again at the next reconcile.
        self.assertEqual([("placement.update", "n1", {BM}, set())],
                         [c for c in self.fx.writes()
                          if c[0] == "placement.update"])
        self.fx.install()  # the next reconcile fails again
        self.assertEqual(1, log.output.count("failed, tried again"))
        self.assertEqual(2, self.fx.value(
            "nova_drain_agent_write_failures_total", target="ironic"))
        self.fx.install()  # and then lands
        self.assertIn("written after failures", log.output)
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_writes_total", target="ironic"))
        self.assertEqual({BM}, self.fx.ironic.get_node("n1").traits)

    def test_marks_over_the_budget_wait_for_the_next_interval(self) -> None:
        self.fx.fraction = 0.25  # of 8 nodes: 2 marks an interval
        nodes = [inode(f"n{i}") for i in range(8)]
        self.fx.install(*nodes)
        self.fx.event(*[inode(n.uuid, **MAINT) for n in nodes[:5]])
        marked = {c[1] for c in self.fx.writes() if c[0] == "ironic.add_trait"}
        self.assertEqual({"n0", "n1"}, marked)
        self.assertEqual(3, self.fx.value(
            "nova_drain_agent_budget_refusals_total"))
        # Clears are never limited.
        self.fx.event(inode("n0"))
        self.assertIn(("ironic.remove_trait", "n0", BM), self.fx.writes())
        # The next interval's reconcile marks two more.
        del self.fx.log[:]
        self.fx.writer.begin_gather()
        self.fx.install()
        marked = {c[1] for c in self.fx.writes() if c[0] == "ironic.add_trait"}
        self.assertEqual({"n2", "n3"}, marked)

    def test_placement_conflict_is_a_failure_of_that_provider(self) -> None:
        self.fx.install(inode("n1"), inode("n2"))
        self.fx.placement.failures["n1"] = http.Conflict(
            "placement", "PUT", "/x", 409, "generation")
        applied = self.fx.event(inode("n1", **MAINT), inode("n2", **MAINT))
        self.assertEqual({("ironic", "n1"), ("ironic", "n2"),
                          ("placement", "n2")},
                         {(s.target.value, s.uuid) for s in applied})

    def test_plan_for_a_subset_calls_no_other_node_missing(self) -> None:
        picture = writer.Picture(
            [agent_fakes.record("n1"), agent_fakes.record("n2")],
            {"n1": inode("n1"), "n2": inode("n2")}, {})
        self.assertEqual([], writer.plan_for(picture, ["n1"]))
