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

"""The runner as it polled before 2026-12-01's notice-lag work, for A/B runs.

``tools/bench.sh drain_migrate --compare`` drains each concurrency twice
in the same cloud, interleaved: with the runner as it is, and with these
three of its methods as they were, to measure the change side by side
under the same load:

- ``since``: every poll asked for the records changed since a minute
  before the run (the answer grew with the run);
- ``busy`` and ``poll``: a move held its slot until it was judged, so the
  next POST waited for the reads of the judging (the server, its faults);
- ``learn``: a move's duration was Nova's whole-second stamps only.

Bench code only: nothing in the product imports it.
"""
import contextlib
import datetime
from collections.abc import Iterator
from typing import Any

import fixtures

from nova_drain_filters.migration import plan


def since(run: Any) -> str:
    if not hasattr(run, "legacy_since"):
        run.legacy_since = (datetime.datetime.now(datetime.timezone.utc)
                            - datetime.timedelta(seconds=60)
                            ).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(run.legacy_since)


def busy(run: Any) -> int:
    return len(run.flying)


def poll(run: Any, since: str) -> None:
    """Each move judged as it is seen; no POST inside the poll."""
    by_server: dict[str, list[Any]] = {}
    for record in run.client.migration_records(changes_since=since):
        by_server.setdefault(record.instance_uuid, []).append(record)
    now = run.clock()
    for move in list(run.flying):
        found = [r for r in by_server.get(move.step.server, ())
                 if r.id not in move.known and (
                     move.record is None or r.id == move.record.id)]
        if found:
            run.update(move, max(found, key=lambda r: r.id), now)
        elif move.record is not None:
            run.judge(move, now)
        elif now - move.posted_at > run.options.server_timeout:
            run.no_record(move, now)


def learn(run: Any, move: Any, record: Any) -> None:
    if (move.started_here and record.status == plan.ARRIVES[
            move.step.action] and record.created_at is not None
            and record.updated_at is not None):
        run.durations[move.step.action].append(
            max(0.0, record.updated_at - record.created_at))


@contextlib.contextmanager
def legacy_runner(timeline: Any) -> Iterator[None]:
    """The runner's old ``since``, ``busy`` and ``learn`` within, and the
    bench's timed poll calling the old ``poll``."""
    patches = [fixtures.MonkeyPatch(
        f"nova_drain_filters.migration.runner.Runner.{name}", new)
        for name, new in (("since", since), ("busy", busy),
                          ("learn", learn))]
    for patch in patches:
        patch.setUp()
    current, timeline.poll_impl = timeline.poll_impl, poll
    try:
        yield
    finally:
        timeline.poll_impl = current
        for patch in reversed(patches):
            patch.cleanUp()
