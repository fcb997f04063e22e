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

"""Orphaned allocations: find_orphans' truth table, gather and clear_consumer."""
import threading
from typing import Any

import testtools

from nova_drain_filters import decisions
from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from tests.unit import drain_fakes as df

Outcome, Keep = orphan_clear.Outcome, orphan_clear.Keep

RC = decisions.ReasonCode
N1 = df.hv("rp-n1", "n1", host="c1")
N2 = df.hv("rp-n2", "n2", host="c2")
NODES = {N1.uuid: N1, N2.uuid: N2}
ROOTS = {"rp-n1": "rp-n1", "rp-n2": "rp-n2", "rp-gpu": "rp-n1",
         "rp-shared": "rp-shared"}
PROVIDERS = [{"uuid": rp, "root_provider_uuid": root, "name": f"name-{rp}"}
             for rp, root in ROOTS.items()]
TREES = orphans.nova_trees(PROVIDERS, NODES, ())


def judge(consumer: str, rp: str = "rp-n1", servers: Any = (),
          migrations: Any = (),
          resources: Any = None) -> list[orphans.Orphan]:
    allocations = {rp: {consumer: resources or {"VCPU": 1}}}
    return orphans.find_orphans(allocations, TREES, servers, migrations)


class TestFindOrphans(testtools.TestCase):
    def test_migration_consumer_is_live(self) -> None:
        self.assertEqual([], judge("mig-1", migrations=[
            df.migration("mig-1", "inst-1")]))

    def test_migrating_instance_is_live_anywhere(self) -> None:
        self.assertEqual([], judge("inst-1", servers=[
            df.server("inst-1", node="n2", host="c2")], migrations=[
            df.migration("mig-1", "inst-1")]))

    def test_instance_on_this_node_is_live(self) -> None:
        self.assertEqual([], judge("inst-1", servers=[df.server("inst-1")]))

    def test_instance_without_node_is_live(self) -> None:
        self.assertEqual([], judge("inst-1", servers=[
            df.server("inst-1", node=None, host=None, status="BUILD")]))

    def test_instance_elsewhere_is_orphan(self) -> None:
        found = judge("inst-1", servers=[df.server("inst-1", "n2", "c2")])
        self.assertEqual([orphans.Orphan(
            "inst-1", "rp-n1", "c1", "n1", {"VCPU": 1},
            decisions.Reason(RC.INSTANCE_ELSEWHERE, "on host c2 node n2"))],
            found)
        self.assertEqual("instance lives elsewhere: on host c2 node n2",
                         str(found[0].reason))
        self.assertIsNone(found[0].project)

    def test_consumer_missing_is_orphan(self) -> None:
        found = judge("gone", rp="rp-n2")
        self.assertEqual([("gone", "rp-n2", "c2", "n2", RC.CONSUMER_MISSING)],
                         [(o.consumer, o.provider, o.host, o.node,
                           o.reason.code) for o in found])

    def test_provider_outside_compute_trees_is_skipped(self) -> None:
        self.assertEqual([], judge("gone", rp="rp-shared"))
        self.assertEqual([], judge("gone", rp="rp-unknown"))

    def test_child_provider_judged_by_its_roots_node(self) -> None:
        self.assertEqual([], judge("inst-1", rp="rp-gpu", servers=[
            df.server("inst-1", "n1", "c1")]))
        found = judge("inst-1", rp="rp-gpu", servers=[
            df.server("inst-1", "n2", "c2")])
        self.assertEqual([("rp-gpu", "c1", "n1")],
                         [(o.provider, o.host, o.node) for o in found])

    def test_custom_resource_classes_kept(self) -> None:
        found = judge("gone", resources={
            "CUSTOM_BAREMETAL_GOLD": 1, "VCPU": 0, "MEMORY_MB": 512})
        self.assertEqual({"CUSTOM_BAREMETAL_GOLD": 1, "VCPU": 0,
                          "MEMORY_MB": 512}, dict(found[0].resources))
        self.assertEqual("CUSTOM_BAREMETAL_GOLD=1,MEMORY_MB=512,VCPU=0",
                         found[0].resources_text)

    def test_moving_statuses_are_live_elsewhere(self) -> None:
        self.assertEqual({"MIGRATING", "RESIZE", "VERIFY_RESIZE",
                          "REVERT_RESIZE", "REBUILD"}, set(orphan_clear.MOVING))
        for status in sorted(orphan_clear.MOVING):
            self.assertEqual([], judge("inst-1", servers=[
                df.server("inst-1", "n2", "c2", status=status)]), status)
        self.assertEqual(1, len(judge("inst-1", servers=[
            df.server("inst-1", "n2", "c2", status="SHUTOFF")])))

    def test_sorted_by_provider_then_consumer(self) -> None:
        allocations = {"rp-n2": {"b": {}, "a": {}}, "rp-n1": {"z": {}}}
        found = orphans.find_orphans(allocations, TREES, [], [])
        self.assertEqual([("rp-n1", "z"), ("rp-n2", "a"), ("rp-n2", "b")],
                         [(o.provider, o.consumer) for o in found])

    def test_reason_for_without_node(self) -> None:
        # ClearStale asks with node None: an instance with a node is elsewhere.
        reason = orphan_clear.reason_for(df.server("i", "n2", "c2"), None)
        self.assertEqual(RC.INSTANCE_ELSEWHERE, reason.code)


class TestNovaTrees(testtools.TestCase):
    """Which providers are Nova's, and which node each belongs to."""

    PROVIDERS = [
        {"uuid": "rp-n1", "root_provider_uuid": "rp-n1", "name": "n1"},
        {"uuid": "rp-gpu", "root_provider_uuid": "rp-n1", "name": "gpu"},
        {"uuid": "rp-gone", "root_provider_uuid": "rp-gone", "name": "bm-7"},
        {"uuid": "rp-gone-nic", "root_provider_uuid": "rp-gone",
         "name": "bm-7:nic"},
        {"uuid": "rp-shared", "root_provider_uuid": "rp-shared",
         "name": "ceph"},
    ]

    def trees(self, marked: Any = ("rp-n1", "rp-gone")) -> Any:
        return orphans.nova_trees(self.PROVIDERS, {N1.uuid: N1}, marked)

    def test_recorded_marked_and_other_roots(self) -> None:
        self.assertEqual({
            "rp-n1": orphans.NovaTree("rp-n1", "c1", "n1"),
            "rp-gpu": orphans.NovaTree("rp-n1", "c1", "n1"),
            "rp-gone": orphans.NovaTree("rp-gone", "", "bm-7", False),
            "rp-gone-nic": orphans.NovaTree("rp-gone", "", "bm-7", False),
        }, self.trees())

    def test_only_the_roots_mark_counts(self) -> None:
        # A child carrying COMPUTE_NODE does not make a foreign root Nova's.
        self.assertEqual({"rp-n1", "rp-gpu"},
                         set(self.trees(marked=("rp-gone-nic",))))

    def test_a_record_needs_no_mark(self) -> None:
        self.assertEqual({"rp-n1", "rp-gpu"}, set(self.trees(marked=())))

    def test_roots_without_record(self) -> None:
        self.assertEqual({"rp-gone", "rp-shared"}, orphans.roots_without_record(
            self.PROVIDERS, {N1.uuid: N1}))
        self.assertEqual({"solo"}, orphans.roots_without_record(
            [{"uuid": "solo"}], {}))

    def test_judged_against_the_root_providers_name(self) -> None:
        trees = self.trees()
        allocations = {"rp-gone": {"gone": {"CUSTOM_BAREMETAL_GOLD": 1},
                                   "still-there": {"VCPU": 1},
                                   "moved": {"VCPU": 1}},
                       "rp-shared": {"other": {"DISK_GB": 1}}}
        found = orphans.find_orphans(allocations, trees, [
            df.server("still-there", "bm-7", "c9"),
            df.server("moved", "n1", "c1")], [])
        self.assertEqual(
            [("gone", "rp-gone", "", "bm-7", RC.CONSUMER_MISSING),
             ("moved", "rp-gone", "", "bm-7", RC.INSTANCE_ELSEWHERE)],
            [(o.consumer, o.provider, o.host, o.node, o.reason.code)
             for o in found])


class TestReadAndGather(testtools.TestCase):
    def test_read_allocations_reports_progress_and_returns_all(self) -> None:
        rps = [f"rp-{i}" for i in range(20)]
        client = df.FakeAllocations(allocations={
            rp: {f"c-{rp}": {"VCPU": 1}} for rp in rps})
        seen: list[tuple[int, int]] = []
        lock = threading.Lock()

        def progress(done: int, total: int) -> None:
            with lock:
                seen.append((done, total))

        found = orphans.read_allocations(client, rps, progress)
        self.assertEqual({rp: {f"c-{rp}": {"VCPU": 1}} for rp in rps}, found)
        self.assertEqual([(i, 20) for i in range(1, 21)], seen)
        self.assertEqual(sorted(rps), sorted(
            c[0] for c in client.called("provider_allocations")))

    def test_read_allocations_error_propagates(self) -> None:
        client = df.FakeAllocations()
        client.errors["provider_allocations"] = RuntimeError("boom")
        self.assertRaises(RuntimeError, orphans.read_allocations, client,
                          ["rp-1"])

    def test_gather_reads_compute_trees_and_orphans_projects(self) -> None:
        compute = df.FakeNova(hypervisors=[N1, N2], servers=[
            df.server("here", "n1"), df.server("else", "n2", "c2",
                                               project="p-else")])
        client = df.FakeAllocations(
            providers=ROOTS,
            allocations={"rp-n1": {"here": {"VCPU": 1}, "else": {"VCPU": 1},
                                   "gone": {"VCPU": 1}},
                         "rp-gpu": {"gone": {"VGPU": 1}},
                         "rp-shared": {"other": {"DISK_GB": 1}}},
            consumers={"gone": df.consumer({}, project="p-gone"),
                       "else": df.consumer({}, project="p-else")})
        found = orphans.gather(compute, client)
        self.assertEqual(
            [("else", "rp-n1", "p-else"), ("gone", "rp-gpu", "p-gone"),
             ("gone", "rp-n1", "p-gone")],
            sorted((o.consumer, o.provider, o.project) for o in found))
        self.assertEqual(["rp-gpu", "rp-n1", "rp-n2"], sorted(
            c[0] for c in client.called("provider_allocations")))
        # The instance elsewhere names its project; only the consumer
        # Nova no longer knows is read.
        self.assertEqual(["gone"], sorted(
            c[0] for c in client.called("consumer_allocations")))

    def test_gather_refuses_nova_records_that_lack_the_compute_roots(
            self) -> None:
        # An empty or foreign Nova view (nova.conf of another cloud, an
        # unmapped cell): every compute root lacks a record, and every
        # allocation would look orphaned. Nothing is read or judged.
        roots = {f"rp-{i}": f"rp-{i}" for i in range(10)}
        client = df.FakeAllocations(
            providers=roots, compute=roots,
            allocations={rp: {"c": {"VCPU": 1}} for rp in roots})
        for nova in (df.FakeNova(hypervisors=[], servers=[]),
                     df.FakeNova(hypervisors=[N1, N2], servers=[])):
            exc = self.assertRaises(orphans.NovaViewIncomplete,
                                    orphans.gather, nova, client)
            self.assertEqual(10, exc.verdict.missing)
            self.assertEqual([], client.called("provider_allocations"))
        self.assertIn("Nova's list of compute node records lacks 10 of the "
                      "10 compute node providers", str(exc))

    def test_gather_believes_a_record_or_two_gone(self) -> None:
        # 1 of 10 roots without a record is within 0.1: judged (issue 8
        # section 1: a node deleted while its provider held an allocation).
        roots = {f"rp-{i}": f"rp-{i}" for i in range(10)}
        nodes = [df.hv(rp, f"n{i}", host="c1") for i, rp in
                 enumerate(sorted(roots)) if rp != "rp-0"]
        client = df.FakeAllocations(providers=roots, compute=roots,
                                    allocations={"rp-0": {"c": {"VCPU": 1}}})
        found = orphans.gather(df.FakeNova(hypervisors=nodes, servers=[]),
                               client)
        self.assertEqual([("c", "rp-0")],
                         [(o.consumer, o.provider) for o in found])
        self.assertRaises(orphans.NovaViewIncomplete, orphans.gather,
                          df.FakeNova(hypervisors=nodes[1:], servers=[]),
                          client, max_missing_fraction=0.1)

    def test_gather_takes_deleted_instances_projects_from_nova(self) -> None:
        compute = df.FakeNova(hypervisors=[N1, N2], servers=[])
        client = df.FakeAllocations(
            providers=ROOTS,
            allocations={"rp-n1": {"gone": {"VCPU": 1}, "archived": {"VCPU": 1}}},
            consumers={"gone": df.consumer({}, project="p-placement"),
                       "archived": df.consumer({}, project="p-archived")})
        asked: list[set[str]] = []

        def deleted_projects(uuids: Any) -> dict[str, str]:
            asked.append(set(uuids))
            return {"gone": "p-gone"}  # 'archived' has no row any more
        found = orphans.gather(compute, client, None, deleted_projects)
        self.assertEqual([{"gone", "archived"}], asked)
        self.assertEqual({("gone", "p-gone"), ("archived", "p-archived")},
                         {(o.consumer, o.project) for o in found})
        self.assertEqual([("archived",)], client.called("consumer_allocations"))


class TestGatherNovaTrees(testtools.TestCase):
    def test_no_trait_query_when_every_root_has_a_record(self) -> None:
        compute = df.FakeNova(hypervisors=[N1, N2])
        client = df.FakeAllocations(
            providers={"rp-n1": "rp-n1", "rp-n2": "rp-n2", "rp-gpu": "rp-n1"})
        self.assertEqual([], orphans.gather(compute, client))
        self.assertEqual([(None,)], client.called("providers"))

    def test_provider_whose_node_record_is_gone(self) -> None:
        compute = df.FakeNova(hypervisors=[N1])
        client = df.FakeAllocations(
            providers={"rp-n1": "rp-n1", "rp-gone": "rp-gone",
                       "rp-shared": "rp-shared"},
            compute={"rp-n1", "rp-gone"}, names={"rp-gone": "bm-7"},
            allocations={"rp-gone": {"gone": {"CUSTOM_BAREMETAL_GOLD": 1}},
                         "rp-shared": {"x": {"DISK_GB": 1}}},
            consumers={"gone": df.consumer({}, project="p")})
        found = orphans.gather(compute, client)
        self.assertEqual([("gone", "rp-gone", "", "bm-7", "p")],
                         [(o.consumer, o.provider, o.host, o.node, o.project)
                          for o in found])
        self.assertEqual([(None,), ("COMPUTE_NODE",)],
                         client.called("providers"))
        self.assertEqual(["rp-gone", "rp-n1"], sorted(
            c[0] for c in client.called("provider_allocations")))


class TestClearConsumer(testtools.TestCase):
    def clear(self, server: Any = None, current: Any = None,
              drop: Any = None, dry_run: bool = False) -> orphan_clear.ClearOutcome:
        self.nova = df.FakeNova(servers=[server] if server else [])
        self.placement = df.FakeAllocations(
            consumers={"inst": current} if current is not None else {})
        return orphan_clear.clear_consumer(self.nova, self.placement, "inst",
                                      drop or {"rp-n1": "n1"}, dry_run)

    def test_instance_reappeared_on_the_node_is_skipped(self) -> None:
        outcome = self.clear(df.server("inst", "n1"), df.consumer(
            {"rp-n1": {"VCPU": 1}}))
        self.assertEqual(orphan_clear.ClearOutcome(
            "inst", ("rp-n1",), Outcome.SKIPPED,
            orphan_clear.Kept(Keep.ON_NODE, "n1")), outcome)
        self.assertEqual([], self.placement.calls)

    def test_migration_consumer_is_skipped(self) -> None:
        outcome = self.clear(current=df.consumer(
            {"rp-n1": {"VCPU": 1}}, consumer_type="MIGRATION"))
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.MIGRATION)),
            (outcome.result, outcome.kept))
        self.assertEqual([], self.placement.writes)

    def test_partial_drop_rewrites_the_rest(self) -> None:
        current = df.consumer({"rp-n1": {"VCPU": 1}, "rp-n2": {"VCPU": 2},
                               "rp-gpu": {"VGPU": 1}}, generation=7)
        outcome = self.clear(df.server("inst", "n2", "c2"), current,
                             drop={"rp-n1": "n1", "rp-gpu": "n1"})
        self.assertEqual(orphan_clear.ClearOutcome(
            "inst", ("rp-gpu", "rp-n1"), Outcome.REWRITTEN, others=1),
            outcome)
        [(_, uuid, keep, sent)] = self.placement.writes
        self.assertEqual(("inst", {"rp-n2": current["allocations"]["rp-n2"]}),
                         (uuid, keep))
        self.assertEqual(7, sent["consumer_generation"])

    def test_dropping_everything_deletes(self) -> None:
        outcome = self.clear(current=df.consumer({"rp-n1": {"VCPU": 1}}))
        self.assertEqual(Outcome.DELETED, outcome.result)
        self.assertEqual([("delete_consumer_allocations", "inst")],
                         self.placement.writes)

    def test_already_gone(self) -> None:
        outcome = self.clear(current=df.consumer({"rp-n2": {"VCPU": 1}}))
        self.assertEqual(Outcome.ALREADY_GONE, outcome.result)
        self.assertEqual([], self.placement.writes)
        self.assertEqual(Outcome.ALREADY_GONE, self.clear().result)

    def test_dry_run_writes_nothing(self) -> None:
        rewrite = self.clear(current=df.consumer(
            {"rp-n1": {"VCPU": 1}, "rp-n2": {"VCPU": 1}}), dry_run=True)
        self.assertEqual(Outcome.WOULD_REWRITE, rewrite.result)
        self.assertEqual([], self.placement.writes)
        delete = self.clear(current=df.consumer({"rp-n1": {"VCPU": 1}}),
                            dry_run=True)
        self.assertEqual(Outcome.WOULD_DELETE, delete.result)
        self.assertEqual([], self.placement.writes)

    def test_without_a_node_an_existing_instance_is_never_cleared(
            self) -> None:
        # The blind re-check took an instance that had just landed on the
        # provider's node for "lives elsewhere" and dropped its allocation.
        for node in ("n1", "n2"):
            outcome = self.clear(df.server("inst", node, "c2"),
                                 df.consumer({"rp-n1": {"VCPU": 1}}),
                                 drop={"rp-n1": None})
            self.assertEqual(orphan_clear.ClearOutcome(
                "inst", ("rp-n1",), Outcome.SKIPPED,
                orphan_clear.Kept(Keep.NODE_UNKNOWN, "rp-n1")), outcome)
            self.assertEqual([], self.placement.calls)

    def test_without_a_node_a_missing_consumer_is_cleared(self) -> None:
        outcome = self.clear(None, df.consumer({"rp-n1": {"VCPU": 1}}),
                             drop={"rp-n1": None})
        self.assertEqual(Outcome.DELETED, outcome.result)
        self.assertEqual([("inst",)], self.nova.called("server"))

    def test_instance_without_a_node_yet_is_skipped(self) -> None:
        outcome = self.clear(df.server("inst", None, None, "BUILD"),
                             df.consumer({"rp-n1": {"VCPU": 1}}))
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.NO_NODE_YET)),
            (outcome.result, outcome.kept))
        self.assertEqual([], self.placement.calls)

    def test_moving_instance_is_skipped(self) -> None:
        outcome = self.clear(df.server("inst", "n2", "c2", "RESIZE"),
                             df.consumer({"rp-n1": {"VCPU": 1}}))
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.MOVING, "RESIZE")),
            (outcome.result, outcome.kept))
