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
        self.assertEqual([("ironic.add_trait", "n1", BM),
                          ("placement.update", "n1", {BM}, set())],
                         self.fx.writes())
        del self.fx.log[:]
        # Same verdicts again (another event, a field that changes
        # nothing): no write.
        self.fx.writer.apply_events(
            {"n1": inode("n1", maintenance=True, maintenance_reason="fan",
                         traits=frozenset({BM})),
             "n2": inode("n2", power_state="power on")}, {})
        self.assertEqual([], self.fx.writes())
        # A change of verdict writes, Ironic first, once.
        self.fx.writer.apply_events({"n1": inode("n1",
                                                 traits=frozenset({BM}))},
                                    {"n1": 990.0})
        self.assertEqual([("ironic.remove_trait", "n1", BM),
                          ("placement.update", "n1", set(), {BM})],
                         self.fx.writes())
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_events_applied_total"))
        self.assertEqual(10.0, self.fx.value(
            "nova_drain_agent_event_lag_seconds_sum"))

    def test_a_written_verdict_is_not_written_again(self) -> None:
        # The event's payload may still show the traits before our write.
        self.fx.install(inode("n1"))
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        del self.fx.log[:]
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        self.assertEqual([], self.fx.writes())

    def test_untrusted_picture_writes_nothing(self) -> None:
        self.fx.install(inode("n1"))
        self.fx.writer.untrust()
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        self.assertEqual([], self.fx.writes())
        self.assertEqual(0, self.fx.value("nova_drain_agent_picture_trusted"))
        # The event is kept: the next trusted picture writes it, even
        # if its listing was read before the event.
        self.fx.writer.begin_gather()
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        self.fx.install(inode("n1"))
        self.assertEqual([("ironic.add_trait", "n1", BM),
                          ("placement.update", "n1", {BM}, set())],
                         self.fx.writes())

    def test_a_node_in_use_needs_no_trait(self) -> None:
        deployed = inode("n1", provision_state="active",
                         instance_uuid="i-1")
        self.fx.install(deployed, inode("n2", instance_uuid="i-2",
                                        traits=frozenset({BM})),
                        have={BM: {"n2"}})
        self.assertEqual([], self.fx.writes())
        # Free again but cleaning: now it needs the trait.
        self.fx.writer.apply_events(
            {"n1": inode("n1", provision_state="cleaning")}, {})
        self.assertEqual(2, len(self.fx.writes()))

    def test_node_locked_is_retried_with_backoff_then_lands(self) -> None:
        self.fx.install(inode("n1"))
        locked = [ironic_fakes.api_error(409, "NodeLocked")] * 2
        self.fx.ironic.failures[("n1", BM)] = list(locked)
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        self.assertEqual([("ironic.add_trait", "n1", BM)] * 3
                         + [("placement.update", "n1", {BM}, set())],
                         self.fx.writes())
        self.assertEqual([0.5, 1.0], self.fx.sleeps)

    def test_a_write_that_keeps_failing_is_logged_once(self) -> None:
        log = self.useFixture(__import__("fixtures").FakeLogger())
        self.fx.install(inode("n1"))
        self.fx.ironic.failures[("n1", BM)] = [
            ironic_fakes.api_error(409, "NodeLocked")] * 8
        self.fx.writer.apply_events({"n1": inode("n1", **MAINT)}, {})
        # Ironic refused: placement is left alone (it would flip back).
        self.assertNotIn("placement.update", [c[0] for c in self.fx.writes()])
        self.fx.install(inode("n1", **MAINT))  # the next reconcile
        self.assertEqual(1, log.output.count("failed, tried again"))
        self.assertEqual(2, self.fx.value(
            "nova_drain_agent_write_failures_total", target="ironic"))
        self.fx.install(inode("n1", **MAINT))
        self.assertIn("written after failures", log.output)
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_writes_total", target="ironic"))

    def test_marks_over_the_budget_wait_for_the_next_interval(self) -> None:
        self.fx.fraction = 0.25  # of 8 nodes: 2 marks an interval
        nodes = [inode(f"n{i}") for i in range(8)]
        self.fx.install(*nodes)
        self.fx.writer.apply_events(
            {n.uuid: inode(n.uuid, **MAINT) for n in nodes[:5]}, {})
        marked = {c[1] for c in self.fx.writes() if c[0] == "ironic.add_trait"}
        self.assertEqual({"n0", "n1"}, marked)
        self.assertEqual(3, self.fx.value(
            "nova_drain_agent_budget_refusals_total"))
        # Clears are never limited.
        self.fx.writer.apply_events({"n0": inode("n0")}, {})
        self.assertIn(("ironic.remove_trait", "n0", BM), self.fx.writes())
        # The next interval's reconcile writes two more (n1 has it).
        del self.fx.log[:]
        self.fx.writer.begin_gather()
        self.fx.install(inode("n1", traits=frozenset({BM}), **MAINT),
                        *[inode(n.uuid, **MAINT) for n in nodes[2:5]],
                        inode("n0", **MAINT), *nodes[5:], have={BM: {"n1"}})
        marked = {c[1] for c in self.fx.writes() if c[0] == "ironic.add_trait"}
        self.assertEqual({"n0", "n2"}, marked)

    def test_placement_conflict_is_a_failure_of_that_provider(self) -> None:
        self.fx.install(inode("n1"), inode("n2"))
        self.fx.placement.failures["n1"] = http.Conflict(
            "placement", "PUT", "/x", 409, "generation")
        applied = self.fx.writer.apply_events(
            {"n1": inode("n1", **MAINT), "n2": inode("n2", **MAINT)}, {})
        self.assertEqual({("ironic", "n1"), ("ironic", "n2"),
                          ("placement", "n2")},
                         {(s.target.value, s.uuid) for s in applied})

    def test_plan_for_a_subset_calls_no_other_node_missing(self) -> None:
        picture = writer.Picture(
            [agent_fakes.record("n1"), agent_fakes.record("n2")],
            {"n1": inode("n1"), "n2": inode("n2")}, {})
        self.assertEqual([], writer.plan_for(picture, ["n1"]))
