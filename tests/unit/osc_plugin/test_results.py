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

"""The Result column's words: the one place outcomes become text."""
import testtools

from nova_drain_filters import drain
from nova_drain_filters import orphan_clear
from nova_drain_filters import stale
from osc_plugin.v1 import results

Outcome, Keep, Kept = orphan_clear.Outcome, orphan_clear.Keep, orphan_clear.Kept


def outcome(result: Outcome, kept: Kept | None = None, conflicts: int = 0,
            others: int = 0) -> orphan_clear.ClearOutcome:
    return orphan_clear.ClearOutcome("inst", ("rp-n1",), result, kept,
                                     conflicts, others)


class TestCleared(testtools.TestCase):
    def test_words_operators_script(self) -> None:
        # The words stay as they were when the engine returned text.
        self.assertEqual(
            ["deleted", "already gone", "would delete", "would rewrite",
             "rewritten, kept 2 provider(s)"],
            [results.cleared(outcome(r, others=2)) for r in (
                Outcome.DELETED, Outcome.ALREADY_GONE, Outcome.WOULD_DELETE,
                Outcome.WOULD_REWRITE, Outcome.REWRITTEN)])

    def test_conflicts_and_reasons(self) -> None:
        self.assertEqual("already gone (after 1 consumer generation "
                         "conflict)", results.cleared(outcome(
                             Outcome.ALREADY_GONE, conflicts=1)))
        self.assertEqual("deleted (after 3 consumer generation conflicts)",
                         results.cleared(outcome(Outcome.DELETED,
                                                 conflicts=3)))
        self.assertEqual(
            "skipped (its allocations on rp-n1 changed while clearing; run "
            "'orphan list' again; after 1 consumer generation conflict)",
            results.cleared(outcome(Outcome.SKIPPED,
                                    Kept(Keep.CHANGED, "rp-n1"), 1)))

    def test_every_reason_has_words(self) -> None:
        self.assertEqual({
            Keep.NODE_UNKNOWN: "no node known for provider rp-1 to check "
                               "the instance against",
            Keep.NO_NODE_YET: "instance has no node yet",
            Keep.MOVING: "instance is RESIZE",
            Keep.ON_NODE: "instance is on n1 now",
            Keep.MIGRATION: "consumer is a migration",
            Keep.CHANGED: "its allocations on rp-1, rp-2 changed while "
                          "clearing; run 'orphan list' again",
            Keep.KEPT_CHANGING: "its allocations kept changing",
        }, {why: results.kept(Kept(why, about)) for why, about in (
            (Keep.NODE_UNKNOWN, "rp-1"), (Keep.NO_NODE_YET, ""),
            (Keep.MOVING, "RESIZE"), (Keep.ON_NODE, "n1"),
            (Keep.MIGRATION, ""), (Keep.CHANGED, "rp-1, rp-2"),
            (Keep.KEPT_CHANGING, ""))})


class TestDrainStaleSync(testtools.TestCase):
    def test_drained(self) -> None:
        out = drain.Outcome
        self.assertEqual(
            ["done", "failed", "rolled back", "rollback failed",
             "left disabled: no longer disabled by a drain", "released"],
            [results.drained(o) for o in (
                out.DONE, out.FAILED, out.ROLLED_BACK, out.ROLLBACK_FAILED,
                out.LEFT_DISABLED, out.RELEASED)])
        self.assertEqual("released; left behind: provider rp-1, host "
                         "mapping of c1", results.drained(
                             out.RELEASED, ["provider rp-1",
                                          "host mapping of c1"]))

    def test_stale_cleared(self) -> None:
        out, C = stale.Outcome, stale.Cleared
        self.assertEqual([
            "deleted",
            "deleted; provider(s) left behind: rp-1, rp-2",
            "provider deleted (2 dead consumer(s) cleared)",
            "provider already gone",
            "deleted c1/n1; provider deleted (0 dead consumer(s) "
            "cleared)",
            "deleted c1/n1; provider already gone",
        ], [results.stale_cleared(c) for c in (
            C(out.DELETED), C(out.DELETED, left=("rp-1", "rp-2")),
            C(out.PROVIDER_DELETED, consumers=2), C(out.PROVIDER_GONE),
            C(out.DELETED, out.PROVIDER_DELETED, where="c1/n1"),
            C(out.DELETED, out.PROVIDER_GONE, where="c1/n1"))])

    def test_synced(self) -> None:
        self.assertEqual(["planned", "done", "failed: HTTP 409: locked"], [
            results.synced(True), results.synced(False),
            results.synced(False, "HTTP 409: locked")])
