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

"""Where each server's time goes in ``drain host migrate``'s bench.

The bench's own instruments (:class:`Timeline`), wrapped around the
runner's methods and the fake driver's hold, not the product's.
"""
import datetime
import statistics
import time
from typing import Any

import fixtures

from nova_drain_filters.migration import plan
from nova_drain_filters.migration import runner
from tests.functional import migration_fakes


def _epoch(when: datetime.datetime) -> float:
    """Nova's naive UTC timestamp as seconds since the epoch."""
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


class Timeline:
    """Wall-clock times (``time.time()``, the clock Nova stamps its
    records with) of what the command and the fake driver did, per server:
    the bench's own instruments, wrapped around the product's methods."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.posts: dict[str, float] = {}
        self.noticed: dict[str, float] = {}
        self.driver: dict[str, tuple[float, float]] = {}
        self.finishes: list[float] = []
        self.post_times: list[float] = []
        self.polls = 0
        #: The poll during which each move was noticed: when it began.
        self.poll_began: dict[str, float] = {}
        self.poll_seconds: list[float] = []
        self._polling = 0.0

    def install(self, case: Any) -> None:
        post, finish = runner.Runner.post, runner.Runner.finish
        #: What the timed poll calls: the runner's own, or a variant's.
        self.poll_impl: Any = runner.Runner.poll
        migrate = migration_fakes.HeldLiveMigrationDriver.live_migration

        def timed_post(run: Any, move: Any, now: float) -> None:
            at = time.time()
            self.posts[move.step.server] = at
            self.post_times.append(at)
            post(run, move, now)

        def timed_finish(run: Any, move: Any, outcome: Any, *a: Any,
                         **kw: Any) -> None:
            at = time.time()
            if outcome is plan.Outcome.MOVED:
                self.noticed[move.step.server] = at
                self.poll_began[move.step.server] = self._polling
            self.finishes.append(at)
            finish(run, move, outcome, *a, **kw)

        def timed_poll(run: Any, *a: Any, **kw: Any) -> None:
            self.polls += 1
            self._polling = time.time()
            self.poll_impl(run, *a, **kw)
            self.poll_seconds.append(time.time() - self._polling)

        def timed_migrate(driver: Any, context: Any, instance: Any,
                          dest: str, post_method: Any, *a: Any,
                          **kw: Any) -> None:
            # The hold ends where the fake calls Nova's post_method (the
            # post-migration runs inside driver.live_migration).
            began = time.time()

            def timed_post_method(*pa: Any, **pkw: Any) -> Any:
                self.driver[instance.uuid] = (began, time.time())
                return post_method(*pa, **pkw)

            migrate(driver, context, instance, dest, timed_post_method,
                    *a, **kw)

        for name, new in (("Runner.post", timed_post),
                          ("Runner.finish", timed_finish),
                          ("Runner.poll", timed_poll)):
            case.useFixture(fixtures.MonkeyPatch(
                "nova_drain_filters.migration.runner." + name, new))
        case.useFixture(fixtures.MonkeyPatch(
            "tests.functional.migration_fakes.HeldLiveMigrationDriver."
            "live_migration", timed_migrate))

    def breakdown(self, began: float, ended: float, concurrency: int,
                  records: dict[str, Any]) -> dict[str, float]:
        """Mean seconds per server of each part of a run."""
        def mean(values: list[float]) -> float:
            return statistics.fmean(values) if values else float("nan")

        created = {s: _epoch(r.created_at) for s, r in records.items()}
        done = {s: _epoch(r.updated_at) for s, r in records.items()}
        ordered = sorted(self.post_times)
        # The i-th move over by Nova's records frees the slot of the
        # (concurrency + i)-th POST: how long each slot sat idle.
        over = sorted(done.values())
        refills = [at - freed for at, freed in zip(
            ordered[concurrency:], over, strict=False)]
        servers = list(records)
        return {
            "startup": ordered[0] - began,
            "tail": ended - max(self.finishes),
            "to_record": mean([created[s] - self.posts[s]
                                    for s in servers]),
            "to_driver": mean([self.driver[s][0] - created[s]
                                      for s in servers]),
            "driver": mean([self.driver[s][1] - self.driver[s][0]
                            for s in servers]),
            "to_done": mean([done[s] - self.driver[s][1]
                                         for s in servers]),
            "lag": mean([self.noticed[s] - done[s] for s in servers]),
            "lag_max": max(self.noticed[s] - done[s]
                                  for s in servers),
            "to_poll": mean([self.poll_began[s] - done[s]
                             for s in servers]),
            "in_poll": mean([self.noticed[s] - self.poll_began[s]
                             for s in servers]),
            "poll_s": mean(self.poll_seconds),
            "refill": mean(refills),
        }
