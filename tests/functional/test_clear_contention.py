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

"""Two ``orphan clear`` runs at once, in Nova's harness with real placement.

Each round makes fresh orphans (``orphan_cloud``), then starts two runs of
what ``openstack drain orphan clear --yes`` does (``orphans.gather``, then
``orphan_clear.clear_consumer`` per consumer), each with its own clients, in two
threads released together. One run clears the consumers in order, the other
in reverse order every other round, so they meet on the same consumer.

Nova's harness serves every request in-process (wsgi-intercept) and, under
eventlet, a request never yields: without help one run would finish before
the other starts. So each client yields to the other thread 0 to 2 times
(drawn from a printed seed) before every request, which interleaves the two
runs request by request, as two processes interleave on a real network.

After every round: every orphan is gone, every live allocation is byte for
byte what it was (a leftover's server keeps exactly its own), no run raised
or skipped anything, and each orphan was removed by exactly one run while
the other reported it ``already gone`` or never listed it. Rounds go on
past ``ROUNDS`` until a 409 was seen (at most ``MAX_ROUNDS``). The rounds,
409s and outcomes are printed and attached as a detail.
"""
import collections
import os
import random
import threading
import time
from typing import Any

from testtools import content

from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from nova_drain_filters.clients import compute
from tests.functional import orphan_cloud

ROUNDS = 4
MAX_ROUNDS = 12
ORPHANS = 5
SEED = int(os.environ.get("NDF_CLEAR_SEED", "8"))
DONE = (orphan_clear.Outcome.DELETED, orphan_clear.Outcome.REWRITTEN)
GONE = orphan_clear.Outcome.ALREADY_GONE


class Interleaved(orphan_cloud.Counting):
    """Yields to the other threads 0 to 2 times before each request."""

    rng: random.Random

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        for _ in range(self.rng.randint(0, 2)):
            time.sleep(0)
        return super().request(method, url, **kwargs)


class InterleavedPlacement(Interleaved, orphan_cloud.CountingPlacement):
    pass


class InterleavedCompute(Interleaved, compute.ComputeClient):
    pass


def clear_run(nova: Any, placement: Any,
              reverse: bool) -> dict[str, orphan_clear.ClearOutcome]:
    """What ``orphan clear --yes`` does: list, then clear each consumer."""
    drops: dict[str, dict[str, str | None]] = {}
    for orphan in orphans.gather(nova, placement):
        drops.setdefault(orphan.consumer, {})[orphan.provider] = orphan.node
    return {consumer: orphan_clear.clear_consumer(nova, placement, consumer,
                                             drops[consumer])
            for consumer in sorted(drops, reverse=reverse)}


class TwoClearsTest(orphan_cloud.OrphanCloudBase):
    def test_two_clears_at_once(self) -> None:
        rng = random.Random(SEED)
        # Round 0 also holds an orphan Nova itself left behind.
        doomed = self._create_server(networks="none", host="host2")
        self.delete_losing_allocations(doomed)
        outcomes: collections.Counter[str] = collections.Counter()
        conflicts = double = made_total = 0
        started = time.monotonic()
        round_ = 0
        while round_ < ROUNDS or (round_ < MAX_ROUNDS and not conflicts):
            where = f"seed {SEED}, round {round_}"
            made = self.make_round(rng, ORPHANS)
            if round_ == 0:
                made[doomed["id"]] = None
            made_total += len(made)
            live = self.snapshot(skip=set(made))
            runs = self.run_together(rng, reverse=bool(round_ % 2))
            for run in runs:
                conflicts += run[1]
                outcomes.update(o.result.value for o in run[0].values())
                outcomes["rows that met a 409"] += sum(
                    bool(o.conflicts) for o in run[0].values())
            double += self.check_once(made, [r[0] for r in runs], where)
            self.assert_cleared(made, where)
            self.assertEqual(live, self.snapshot(skip=set(made)), where)
            round_ += 1
        figures = (f"seed {SEED}: {round_} rounds, {made_total} orphaned "
                   f"consumers, two runs each; {conflicts} 409s answered, "
                   f"all re-read; outcomes {dict(sorted(outcomes.items()))}; "
                   f"{double} removed by both; "
                   f"{time.monotonic() - started:.1f}s")
        print(f"two clears: {figures}")
        self.addDetail("figures", content.text_content(figures))
        self.assertGreater(conflicts, 0, figures)

    def run_together(self, rng: random.Random, reverse: bool) -> list[Any]:
        """Two clear runs released at once; [(outcomes, 409s)] per run."""
        results: list[Any] = [None, None]
        barrier = threading.Barrier(2)

        def one(i: int) -> None:
            nova, client = self.clients(InterleavedPlacement,
                                        InterleavedCompute)
            nova.rng = client.rng = random.Random(rng.random())
            barrier.wait(30)
            try:
                results[i] = (clear_run(nova, client, reverse and i == 1),
                              client.conflicts)
            except BaseException as exc:  # reported below
                results[i] = exc

        threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        for result in results:
            self.assertIsInstance(result, tuple, str(result))
        return results

    def check_once(self, made: dict[str, Any],
                   runs: list[dict[str, orphan_clear.ClearOutcome]],
                   where: str) -> int:
        """Each orphan removed by one run; the other: gone or not listed.

        Returns how many both runs report removing (placement can accept a
        second guarded delete that finds nothing left; see
        ``orphan_clear``).
        """
        double = 0
        for consumer in made:
            results = [run[consumer].result for run in runs
                       if consumer in run]
            say = f"{where}: {consumer}: {results}"
            self.assertTrue(set(results) <= {*DONE, GONE}, say)
            acted = sum(r in DONE for r in results)
            self.assertGreaterEqual(acted, 1, say)
            double += acted > 1
        return double
