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

"""``orphan clear`` when someone else writes the consumer between its read
and its write, injected at that exact moment, in Nova's harness.

* Another ``openstack drain orphan clear --yes`` runs to its end right
  before the first run's first write: both exit 0, the first run reports
  every consumer ``already gone`` (the first after a 409), nothing live
  changed.
* Nova writes the consumer (``SchedulerReportClient.put_allocations``, its
  own read-generation-write) right after the clear's read: whatever Nova
  wrote survives, and the clear reports the 409 and what it did after.
"""
import json
import random
import threading
from typing import Any

import fixtures
from nova.scheduler.client import report

from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from nova_drain_filters.clients import placement
from tests.functional import orphan_cloud

Outcome = orphan_clear.Outcome

CLEAR = ("drain", "orphan", "clear", "--yes", "--max-fraction", "1")
CONFLICT = "after 1 consumer generation conflict"


class ReadThenHook(orphan_cloud.CountingPlacement):
    """Runs ``after_read`` (once) right after a consumer's allocations are
    read: between the clear's judgement and its write."""

    after_read: Any = None

    def consumer_allocations(self, consumer: str) -> dict[str, Any]:
        body = super().consumer_allocations(consumer)
        if self.after_read is not None:
            hook, self.after_read = self.after_read, None
            hook(consumer)
        return body


class SecondClearTest(orphan_cloud.OrphanCloudBase):
    def test_another_clear_between_read_and_write(self) -> None:
        doomed = self._create_server(networks="none", host="host2")
        self.delete_losing_allocations(doomed)
        made = {doomed["id"]: None, **self.make_round(random.Random(3), 3)}
        live = self.snapshot(skip=set(made))
        second: list[Any] = []
        fired: list[str] = []
        real = {name: getattr(placement.PlacementClient, name)
                for name in ("delete_consumer_allocations",
                             "replace_consumer_allocations")}

        def first_write(name: str) -> Any:
            def write(client: Any, consumer: str, *args: Any) -> None:
                if not fired:
                    # The first run's first write waits for a whole second
                    # run (in a thread of its own: a fresh stack).
                    fired.append(consumer)
                    other = threading.Thread(target=lambda: second.append(
                        self.cli(*CLEAR, "-f", "json")))
                    other.start()
                    other.join(300)
                real[name](client, consumer, *args)
            return write

        for name in real:
            self.useFixture(fixtures.MonkeyPatch(
                f"{placement.__name__}.PlacementClient.{name}",
                first_write(name)))
        first = self.cli(*CLEAR, "-f", "json")

        [other] = second
        for run in (first, other):
            self.assertEqual(0, run.rc, run)
            self.assertNotIn("Traceback", run.stderr)
            self.assertFalse([line for line in run.stderr.splitlines()
                              if line.startswith("failed:")], run.stderr)
        other_rows = {r["Consumer"]: r["Result"] for r in json.loads(
            other.stdout)}
        first_rows = {r["Consumer"]: r["Result"] for r in json.loads(
            first.stdout)}
        self.assertEqual(set(made), set(other_rows))
        self.assertEqual(set(made), set(first_rows))
        self.assertTrue(all(r in ("deleted", "rewritten, kept 1 provider(s)")
                            for r in other_rows.values()), other_rows)
        results = [first_rows[c] for c in sorted(first_rows)]
        self.assertEqual(f"already gone ({CONFLICT})", results[0], results)
        self.assertEqual(["already gone"] * (len(made) - 1), results[1:])
        self.assert_cleared(made, "after both runs")
        self.assertEqual(live, self.snapshot(skip=set(made)))
        again = self.cli(*CLEAR, "-f", "json")
        self.assertEqual((0, "[]"), (again.rc, again.stdout.strip()))


class NovaWritesTheConsumerTest(orphan_cloud.OrphanCloudBase):
    """An orphan on host1; Nova writes the same consumer right after the
    clear's read, with its own report client."""

    def setUp(self) -> None:
        super().setUp()
        self.orphan = self.make_orphan(("host1",))
        nova, client = self.clients()
        [found] = orphans.gather(nova, client)
        self.assertEqual((self.orphan, self.rp["host1"]),
                         (found.consumer, found.provider))
        self.drop = {found.provider: found.node}
        self.live_before = self.snapshot(skip=set())
        self.nova, self.client = self.clients(ReadThenHook)

    def nova_writes(self, change: Any) -> None:
        """On the clear's next read, Nova rewrites the consumer's
        allocations as ``change(allocations)`` returns them."""
        reportclient = report.report_client_singleton()

        def write(consumer: str) -> None:
            body = reportclient.get_allocs_for_consumer(self.ctxt, consumer)
            self.assertTrue(reportclient.put_allocations(
                self.ctxt, consumer, {
                    "allocations": change(body["allocations"]),
                    "project_id": body["project_id"],
                    "user_id": body["user_id"],
                    "consumer_generation": body["consumer_generation"]}))
            self.written = orphan_cloud.resources(self.allocations(consumer))
        self.client.after_read = write

    def clear(self) -> orphan_clear.ClearOutcome:
        outcome = orphan_clear.clear_consumer(self.nova, self.client, self.orphan,
                                         self.drop)
        self.assertEqual(1, self.client.conflicts)
        self.assertEqual(1, outcome.conflicts)
        self.assertEqual(self.live_before, self.snapshot(skip=set()))
        return outcome

    def test_nova_adds_on_another_host(self) -> None:
        # The orphaned part is as judged: it goes; Nova's new part stays.
        host2 = {"resources": {"MEMORY_MB": 128}}
        self.nova_writes(lambda a: {**a, self.rp["host2"]: host2})
        outcome = self.clear()
        self.assertEqual((Outcome.REWRITTEN, 1, 1), (
            outcome.result, outcome.others, outcome.conflicts))
        self.assertEqual({self.rp["host2"]: host2["resources"]},
                         orphan_cloud.resources(
                             self.allocations(self.orphan)))

    def test_nova_changes_the_orphaned_part(self) -> None:
        # Nova rewrote the very allocation judged orphaned: not ours to
        # take any more; everything Nova wrote stays.
        rp = self.rp["host1"]
        self.nova_writes(lambda a: {rp: {"resources": {"MEMORY_MB": 256}}})
        outcome = self.clear()
        self.assertEqual(
            (Outcome.SKIPPED, orphan_clear.Kept(orphan_clear.Keep.CHANGED,
                                                rp)),
            (outcome.result, outcome.kept))
        self.assertEqual(self.written, orphan_cloud.resources(
            self.allocations(self.orphan)))
        self.assertEqual({rp: {"MEMORY_MB": 256}}, self.written)

    def test_nova_removes_it_first(self) -> None:
        reportclient = report.report_client_singleton()
        self.client.after_read = lambda consumer: self.assertTrue(
            reportclient.delete_allocation_for_instance(self.ctxt, consumer))
        outcome = self.clear()
        self.assertEqual((Outcome.ALREADY_GONE, 1),
                         (outcome.result, outcome.conflicts))

