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

"""The trait sync: the pure plan() and TraitSync.run against fakes."""
import datetime
from typing import Any

import testtools

from nova_drain_filters import decisions
from nova_drain_filters import stale
from nova_drain_filters import sync
from nova_drain_filters import traits
from nova_drain_filters.clients import http
from tests.unit import ironic_fakes

BM = traits.BAREMETAL_UNAVAILABLE
STALE = traits.STALE_NODE
IR, PL = sync.Target.IRONIC, sync.Target.PLACEMENT
ADD, REMOVE = sync.Action.ADD, sync.Action.REMOVE
NOW = datetime.datetime(2024, 5, 1, 12, 0, 0)
inode = ironic_fakes.ironic_node


def record(nodename: str, host: str = "c1", uuid: str | None = "",
           htype: str = "ironic", up: bool = True,
           age: int = 30) -> decisions.NodeFacts:
    """A compute record; for Ironic its uuid is the node's unless told."""
    return decisions.NodeFacts(
        host=host, nodename=nodename,
        uuid=nodename if uuid == "" else uuid, service_up=up,
        updated_at=NOW - datetime.timedelta(seconds=age),
        hypervisor_type=htype)


def by_uuid(*nodes: decisions.IronicNodeFacts
            ) -> dict[str, decisions.IronicNodeFacts]:
    return {n.uuid: n for n in nodes}


def short(changes: list[sync.Step]) -> list[tuple[Any, ...]]:
    return [(c.target, c.uuid, c.trait, c.action) for c in changes]


class TestPlan(testtools.TestCase):
    def test_without_ironic_only_duplicates(self) -> None:
        # No listing: no Ironic change, no node called missing, and a
        # trait an earlier run set on an Ironic record stays.
        nodes = [record("n1"), record("x", "c1", "x1", "QEMU"),
                 record("x", "c2", "x2", "QEMU")]
        changes = sync.plan(nodes, None, {STALE: {"n1"}, BM: {"n1"}})
        self.assertEqual([(PL, "x1", STALE, ADD)], short(changes))

    def test_unavailable_node_gets_the_trait_on_both(self) -> None:
        changes = sync.plan([record("n1")], by_uuid(
            inode("n1", provision_state="clean wait")), {})
        self.assertEqual([(IR, "n1", BM, ADD), (PL, "n1", BM, ADD)],
                         short(changes))
        for change in changes:
            self.assertEqual("baremetal: provision_state=clean wait",
                             change.why)

    def test_trait_only_on_one_side_is_added_on_the_other(self) -> None:
        clean = inode("n1", provision_state="clean wait")
        self.assertEqual([(PL, "n1", BM, ADD)], short(sync.plan(
            [record("n1")], by_uuid(inode("n1", provision_state="clean wait",
                                          traits=frozenset({BM}))), {})))
        self.assertEqual([(IR, "n1", BM, ADD)], short(sync.plan(
            [record("n1")], by_uuid(clean), {BM: {"n1"}})))

    def test_available_node_loses_the_trait_on_both(self) -> None:
        changes = sync.plan([record("n1")], by_uuid(
            inode("n1", traits=frozenset({BM, "CUSTOM_OTHER"}))),
            {BM: {"n1"}})
        self.assertEqual([(IR, "n1", BM, REMOVE), (PL, "n1", BM, REMOVE)],
                         short(changes))
        self.assertEqual(["usable again"] * 2, [c.why for c in changes])

    def test_nothing_to_do(self) -> None:
        nodes = by_uuid(inode("ok"), inode("busy", instance_uuid="i1",
                                           traits=frozenset({BM})))
        records = [record("ok"), record("busy"),
                   record("kvm1", htype="QEMU")]
        self.assertEqual([], sync.plan(records, nodes, {BM: {"busy"}}))
        self.assertEqual([], sync.plan([], {}, {}))

    def test_duplicate_records(self) -> None:
        keeper = record("n1", host="c1", age=10)
        loser = record("n1", host="c2", uuid="old-rp", up=False, age=5)
        changes = sync.plan([loser, keeper], by_uuid(inode("n1")), {})
        self.assertEqual([(PL, "old-rp", STALE, ADD)], short(changes))
        self.assertEqual("duplicate compute node: n1 is also on host c1 (n1)",
                         changes[0].why)
        # Already marked: nothing; the keeper carrying it loses it.
        self.assertEqual([(PL, "n1", STALE, REMOVE)], short(sync.plan(
            [loser, keeper], by_uuid(inode("n1")),
            {STALE: {"old-rp", "n1"}})))

    def test_duplicates_never_touch_ironic(self) -> None:
        keeper = record("n1", host="c1")
        loser = record("n1", host="c2", uuid="old-rp", up=False)
        changes = sync.plan([keeper, loser], by_uuid(
            inode("n1", maintenance=True)), {})
        self.assertEqual([(IR, "n1", BM, ADD)],
                         short([c for c in changes if c.target is IR]))
        for change in changes:
            if change.trait == STALE:
                self.assertEqual((PL, "old-rp"), (change.target, change.uuid))

    def test_node_missing_from_ironic(self) -> None:
        changes = sync.plan([record("gone"), record("n1")],
                            by_uuid(inode("n1")), {})
        self.assertEqual([(PL, "gone", STALE, ADD)], short(changes))
        self.assertEqual("node missing from Ironic: gone", changes[0].why)
        self.assertEqual([], sync.plan([record("gone")], {},
                                       {STALE: {"gone"}}))

    def test_node_back_in_ironic(self) -> None:
        changes = sync.plan([record("n1")], by_uuid(
            inode("n1", provision_state="manageable")), {STALE: {"n1"}})
        self.assertEqual(
            [(IR, "n1", BM, ADD), (PL, "n1", STALE, REMOVE), (PL, "n1", BM, ADD)],
            short(changes))

    def test_non_ironic_records_never_get_the_baremetal_trait(self) -> None:
        # Even one whose nodename matches an unavailable Ironic node.
        records = [record("n1", host="kvm1", uuid="kvm-rp", htype="QEMU"),
                   record("kvm2", uuid="kvm2-rp", htype="QEMU"),
                   record("vm3", uuid="vm3-rp", htype=None)]  # type: ignore
        changes = sync.plan(records, by_uuid(inode("n1", fault="x")), {})
        self.assertEqual([(IR, "n1", BM, ADD)], short(changes))

    def test_non_ironic_duplicates_are_stale(self) -> None:
        records = [record("kvm1", host="a", uuid="rp-a", htype="QEMU"),
                   record("kvm1", host="b", uuid="rp-b", htype="QEMU",
                          up=False)]
        self.assertEqual([(PL, "rp-b", STALE, ADD)],
                         short(sync.plan(records, {}, {})))

    def test_records_without_uuid_are_skipped(self) -> None:
        records = [record("gone", uuid=None),
                   record("n1", host="c2", uuid=None, up=False),
                   record("n1", host="c1")]
        nodes = by_uuid(inode("n1", provision_state="clean wait"))
        self.assertEqual([(IR, "n1", BM, ADD), (PL, "n1", BM, ADD)],
                         short(sync.plan(records, nodes, {})))

    def test_ironic_nodes_unknown_to_nova(self) -> None:
        nodes = by_uuid(inode("new", provision_state="enroll"),
                        inode("back", traits=frozenset({BM})))
        self.assertEqual([(IR, "back", BM, REMOVE), (IR, "new", BM, ADD)],
                         short(sync.plan([], nodes, {BM: {"back"}})))


class SyncTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.log: list[tuple[Any, ...]] = []
        self.records = [record("clean"), record("free"), record("gone"),
                        record("maint"),
                        record("kvm", uuid="kvm-rp", htype="QEMU")]
        self.ironic = ironic_fakes.FakeSyncIronic(self.log, [
            inode("clean", provision_state="clean wait"),
            inode("free", traits=frozenset({BM})),
            inode("maint", maintenance=True)])
        self.ironic.hook = lambda: self.log.append(("ironic.list_nodes",))
        self.placement = ironic_fakes.FakeSyncPlacement(
            self.log, {BM: {"free"}, STALE: {"clean"}})
        self.sleeps: list[float] = []
        self.sync = sync.TraitSync(self.list_records, self.ironic,
                                   self.placement, page_size=250,
                                   sleep=self.sleeps.append)

    def list_records(self) -> list[decisions.NodeFacts]:
        self.log.append(("nova.list",))
        return self.records

    def calls(self, prefix: str) -> list[tuple[Any, ...]]:
        return [c for c in self.log if c[0].startswith(prefix)]

    def writes(self) -> list[tuple[Any, ...]]:
        return [c for c in self.log if c[0].startswith(
            ("ironic.add", "ironic.remove", "placement.update"))]


class TestRun(SyncTestCase):
    def test_gather_order(self) -> None:
        self.sync.gather()
        self.assertEqual(
            [("nova.list",), ("ironic.list_nodes",),
             ("placement.ensure_trait", STALE),
             ("placement.ensure_trait", BM),
             ("placement.get", f"/resource_providers?required={STALE}",
              "1.18"),
             ("placement.get", f"/resource_providers?required={BM}", "1.18")],
            self.log)
        self.assertEqual([250], self.ironic.page_sizes)

    def test_dry_run_writes_nothing(self) -> None:
        result = self.sync.run(dry_run=True)
        self.assertEqual([], self.writes())
        nodes, ironic_nodes, have = self.sync.gather()
        self.assertEqual(sync.plan(nodes, ironic_nodes, have), result.changes)
        self.assertEqual(8, len(result.changes))
        self.assertEqual((5, 3), (result.nodes, result.ironic_nodes))
        # Ironic list, one existing_traits look-up, two required= queries.
        self.assertEqual(4, result.requests)
        self.assertTrue(result.ok)

    def test_exclusions_first_then_ironic_then_clears(self) -> None:
        # Placement gains the traits that keep nodes out first, Ironic
        # follows so the driver's periodic keeps them, and a trait the
        # node carries leaves placement only after it left the node.
        result = self.sync.run()
        self.assertEqual(
            [("placement.update", "clean", {BM}, {STALE}),
             ("placement.update", "gone", {STALE}, set()),
             ("placement.update", "maint", {BM}, set()),
             ("ironic.add_trait", "clean", BM),
             ("ironic.remove_trait", "free", BM),
             ("ironic.add_trait", "maint", BM),
             ("placement.update", "free", set(), {BM})],
            self.writes())
        self.assertEqual(8, len(result.changes))
        self.assertTrue(result.ok)
        self.assertEqual(1 + 4 + 3 + 2 * 4, result.requests)

    def test_requests_counted_from_the_start_of_the_run(self) -> None:
        self.ironic.requests = 100
        self.placement.requests = 7
        self.assertEqual(16, self.sync.run().requests)
        self.assertEqual(4, self.sync.run(dry_run=True).requests)

    def test_second_run_after_success_is_idempotent(self) -> None:
        self.records = [record("free")]
        self.ironic.nodes = [inode("free")]
        self.placement.carriers = {}
        result = self.sync.run()
        self.assertEqual(([], []), (result.changes, self.writes()))

    def test_failures_collected_and_the_rest_applied(self) -> None:
        self.ironic.failures[("clean", BM)] = [
            ironic_fakes.api_error(400, "conductor down")]
        self.placement.failures["gone"] = ironic_fakes.api_error(
            404, "no such provider", "placement")
        result = self.sync.run()
        self.assertFalse(result.ok)
        failed = sorted((f.step.target, f.step.uuid, f.step.trait)
                        for f in result.failures)
        self.assertEqual([(IR, "clean", BM), (PL, "gone", STALE)], failed)
        (ironic_failure,) = [f for f in result.failures
                             if f.step.target is IR]
        self.assertIn("conductor down", ironic_failure.error)
        self.assertEqual(4, len(self.calls("placement.update")))
        self.assertEqual(3, len(self.calls("ironic.")) - 1)
        # clean is kept out by placement at once, though Ironic refused
        # its trait: the next pass writes the node's.
        self.assertEqual(6, len(result.changes))
        self.assertIn(("placement", "clean", BM),
                      [(c.target, c.uuid, c.trait) for c in result.changes])
        self.assertNotIn("gone", [c.uuid for c in result.changes])

    def test_failed_provider_reports_each_of_its_changes(self) -> None:
        self.placement.failures["clean"] = ironic_fakes.api_error(
            409, "generation kept changing", "placement")
        result = self.sync.run()
        self.assertEqual({(STALE, REMOVE), (BM, ADD)},
                         {(f.step.trait, f.step.action)
                          for f in result.failures})

    def test_ironic_lock_retried(self) -> None:
        locked = [ironic_fakes.api_error(409, "locked")
                  for _ in range(sync.IRONIC_LOCK_RETRIES)]
        self.ironic.failures[("maint", BM)] = locked
        result = self.sync.run()
        self.assertTrue(result.ok)
        self.assertEqual(sync.IRONIC_LOCK_RETRIES + 1,
                         self.log.count(("ironic.add_trait", "maint", BM)))
        self.assertEqual([sync.IRONIC_LOCK_WAIT * n for n in (1, 2, 3)],
                         self.sleeps)

    def test_ironic_lock_gives_up(self) -> None:
        self.ironic.failures[("free", BM)] = [
            ironic_fakes.api_error(409, "locked") for _ in range(10)]
        result = self.sync.run()
        self.assertEqual(["free"], [f.step.uuid for f in result.failures])
        self.assertIn("HTTP 409: locked", result.failures[0].error)
        self.assertEqual(sync.IRONIC_LOCK_RETRIES + 1,
                         self.log.count(("ironic.remove_trait", "free", BM)))
        self.assertEqual(sync.IRONIC_LOCK_RETRIES, len(self.sleeps))
        self.assertIn(("ironic.add_trait", "maint", BM), self.log)

    def test_transient_ironic_errors_retried(self) -> None:
        # "database is locked" (500) or an API restarting (503): a trait
        # write is idempotent, so it is sent again.
        for status in (500, 503):
            self.log.clear()
            del self.sleeps[:]
            self.ironic.failures[("maint", BM)] = [
                ironic_fakes.api_error(status, "database is locked")]
            result = self.sync.run()
            self.assertTrue(result.ok, status)
            self.assertEqual(2, self.log.count(("ironic.add_trait", "maint",
                                                BM)), status)
            self.assertEqual([sync.IRONIC_LOCK_WAIT], self.sleeps)

    def test_other_ironic_errors_not_retried(self) -> None:
        for status in (None, 400, 404):
            self.log.clear()
            self.ironic.failures[("clean", BM)] = [
                ironic_fakes.api_error(status)]
            result = self.sync.run()
            self.assertEqual(1, len(result.failures), status)
            self.assertEqual(1, self.log.count(("ironic.add_trait", "clean",
                                                BM)))
        self.assertEqual([], self.sleeps)

    def test_gather_failure_raises_before_any_write(self) -> None:
        self.ironic.error = http.ApiError("ironic", "GET", "/v1/nodes", 503,
                                          "down")
        self.assertRaises(http.ApiError, self.sync.run)
        self.assertEqual([], self.writes())
        self.assertEqual([], self.calls("placement."))

    def test_untrusted_listing_raises_before_placement(self) -> None:
        # The token sees one of the four Ironic nodes Nova knows.
        self.ironic.nodes = self.ironic.nodes[:1]
        exc = self.assertRaises(stale.UntrustedListing, self.sync.run)
        self.assertEqual((4, 3, 1), (exc.verdict.known, exc.verdict.missing,
                                     exc.verdict.allowed))
        self.assertEqual([], self.calls("placement."))
        self.assertEqual([], self.writes())
        self.assertRaises(stale.UntrustedListing, self.sync.run, dry_run=True)

    def test_missing_fraction_is_the_engines_to_set(self) -> None:
        self.ironic.nodes = self.ironic.nodes[:1]
        self.sync.max_missing_fraction = 0.75
        result = self.sync.run(dry_run=True)
        self.assertEqual(3, [(c.trait, c.action) for c in result.changes
                             ].count((STALE, ADD)))

    def test_without_ironic(self) -> None:
        self.sync.ironic = None
        self.records.append(record("kvm", host="c2", uuid="kvm-dup",
                                   htype="QEMU"))
        result = self.sync.run()
        self.assertEqual((6, None), (result.nodes, result.ironic_nodes))
        self.assertEqual([(PL, "kvm-rp", STALE, ADD)], short(result.changes))
        self.assertEqual([], self.calls("ironic."))


class TestBackoff(testtools.TestCase):
    def test_doubles_per_failure_up_to_the_cap(self) -> None:
        self.assertEqual([30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0],
                         [sync.backoff(30, n) for n in range(7)])

    def test_interval_above_the_cap_is_kept(self) -> None:
        self.assertEqual(3600.0, sync.backoff(3600, 5))

    def test_many_failures_do_not_overflow(self) -> None:
        self.assertEqual(900.0, sync.backoff(86400 // 100, 10 ** 9))
