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

"""clear_consumer against another writer: every 409 is re-read and re-judged."""
from collections.abc import Callable
from typing import Any

import testtools

from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from nova_drain_filters.clients import http
from tests.unit import drain_fakes as df

#: What another writer does to the fake placement before it answers 409.
Outcome, Keep = orphan_clear.Outcome, orphan_clear.Keep
Race = Callable[["RacedPlacement"], None]


class RacedPlacement(df.FakeAllocations):
    """Each write first lets the next race change the consumer, then
    answers 409, as placement does when the generation moved on."""

    def __init__(self, current: dict[str, Any], races: list[Race]) -> None:
        super().__init__(consumers={"inst": current})
        self.races = list(races)

    def replace_consumer_allocations(self, uuid: str, allocations: Any,
                                     current: dict[str, Any]) -> None:
        super().replace_consumer_allocations(uuid, allocations, current)
        self._race()

    def delete_consumer_allocations(self, uuid: str,
                                    current: dict[str, Any]) -> None:
        super().delete_consumer_allocations(uuid, current)
        self._race()

    def _race(self) -> None:
        if self.races:
            self.races.pop(0)(self)
            raise http.Conflict("placement", "PUT", "/allocations/inst", 409,
                                "consumer generation conflict")


def writes(allocations: dict[str, dict[str, int]], generation: int) -> Race:
    """Another writer sets the consumer's allocations (none: removes it)."""
    def race(placement: RacedPlacement) -> None:
        placement.consumers["inst"] = (
            df.consumer(allocations, generation=generation) if allocations
            else {"allocations": {}})
    return race


def nothing(placement: RacedPlacement) -> None:
    """A 409 while nobody wrote the consumer (inventory, say)."""


class TestConflicts(testtools.TestCase):
    def clear(self, races: list[Race], current: Any = None,
              server: Any = None) -> orphan_clear.ClearOutcome:
        self.nova = df.FakeNova(servers=[server] if server else [])
        self.placement = RacedPlacement(
            current or df.consumer({"rp-n1": {"VCPU": 1}}, generation=1),
            races)
        return orphan_clear.clear_consumer(self.nova, self.placement, "inst",
                                           {"rp-n1": "n1"})

    def test_removed_by_another_run_meanwhile_is_already_gone(self) -> None:
        outcome = self.clear([writes({}, 0)])
        self.assertEqual(orphan_clear.ClearOutcome(
            "inst", ("rp-n1",), Outcome.ALREADY_GONE, None, 1), outcome)
        self.assertEqual([1], self.placement.generations)

    def test_writer_added_elsewhere_keeps_it(self) -> None:
        # The orphaned part is as it was judged: it goes, and what the
        # writer added stays, written with the generation read after.
        outcome = self.clear([writes({"rp-n1": {"VCPU": 1},
                                      "rp-n2": {"VCPU": 4}}, 2)])
        self.assertEqual((Outcome.REWRITTEN, 1, 1),
                         (outcome.result, outcome.others, outcome.conflicts))
        delete, replace = self.placement.writes
        self.assertEqual(("delete_consumer_allocations", "inst"), delete)
        _, _, keep, current = replace
        self.assertEqual({"rp-n2": {"generation": 1,
                                    "resources": {"VCPU": 4}}}, keep)
        self.assertEqual(2, current["consumer_generation"])

    def test_writer_changed_the_orphaned_part_is_skipped(self) -> None:
        outcome = self.clear([writes({"rp-n1": {"VCPU": 2}}, 2)])
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.CHANGED, "rp-n1"), 1),
            (outcome.result, outcome.kept, outcome.conflicts))
        self.assertEqual(1, len(self.placement.writes))

    def test_instance_on_the_node_after_the_409_is_skipped(self) -> None:
        def lands(placement: RacedPlacement) -> None:
            writes({"rp-n1": {"VCPU": 1}}, 2)(placement)
            self.nova.server_list.append(df.server("inst", "n1"))
        outcome = self.clear([lands])
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.ON_NODE, "n1"), 1),
            (outcome.result, outcome.kept, outcome.conflicts))
        self.assertEqual(2, len(self.nova.called("server")))

    def test_migration_after_the_409_is_skipped(self) -> None:
        def becomes_migration(placement: RacedPlacement) -> None:
            placement.consumers["inst"] = df.consumer(
                {"rp-n1": {"VCPU": 1}}, consumer_type="MIGRATION",
                generation=2)
        outcome = self.clear([becomes_migration])
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.MIGRATION)),
            (outcome.result, outcome.kept))

    def test_bounded_retries_then_skipped(self) -> None:
        races = [writes({"rp-n1": {"VCPU": 1}}, g)
                 for g in range(2, 2 + orphan_clear.MAX_ATTEMPTS)]
        outcome = self.clear(races)
        self.assertEqual(orphan_clear.MAX_ATTEMPTS, len(self.placement.writes))
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(Keep.KEPT_CHANGING),
             orphan_clear.MAX_ATTEMPTS),
            (outcome.result, outcome.kept, outcome.conflicts))
        self.assertEqual(list(range(1, 1 + orphan_clear.MAX_ATTEMPTS)),
                         self.placement.generations)
        self.assertEqual(5, orphan_clear.MAX_ATTEMPTS)

    def test_409_without_a_new_generation_is_raised(self) -> None:
        exc = self.assertRaises(http.Conflict, self.clear, [nothing])
        self.assertEqual(409, exc.status)
        self.assertEqual(1, len(self.placement.writes))

    def test_dropping_everything_is_a_guarded_delete(self) -> None:
        outcome = self.clear([], current=df.consumer({"rp-n1": {"VCPU": 1}},
                                                     generation=7))
        self.assertEqual(orphan_clear.ClearOutcome(
            "inst", ("rp-n1",), Outcome.DELETED), outcome)
        self.assertEqual([7], self.placement.generations)

    def test_the_clear_has_one_home(self) -> None:
        # orphans re-exported these after the split; nothing was released,
        # so one name per thing: orphan_clear's (issue 19).
        for name in ("clear_consumer", "ClearOutcome", "MOVING",
                     "reason_for"):
            self.assertTrue(hasattr(orphan_clear, name), name)
            self.assertFalse(hasattr(orphans, name), name)
