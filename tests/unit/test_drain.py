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

"""The drain decisions: phases (truth tables) and the plan of each command."""
import testtools

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters import node_drain
from nova_drain_filters.drain import Action
from nova_drain_filters.drain import Phase

A = drain.Action


def service(disabled: bool = False, reason: str | None = None,
            reports: bool = True, uuid: str = "svc"
            ) -> decisions.ServiceFacts:
    return decisions.ServiceFacts("h1", disabled, forced_down=False,
                                  is_up=reports, disabled_reason=reason,
                                  uuid=uuid)


def node(uuid: str = "n1", placement: bool = False, ironic_mark: bool = False,
         ironic: bool = False, provider: bool = True) -> drain.NodeMark:
    return drain.NodeMark(uuid, f"name-{uuid}", ironic, provider, placement,
                          ironic_mark)


_UP = service()


def host(name: str = "h1", svc: decisions.ServiceFacts | None = _UP,
         nodes: tuple[drain.NodeMark, ...] | None = None,
         **load: tuple[str, ...]) -> drain.HostFacts:
    """A host with one unmarked libvirt node; ``svc=None``: released."""
    return drain.HostFacts(name, svc, (node(),) if nodes is None else nodes,
                           **load)


OURS = service(True, "drain: retire")
THEIRS = service(True, "hardware ticket 42")


class TestHostPhase(testtools.TestCase):
    def test_truth_table(self) -> None:
        marked, unmarked = (node(placement=True),), (node(),)
        busy = {"servers": ("s1",)}
        table = [
            # service, nodes, load, phase
            (None, marked, busy, Phase.RELEASED),
            (service(), unmarked, busy, Phase.ACTIVE),
            (THEIRS, unmarked, busy, Phase.DISABLED),
            (service(), marked, busy, Phase.DRAINING),
            (service(), marked, {}, Phase.DRAINED),
            (THEIRS, marked, {"migrations": ("m1",)}, Phase.DRAINING),
            (THEIRS, marked, {}, Phase.DRAINED),
            # our reason is a drain even with no provider marked
            (OURS, unmarked, {"consumers": ("c1",)}, Phase.DRAINING),
            (OURS, (), {}, Phase.DRAINED),
        ]
        for svc, nodes, load, expected in table:
            facts = drain.HostFacts("h", svc, nodes, **load)
            self.assertEqual(expected, drain.host_phase(facts),
                             (svc, nodes, load))

    def test_some_marked_nodes_are_node_drains_not_a_host_drain(self) -> None:
        facts = host(nodes=(node("a", ironic_mark=True, ironic=True),
                            node("b", ironic=True)))
        self.assertEqual(Phase.ACTIVE, drain.host_phase(facts))
        self.assertFalse(host(nodes=()).marked)

    def test_mark_on_ironic_alone_counts(self) -> None:
        facts = host(nodes=(node(ironic=True, ironic_mark=True),))
        self.assertEqual(Phase.DRAINED, drain.host_phase(facts))

    def test_ours_needs_the_prefix_and_a_disable(self) -> None:
        self.assertTrue(drain.ours(service(True, "drain: x")))
        self.assertFalse(drain.ours(service(True, "not drain: x")))
        self.assertFalse(drain.ours(service(False, "drain: x")))
        self.assertFalse(drain.ours(service(True, None)))


class TestBlockers(testtools.TestCase):
    def test_servers_then_migrations_then_other_consumers(self) -> None:
        facts = host(servers=("s1",), migrations=("m1",),
                     consumers=("s1", "m1", "c9"))
        self.assertEqual(["server s1", "migration m1", "consumer c9"],
                         drain.host_blockers(facts))

    def test_summary_names_a_few(self) -> None:
        found = [f"server s{i}" for i in range(5)]
        self.assertEqual("server s0, server s1, server s2 (+2 more)",
                         drain.summarize_blockers(found))
        self.assertEqual("server s0", drain.summarize_blockers(found[:1]))
        self.assertEqual("", drain.summarize_blockers([]))


def steps(plan: drain.Plan) -> list[tuple[str, Action, str]]:
    return [(s.host, s.action, s.target) for s in plan.steps]


class TestPlanStart(testtools.TestCase):
    def test_cordon_all_first_then_disable_each_once(self) -> None:
        plan = drain.plan_start([
            host("h1", service(uuid="s1"), (node("a"),)),
            host("h2", service(uuid="s2"), (node("b"),))], "rack 7")
        self.assertEqual([("h1", A.MARK_PROVIDER, "a"),
                          ("h2", A.MARK_PROVIDER, "b"),
                          ("h1", A.DISABLE, "s1"), ("h2", A.DISABLE, "s2")],
                         steps(plan))
        self.assertEqual("drain: rack 7", plan.steps[-1].reason)
        self.assertEqual([], plan.notes)

    def test_someone_elses_disable_gets_only_the_mark(self) -> None:
        plan = drain.plan_start([host(svc=THEIRS)], "x")
        self.assertEqual([("h1", A.MARK_PROVIDER, "n1")], steps(plan))
        self.assertEqual(["h1 was disabled by someone else (hardware ticket "
                          "42): it keeps that and gets only the mark"],
                         plan.notes)

    def test_again_is_a_no_op(self) -> None:
        for svc in (OURS, THEIRS):
            plan = drain.plan_start(
                [host(svc=svc, nodes=(node(placement=True),))], "x")
            self.assertEqual(([], [], ["h1: already draining"]),
                             (plan.steps, plan.notes,
                              [str(d) for d in plan.done]))

    def test_converges_a_partial_drain(self) -> None:
        plan = drain.plan_start([host(svc=service(uuid="s"), nodes=(
            node("a", placement=True), node("b")))], "x")
        self.assertEqual([("h1", A.MARK_PROVIDER, "b"),
                          ("h1", A.DISABLE, "s")], steps(plan))

    def test_ironic_nodes_are_marked_on_ironic_first_and_noted(self) -> None:
        nodes = (node("a", ironic=True), node("b", ironic=True,
                                              provider=False))
        plan = drain.plan_start([host(nodes=nodes)], "x")
        self.assertEqual([A.MARK_NODE, A.MARK_PROVIDER, A.MARK_NODE,
                          A.DISABLE], [s.action for s in plan.steps])
        self.assertEqual(1, len(plan.notes))
        self.assertIn("h1 is an Ironic nova-compute service fronting 2 "
                      "node(s)", plan.notes[0])

    def test_any_refusal_means_no_step_at_all(self) -> None:
        plan = drain.plan_start([host("h1"), host("gone", svc=None)], "x")
        self.assertEqual([], plan.steps)
        self.assertEqual(["gone: no compute service (unknown host, or "
                          "released)"], [str(r) for r in plan.refusals])

    def test_ironic_without_an_endpoint_is_refused(self) -> None:
        plan = drain.plan_start([host(nodes=(node(ironic=True),))], "x",
                                has_ironic=False)
        self.assertEqual([], plan.steps)
        self.assertIn("no baremetal endpoint", plan.refusals[0].why)

    def test_undo(self) -> None:
        for action, back in ((A.MARK_NODE, A.UNMARK_NODE),
                             (A.MARK_PROVIDER, A.UNMARK_PROVIDER),
                             (A.DISABLE, A.ENABLE)):
            step = drain.Step(action, "h", "t", "d", reason="drain: x")
            self.assertEqual(drain.Step(back, "h", "t", "rollback"),
                             drain.undo(step))

    def test_reason_is_one_line(self) -> None:
        self.assertEqual("drain: rack 7 retire",
                         drain.disable_reason(" rack 7\n retire "))


class TestPlanCancel(testtools.TestCase):
    def test_unmark_ironic_first_then_enable_ours(self) -> None:
        nodes = (node("a", placement=True, ironic_mark=True, ironic=True),)
        plan = drain.plan_cancel([host(svc=OURS, nodes=nodes)])
        self.assertEqual([("h1", A.UNMARK_NODE, "a"),
                          ("h1", A.UNMARK_PROVIDER, "a"),
                          ("h1", A.ENABLE, "svc")], steps(plan))

    def test_never_enables_someone_elses(self) -> None:
        plan = drain.plan_cancel([host(svc=THEIRS,
                                       nodes=(node(placement=True),))])
        self.assertEqual([("h1", A.UNMARK_PROVIDER, "n1")], steps(plan))
        self.assertEqual(["h1 stays disabled: someone else disabled it "
                          "(hardware ticket 42)"], plan.notes)

    def test_nothing_to_do_and_released(self) -> None:
        plan = drain.plan_cancel([host("h1"), host("h2", svc=None)])
        self.assertEqual([], plan.steps)
        self.assertEqual(["h1: not drained by us"], [str(d) for d in plan.done])
        self.assertEqual(["h2"], [r.host for r in plan.refusals])


class TestPlanFinish(testtools.TestCase):
    def test_truth_table(self) -> None:
        down = service(True, "drain: x", reports=False)
        up = service(True, "drain: x", reports=True)
        table = [
            # facts, step?, refusal starts with, waitable
            (host(svc=down), True, None, False),
            (host(svc=up), False, "Drained, but its nova-compute still "
                                  "reports", True),
            (host(svc=down, servers=("s1",)), False,
             "still Draining, blocked by server s1", True),
            (host(svc=service(reports=False)), False,
             "not draining (Active)", False),
            (host(svc=service(True, "ticket", reports=False)), False,
             "not draining (Disabled)", False),
        ]
        for facts, step, why, wait in table:
            plan = drain.plan_finish([facts])
            self.assertEqual(step, bool(plan.steps), facts)
            if why:
                self.assertTrue(plan.refusals[0].why.startswith(why),
                                plan.refusals[0].why)
                self.assertEqual(wait, plan.refusals[0].wait)

    def test_released_is_a_no_op(self) -> None:
        plan = drain.plan_finish([host(svc=None)])
        self.assertEqual(([], [], ["h1: already released"]),
                         (plan.steps, plan.refusals,
                          [str(d) for d in plan.done]))

    def test_the_step_says_there_is_no_undo(self) -> None:
        plan = drain.plan_finish([host(svc=service(True, "drain: x", False,
                                                   uuid="s9"))])
        self.assertEqual("h1: delete compute service s9 (1 node(s); Nova "
                         "removes the host mapping, providers and aggregate "
                         "membership: no undo)", str(plan.steps[0]))

    def test_leftovers(self) -> None:
        self.assertEqual([], drain.leftovers("h", [], False, False, []))
        self.assertEqual(
            ["compute service of h", "host mapping of h", "provider p1",
             "membership of aggregate rack7"],
            drain.leftovers("h", ["p1"], True, True, ["rack7"]))


class TestNodes(testtools.TestCase):
    def facts(self, mark: drain.NodeMark, instance: str | None = None,
              consumers: tuple[str, ...] = ()) -> node_drain.BaremetalFacts:
        return node_drain.BaremetalFacts("bm", mark, "c1", instance, consumers)

    def test_phase_truth_table(self) -> None:
        marked = node(ironic=True, ironic_mark=True)
        table = [(node(ironic=True), "i1", (), Phase.ACTIVE),
                 (marked, "i1", (), Phase.DRAINING),
                 (marked, None, ("c1",), Phase.DRAINING),
                 (marked, None, (), Phase.DRAINED)]
        for mark, instance, consumers, expected in table:
            self.assertEqual(expected, node_drain.node_phase(
                self.facts(mark, instance, consumers)))

    def test_start_and_cancel(self) -> None:
        half = self.facts(node("u", ironic=True, placement=True))
        self.assertEqual([("bm", A.MARK_NODE, "u")],
                         steps(node_drain.plan_node([half], True)))
        self.assertEqual([("bm", A.UNMARK_PROVIDER, "u")],
                         steps(node_drain.plan_node([half], False)))
        none = self.facts(node("u", ironic=True))
        self.assertEqual(["bm: not marked"], [
            str(d) for d in node_drain.plan_node([none], False).done])


class TestHelpers(testtools.TestCase):
    def test_tail_is_one_line_and_keeps_the_end(self) -> None:
        self.assertEqual("a b c", drain.tail(" a\n b\tc "))
        self.assertEqual("...6789", drain.tail("0123456789", limit=4))

    def test_backoff_doubles_caps_and_stops_at_the_deadline(self) -> None:
        self.assertEqual([1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0],
                         [drain.next_delay(i, 1000) for i in range(7)])
        self.assertEqual(2.5, drain.next_delay(3, 2.5))
        self.assertEqual(0.0, drain.next_delay(0, -1))
