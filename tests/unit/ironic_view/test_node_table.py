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

"""The node table: facts in, the same facts out, nothing left to walk."""
import dataclasses
import datetime
import gc
import tracemalloc
from collections.abc import Iterator

import testtools

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import snapshot

NODE = "00000000-0000-4000-8000-000000000001"
OTHER = "00000000-0000-4000-8000-000000000002"


def every_field() -> decisions.IronicNodeFacts:
    return decisions.IronicNodeFacts(
        NODE, "clean failed", "power on", maintenance=True,
        maintenance_reason="bmc", retired=True, retired_reason="old",
        fault="clean failure", instance_uuid="inst", allocation_uuid="alloc",
        name="rack1-u7", traits=frozenset({"CUSTOM_B", "CUSTOM_A"}),
        resource_class="baremetal.gold")


class PackTest(testtools.TestCase):
    def test_every_field_comes_back(self) -> None:
        facts = every_field()
        back = node_table.unpack(NODE, node_table.pack(facts))
        self.assertEqual(facts, back)
        self.assertIsInstance(back.traits, frozenset)

    def test_the_defaults_come_back(self) -> None:
        facts = decisions.IronicNodeFacts(NODE, None)
        self.assertEqual(facts,
                         node_table.unpack(NODE, node_table.pack(facts)))

    def test_a_packed_node_is_dropped_by_the_collector(self) -> None:
        # The point of the table: after one look, a full collection of
        # the scheduler's heap no longer walks the node.
        packed = node_table.pack(every_field())
        gc.collect()
        self.assertFalse(gc.is_tracked(packed))
        self.assertTrue(gc.is_tracked(every_field()))

    def test_nodes_with_the_same_traits_share_them_both_ways(self) -> None:
        traits = frozenset({"CUSTOM_X", "CUSTOM_Y"})
        one = node_table.pack(decisions.IronicNodeFacts(
            NODE, "available", traits=traits))
        two = node_table.pack(decisions.IronicNodeFacts(
            OTHER, "active", traits=frozenset(traits)))
        self.assertIs(one[node_table.TRAITS_AT], two[node_table.TRAITS_AT])
        self.assertIs(node_table.unpack(NODE, one).traits,
                      node_table.unpack(OTHER, two).traits)


class VerdictTest(testtools.TestCase):
    """A packed node carries its verdict, the decision core's."""

    def test_the_verdict_is_the_decision_cores(self) -> None:
        base = decisions.IronicNodeFacts(NODE, "available", "power off")
        variants = [base, every_field(),
                    decisions.IronicNodeFacts(NODE, None)]
        variants += [dataclasses.replace(base, **change) for change in (
            {"provision_state": "clean wait"}, {"power_state": None},
            {"power_state": "error"}, {"power_state": "power on"},
            {"maintenance": True}, {"retired": True},
            {"fault": "power failure"}, {"instance_uuid": "inst"},
            {"allocation_uuid": "alloc"}, {"name": "n1"},
            {"traits": frozenset({"CUSTOM_A"})})]
        verdicts = [node_table.is_unusable(node_table.pack(facts))
                    for facts in variants]
        self.assertEqual([bool(decisions.baremetal_reasons(facts))
                          for facts in variants], verdicts)
        self.assertIn(True, verdicts)
        self.assertIn(False, verdicts)

    def test_a_table_names_its_unusable_nodes(self) -> None:
        table = node_table.NodeTable.of({
            NODE: every_field(),
            OTHER: decisions.IronicNodeFacts(OTHER, "available",
                                             "power off")})
        self.assertEqual({NODE}, table.unusable())

    def test_a_trait_key_from_elsewhere_is_shared(self) -> None:
        # A reader's batch brings its own copy of each trait string
        # (wire.py); the table keeps one.
        mine = node_table.pack(decisions.IronicNodeFacts(
            NODE, "available", traits=frozenset({"CUSTOM_Q", "CUSTOM_P"})))
        theirs = "".join(["CUSTOM_P\n", "CUSTOM_Q"])
        self.assertIsNot(mine[node_table.TRAITS_AT], theirs)
        self.assertIs(mine[node_table.TRAITS_AT],
                      node_table.shared_key(theirs))
        fresh = "".join(["CUSTOM_NEVER_SEEN_", "1"])
        self.assertIs(node_table.shared_key(fresh),
                      node_table.shared_key("CUSTOM_NEVER_SEEN_1"))
        self.assertEqual("", node_table.shared_key(""))


class NodeTableTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.facts = {NODE: every_field(),
                      OTHER: decisions.IronicNodeFacts(OTHER, "available")}
        self.table = node_table.NodeTable.of(self.facts)

    def test_a_mapping_of_the_same_facts(self) -> None:
        self.assertEqual(self.facts, self.table)
        self.assertEqual(self.facts[NODE], self.table[NODE])
        self.assertEqual(self.facts[NODE], self.table.get(NODE))
        self.assertIsNone(self.table.get("missing"))
        self.assertIn(OTHER, self.table)
        self.assertNotIn("missing", self.table)
        self.assertEqual({NODE, OTHER}, set(self.table))
        self.assertEqual({NODE, OTHER}, set(self.table.keys()))
        self.assertEqual(2, len(self.table))
        self.assertRaises(KeyError, self.table.__getitem__, "missing")

    def test_a_copy_changes_apart(self) -> None:
        copied = self.table.copy()
        copied.put(NODE, None)
        copied.put("new", node_table.pack(
            decisions.IronicNodeFacts("new", "enroll")))
        self.assertEqual(self.facts, self.table)
        self.assertEqual({OTHER, "new"}, set(copied))
        self.assertEqual("enroll", copied["new"].provision_state)

    def test_removing_a_node_it_lacks_is_no_error(self) -> None:
        self.table.put("missing", None)
        self.assertEqual(2, len(self.table))


class ListingTest(testtools.TestCase):
    """A refresh's listing, packed page by page."""

    WALL = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def test_the_same_snapshot_as_from_the_facts(self) -> None:
        broken = decisions.IronicNodeFacts(NODE, "available", "power on",
                                           maintenance=True)
        fine = decisions.IronicNodeFacts(OTHER, "available", "power on")
        listing = snapshot.Listing()
        listing.add([broken, fine])
        # A node listed again on a later page: the later read wins, and a
        # node repaired meanwhile leaves the unusable ones.
        listing.add([dataclasses.replace(broken, maintenance=False),
                     dataclasses.replace(fine, fault="power failure")])
        snap = listing.snapshot(1.0, 2.0, 3, self.WALL)
        expected = snapshot.Snapshot(
            {NODE: dataclasses.replace(broken, maintenance=False),
             OTHER: dataclasses.replace(fine, fault="power failure")},
            1.0, 2.0, 3, self.WALL)
        self.assertEqual(expected.nodes, snap.nodes)
        self.assertEqual({OTHER}, set(snap.unusable))
        self.assertEqual(decisions.baremetal_reasons(snap.nodes[OTHER]),
                         snap.unusable[OTHER])
        self.assertEqual((1.0, 2.0, 3, self.WALL),
                         (snap.started_at, snap.finished_at, snap.requests,
                          snap.started_wall))
        # Used up: a second snapshot shares nothing with the first.
        self.assertEqual(0, len(listing.snapshot(1.0, 2.0, 3,
                                                 self.WALL).nodes))

    def test_a_listing_never_holds_every_nodes_facts(self) -> None:
        # Pages come and go: at most one page of facts is alive beside the
        # table, where a dict of all the facts was as large again.
        count, size = 20000, 500

        def pages() -> Iterator[list[decisions.IronicNodeFacts]]:
            for start in range(0, count, size):
                yield [decisions.IronicNodeFacts(
                    f"{i:036d}", "available", "power on", name=f"n{i}")
                    for i in range(start, start + size)]

        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        listing = snapshot.Listing()
        for page in pages():
            listing.add(page)
        del page
        held, peak = tracemalloc.get_traced_memory()
        self.assertEqual(count, len(listing.table))
        self.assertLess(peak, 1.2 * held, (held, peak))
