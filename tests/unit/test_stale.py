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

"""Stale records: find_stale's reasons and plan_clear's rules."""
import datetime
from collections.abc import Iterable
from typing import Any

import testtools

from nova_drain_filters import decisions
from nova_drain_filters import stale
from nova_drain_filters.clients import compute
from tests.unit import drain_fakes as df

RC = decisions.ReasonCode
Action = stale.Action
NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def find(hvs: list[compute.Hypervisor], services: Iterable[compute.Service] = (),
         providers: Iterable[str] | None = None, compute: Iterable[str] = (),
         ironic: Any = None, servers: Iterable[compute.Server] = (),
         grace: int = 0) -> list[stale.StaleRecord]:
    if providers is None:
        providers = [h.uuid for h in hvs]
    return stale.find_stale(hvs, services, providers, compute, ironic,
                            servers, NOW, grace=grace)


def codes(records: list[stale.StaleRecord]) -> dict[str, list[RC]]:
    return {r.uuid: [x.code for x in r.reasons] for r in records}


def record(uuid: str, *reasons: RC, kind: str = stale.COMPUTE_NODE,
           host: str = "c1", instances: int = 0) -> stale.StaleRecord:
    return stale.StaleRecord(kind, uuid, host, f"node-{uuid}", "ironic",
                             tuple(decisions.Reason(r) for r in reasons),
                             instances, service_id=f"svc-{host}")


class TestFindStale(testtools.TestCase):
    def test_healthy_node_is_not_stale(self) -> None:
        self.assertEqual([], find([df.hv("u1")], [df.service("c1")],
                                  ironic={"u1": object()}))

    def test_service_down_since(self) -> None:
        [found] = find([df.hv("u1")], [df.service(
            "c1", "down", updated_at="2024-05-01T11:50:00.000000")])
        self.assertEqual((decisions.Reason(
            RC.SERVICE_DOWN, "last seen 2024-05-01T11:50:00Z, 600s ago"),),
            found.reasons)
        self.assertEqual(("compute_node", "u1", "c1", "u1", "ironic",
                          "svc-c1"),
                         (found.kind, found.uuid, found.host, found.node,
                          found.hypervisor_type, found.service_id))
        self.assertEqual({"service_down"}, found.codes)

    def test_service_down_within_grace_is_not_stale(self) -> None:
        # Down 600 s ago: with a grace of 601 s it may be rebooting.
        down = [df.service("c1", "down",
                           updated_at="2024-05-01T11:50:00.000000")]
        self.assertEqual([], find([df.hv("u1")], down, grace=601))
        self.assertEqual({"u1": [RC.SERVICE_DOWN]},
                         codes(find([df.hv("u1")], down, grace=600)))
        # A forced down service is down now: no grace.
        forced = [df.service("c1", "down", True,
                             updated_at="2024-05-01T11:59:59.000000")]
        self.assertEqual({"u1": [RC.SERVICE_FORCED_DOWN]},
                         codes(find([df.hv("u1")], forced, grace=600)))

    def test_down_host_with_servers_says_so_on_every_node(self) -> None:
        # Two nodes of host c1, one server on n2: the host is not stale,
        # and no node of it invites a clear.
        hvs = [df.hv("u1", "n1"), df.hv("u2", "n2")]
        found = find(hvs, [df.service("c1", "down")],
                     servers=[df.server("s1", node="n2")])
        self.assertEqual({"u1": [RC.SERVICE_DOWN_WITH_SERVERS],
                          "u2": [RC.SERVICE_DOWN_WITH_SERVERS]}, codes(found))
        self.assertEqual("service down with servers: 1 server(s) on the "
                         "host; service down: never seen",
                         decisions.summarize(found[0].reasons))
        steps = stale.plan_clear(found, hvs, {})
        self.assertEqual([(Action.SKIP, "c1", "service has 1 instance(s)")],
                         [(s.action, s.target, s.detail) for s in steps])

    def test_service_down_never_seen(self) -> None:
        [found] = find([df.hv("u1")], [df.service("c1", "down")])
        self.assertEqual("service down: never seen",
                         decisions.summarize(found.reasons))

    def test_forced_down_only(self) -> None:
        found = find([df.hv("u1")], [df.service("c1", "up", forced_down=True)])
        self.assertEqual({"u1": [RC.SERVICE_FORCED_DOWN]}, codes(found))

    def test_ironic_missing_needs_the_node_list(self) -> None:
        hvs = [df.hv("u1"), df.hv("u2")]
        self.assertEqual([], find(hvs, ironic=None))
        found = find(hvs, ironic={"u1": object()})
        self.assertEqual({"u2": [RC.IRONIC_NODE_MISSING]}, codes(found))
        self.assertEqual("u2", found[0].reasons[0].detail)

    def test_ironic_missing_only_for_ironic_hypervisors(self) -> None:
        self.assertEqual([], find([df.hv("u1", "kvm1", htype="QEMU"),
                                   df.hv("u2", "x", htype=None)], ironic={}))

    def test_duplicate_record(self) -> None:
        found = find([df.hv("u1", "n1", host="c1"),
                      df.hv("u2", "n1", host="c2")],
                     [df.service("c1"), df.service("c2")])
        self.assertEqual([(
            "u1", (decisions.Reason(RC.DUPLICATE_NODE,
                                    "n1 is also on host c2 (u2)"),))],
            [(r.uuid, r.reasons) for r in found])

    def test_node_without_provider(self) -> None:
        found = find([df.hv("u1"), df.hv("u2")], providers=["u1"])
        self.assertEqual({"u2": [RC.NODE_WITHOUT_PROVIDER]}, codes(found))

    def test_provider_without_node_only_for_unknown_compute(self) -> None:
        found = find([df.hv("u1")], providers=["u1", "rp-b", "rp-a", "rp-x"],
                     compute=["u1", "rp-b", "rp-a"])
        self.assertEqual([("resource_provider", "rp-a", "", ""),
                          ("resource_provider", "rp-b", "", "")],
                         [(r.kind, r.uuid, r.host, r.node) for r in found])
        self.assertEqual({"provider_without_node"}, found[0].codes)
        self.assertIsNone(found[0].hypervisor_type)

    def test_provider_without_node_named_as_nova_named_it(self) -> None:
        found = stale.find_stale([], [], ["rp-a"], ["rp-a"], None, [], NOW,
                                 names={"rp-a": "bm-7"})
        self.assertEqual([("rp-a", "", "bm-7")],
                         [(r.uuid, r.host, r.node) for r in found])

    def test_reasons_accumulate(self) -> None:
        found = find([df.hv("u1")], [df.service("c1", "down", True)],
                     providers=[], ironic={})
        self.assertEqual({"u1": [RC.SERVICE_FORCED_DOWN,
                                 RC.IRONIC_NODE_MISSING,
                                 RC.NODE_WITHOUT_PROVIDER]}, codes(found))

    def test_instances_counted_per_host_and_node(self) -> None:
        servers = [df.server("a", "u1", "c1"), df.server("b", "u1", "c1"),
                   df.server("c", "u2", "c1"), df.server("d", "u1", "c9"),
                   df.server("e", None, None)]
        found = find([df.hv("u1"), df.hv("u2")], providers=[],
                     servers=servers)
        self.assertEqual({"u1": 2, "u2": 1},
                         {r.uuid: r.instances for r in found})


class TestPlanClear(testtools.TestCase):
    def test_down_service_deleted_whole(self) -> None:
        hvs = [df.hv("u1"), df.hv("u2")]
        records = [record("u1", RC.SERVICE_DOWN),
                   record("u2", RC.SERVICE_FORCED_DOWN, RC.IRONIC_NODE_MISSING)]
        self.assertEqual([stale.Step(
            Action.DELETE_SERVICE, "svc-c1", "host c1, 2 node(s)", ("u1", "u2"))],
            stale.plan_clear(records, hvs, {}))

    def test_service_with_a_node_not_stale_is_not_deleted(self) -> None:
        hvs = [df.hv("u1"), df.hv("u2")]
        actions = stale.plan_clear([record("u1", RC.SERVICE_DOWN)], hvs, {})
        self.assertNotIn(Action.DELETE_SERVICE, [a.action for a in actions])
        self.assertEqual([(Action.SKIP, "u1")],
                         [(a.action, a.target) for a in actions])

    def test_service_with_instances_skipped(self) -> None:
        hvs = [df.hv("u1"), df.hv("u2")]
        records = [record("u1", RC.SERVICE_DOWN, instances=2),
                   record("u2", RC.SERVICE_DOWN, instances=1)]
        self.assertEqual([stale.Step(
            Action.SKIP, "c1", "service has 3 instance(s)", ("u1", "u2"))],
            stale.plan_clear(records, hvs, {}))

    def test_service_with_live_consumers_is_not_deleted(self) -> None:
        # A migration in progress holds allocations on the down host's
        # provider; no instance is counted there (the instance's host is the
        # source).
        actions = stale.plan_clear([record("u1", RC.SERVICE_DOWN)],
                                   [df.hv("u1")], {"u1": ["mig-1"]})
        self.assertEqual([Action.SKIP], [a.action for a in actions])

    def test_service_not_down_is_not_deleted_whole(self) -> None:
        actions = stale.plan_clear([record("u1", RC.NODE_WITHOUT_PROVIDER)],
                                   [df.hv("u1")], {})
        self.assertEqual([stale.Step(
            Action.SKIP, "u1", "its service is alive and still reports it: "
            "compute node with no resource provider", ("u1",))], actions)

    def test_provider_without_node(self) -> None:
        rp = record("rp-1", RC.PROVIDER_WITHOUT_NODE,
                    kind=stale.RESOURCE_PROVIDER)
        self.assertEqual([stale.Step(Action.DELETE_PROVIDER, "rp-1",
                                       "no compute node", ("rp-1",))],
                         stale.plan_clear([rp], [], {"rp-1": []}))
        self.assertEqual([stale.Step(Action.SKIP, "rp-1", "in use by a, b",
                                       ("rp-1",))],
                         stale.plan_clear([rp], [], {"rp-1": ["b", "a"]}))

    def test_single_record_deleted_for_duplicate_or_ironic_missing(
            self) -> None:
        hvs = [df.hv("u1"), df.hv("u2"), df.hv("u3")]
        records = [record("u1", RC.DUPLICATE_NODE),
                   record("u2", RC.IRONIC_NODE_MISSING)]
        self.assertEqual([
            stale.Step(Action.DELETE_COMPUTE_NODE, "u1",
                         "host c1 node node-u1: duplicate compute node",
                         ("u1",)),
            stale.Step(Action.DELETE_COMPUTE_NODE, "u2",
                         "host c1 node node-u2: node missing from Ironic",
                         ("u2",))], stale.plan_clear(records, hvs, {}))

    def test_single_record_with_instances_or_live_consumers_skipped(
            self) -> None:
        hvs = [df.hv("u1"), df.hv("u2"), df.hv("u3")]
        records = [record("u1", RC.DUPLICATE_NODE, instances=2),
                   record("u2", RC.IRONIC_NODE_MISSING)]
        actions = stale.plan_clear(records, hvs, {"u2": ["inst-9"]})
        self.assertEqual([
            (Action.SKIP, "u1",
             "node node-u1 has 2 instance(s) and 0 live consumer(s)"),
            (Action.SKIP, "u2",
             "node node-u2 has 0 instance(s) and 1 live consumer(s)")],
            [(a.action, a.target, a.detail) for a in actions])

    def test_node_without_provider_under_live_service_skipped(self) -> None:
        hvs = [df.hv("u1"), df.hv("u2")]
        actions = stale.plan_clear(
            [record("u1", RC.NODE_WITHOUT_PROVIDER)], hvs, {})
        self.assertEqual([Action.SKIP], [a.action for a in actions])
        self.assertIn("still reports it", actions[0].detail)

    def test_skip_of_down_service_node_does_not_say_alive(self) -> None:
        # Only u1 of the down service's two nodes was named.
        actions = stale.plan_clear([record("u1", RC.SERVICE_DOWN)],
                                   [df.hv("u1"), df.hv("u2")], {})
        self.assertEqual([Action.SKIP], [a.action for a in actions])
        self.assertNotIn("service is alive", actions[0].detail)

    def test_services_before_records_and_sorted(self) -> None:
        hvs = [df.hv("u2", host="c2"), df.hv("u1", host="c1"),
               df.hv("u3", host="c3")]
        records = [record("u3", RC.DUPLICATE_NODE, host="c3"),
                   record("u2", RC.SERVICE_DOWN, host="c2"),
                   record("u1", RC.SERVICE_DOWN, host="c1")]
        self.assertEqual(
            [(Action.DELETE_SERVICE, "svc-c1"), (Action.DELETE_SERVICE, "svc-c2"),
             (Action.DELETE_COMPUTE_NODE, "u3")],
            [(a.action, a.target) for a in stale.plan_clear(records, hvs, {})])


class TestJudgeListing(testtools.TestCase):
    def test_only_ironic_records_count(self) -> None:
        nodes = [df.hv("a").facts, df.hv("b").facts,
                 df.hv("kvm-1", htype="QEMU").facts]
        verdict = stale.judge_listing(nodes, ["a"], 0.1)
        self.assertEqual((2, 1, 1, True), (verdict.known, verdict.missing,
                                           verdict.allowed, verdict.trusted))
        self.assertFalse(stale.judge_listing(nodes, [], 0.1).trusted)
        # A listing of nodes Nova does not know lacks every known one:
        # believed only where the operator allows every node to be missing.
        self.assertFalse(stale.judge_listing(nodes, ["x"], 0.5).trusted)
        self.assertTrue(stale.judge_listing(nodes, ["x"], 1.0).trusted)

    def test_default_is_the_options(self) -> None:
        self.assertEqual(0.1, stale.DEFAULT_MAX_MISSING_FRACTION)
