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

"""The runner of ``drain host migrate`` against a scripted Nova and clock."""
import datetime
import time
from typing import Any

import fixtures
import testtools

from nova_drain_filters.clients import http
from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import runner
from nova_drain_filters.migration import tracking
from nova_drain_filters.migration.plan import Outcome

#: Statuses a record goes through, one per poll, by fate.
LIVE_OK = ("queued", "running", "running", "completed")
COLD_OK = ("migrating", "finished")


class FakeNova:
    """Each poll moves every migration one status on; ``fate`` decides."""

    def __init__(self, fates: dict[str, str]) -> None:
        self.fates = fates
        self.servers = {u: server_moves.ServerState(
            u, u, "SHUTOFF" if f.startswith("cold") else "ACTIVE", None,
            "h1", "n1") for u, f in fates.items()}
        self.records: list[server_moves.MigrationRecord] = []
        self.paths: dict[int, list[str]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.flying_seen: list[int] = []
        self.requests = 0
        #: If set, records carry Nova's stamps from this clock.
        self.clock: Any = None

    def stamp(self) -> float | None:
        return self.clock() if self.clock else None

    def _call(self, name: str, arg: Any = None) -> None:
        self.requests += 1
        self.calls.append((name, arg))

    def called(self, name: str) -> list[Any]:
        return [a for n, a in self.calls if n == name]

    def _set(self, uuid: str, **kw: Any) -> None:
        old = self.servers[uuid]
        self.servers[uuid] = server_moves.ServerState(**{
            **old.__dict__, **kw})

    def _post(self, uuid: str, kind: str) -> None:
        if self.fates[uuid] == "conflict" and not self.called("conflicted"):
            self.calls.append(("conflicted", uuid))
            raise http.Conflict("nova", "POST", "/x", 409, "task set")
        fate = self.fates[uuid]
        path = {"ok": LIVE_OK, "cold": COLD_OK, "conflict": LIVE_OK,
                "precheck": ("error",), "hold": ("queued",) + ("running",) * 99,
                "stays": ("running", "completed")}[fate]
        rid = len(self.records) + 1
        self.paths[rid] = list(path)
        self.records.append(server_moves.MigrationRecord(
            rid, f"m{rid}", uuid, "accepted", kind, "h1", None,
            created_at=self.stamp(), updated_at=self.stamp()))
        self._set(uuid, task_state="migrating")

    def live_migrate(self, uuid: str) -> None:
        self._call("live_migrate", uuid)
        self._post(uuid, "live-migration")

    def cold_migrate(self, uuid: str) -> None:
        self._call("cold_migrate", uuid)
        self._post(uuid, "migration")

    def _advance(self) -> None:
        for i, record in enumerate(self.records):
            path = self.paths[record.id]
            if record.status == "finished":
                if not self.called("confirm_resize"):
                    continue
                path = ["confirmed"]
            if record.status in plan.FINAL or not path:
                continue
            status = path.pop(0)
            self.records[i] = server_moves.MigrationRecord(**{
                **record.__dict__, "status": status,
                "updated_at": self.stamp() or record.updated_at})
            uuid = record.instance_uuid
            if status in ("completed", "confirmed"):
                where = "h1" if self.fates[uuid] == "stays" else "h2"
                self._set(uuid, host=where, task_state=None)
            elif status == "finished":
                self._set(uuid, host="h2", status="VERIFY_RESIZE",
                          task_state=None)
            elif status in ("error", "cancelled"):
                self._set(uuid, task_state=None)
        self.flying_seen.append(sum(r.status not in plan.FINAL
                                    for r in self.records))

    def migration_records(self, host: str | None = None,
                          changes_since: str | None = None) -> list[Any]:
        self._call("migration_records", changes_since)
        self._advance()
        return list(self.records)

    def server_state(self, uuid: str) -> server_moves.ServerState:
        self._call("server_state", uuid)
        return self.servers[uuid]

    def server_migration(self, uuid: str, mid: int) -> dict[str, Any]:
        self._call("server_migration", uuid)
        return {"memory_remaining_bytes": 3 * 2**20}

    def confirm_resize(self, uuid: str) -> None:
        self._call("confirm_resize", uuid)
        self._set(uuid, status="SHUTOFF")

    def abort_live_migration(self, uuid: str, mid: int) -> None:
        self._call("abort", uuid)
        self.paths[mid] = ["cancelled"]

    def action_faults(self, uuid: str, actions: tuple[str, ...]) -> list[str]:
        self._call("action_faults", uuid)
        return ["compute_check_can_live_migrate_destination: no room"]


class UnstampedNova(FakeNova):
    """``changes-since`` polls miss every record (updated_at NULL, as
    Nova leaves a new one); only the host's list shows them."""

    def migration_records(self, host: str | None = None,
                          changes_since: str | None = None) -> list[Any]:
        found = super().migration_records(host, changes_since)
        return [] if changes_since else found


class WindowedNova(FakeNova):
    """Answers a poll as Nova does: the records updated at or after its
    ``changes-since`` (whole seconds), and counts what each answer held."""

    answers: list[int]

    def migration_records(self, host: str | None = None,
                          changes_since: str | None = None) -> list[Any]:
        found = super().migration_records(host, changes_since)
        if changes_since:
            since = datetime.datetime.strptime(
                changes_since, "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            found = [r for r in found if r.updated_at is not None
                     and r.updated_at >= since]
            self.answers.append(len(found))
        return found


class RunnerCase(testtools.TestCase):
    def run_moves(self, fates: dict[str, str], concurrency: int = 2,
                  timeout: float = 600, server_timeout: float = 30,
                  retries: int = 1, moves: list[tracking.Move] | None = None,
                  stamped: bool = False) -> dict[str, tracking.Move]:
        self.nova = FakeNova(fates)
        self.now = [0.0]
        if stamped:
            self.nova.clock = lambda: self.now[0]
        self.events: list[tuple[tracking.Event, str, str]] = []
        self.woke: list[float] = []

        def sleep(seconds: float) -> None:
            self.assertGreaterEqual(seconds, 0)
            self.now[0] += max(seconds, 0.01)
            self.woke.append(self.now[0])

        todo = moves if moves is not None else [tracking.Move(plan.Step(
            "h1", u, u, plan.Action.COLD if f.startswith("cold")
            else plan.Action.LIVE)) for u, f in fates.items()]
        done = runner.Runner(
            self.nova, tracking.Options(concurrency, timeout, server_timeout,
                                        retries),  # type: ignore[arg-type]
            lambda e, m, d: self.events.append((e, m.step.server, d)),
            clock=lambda: self.now[0], sleep=sleep).run(todo)
        return {m.step.server: m for m in done}

    def test_cap_is_never_passed(self) -> None:
        done = self.run_moves({f"s{i}": "ok" for i in range(6)})
        self.assertEqual({Outcome.MOVED}, {m.outcome for m in done.values()})
        self.assertEqual({"h2"}, {m.destination for m in done.values()})
        self.assertEqual(2, max(self.nova.flying_seen))
        # One poll request covers every server.
        self.assertEqual({None}, {type(a) and None for a in
                                  self.nova.called("migration_records")})

    def test_requests_per_server_are_bounded(self) -> None:
        self.run_moves({f"s{i}": "ok" for i in range(20)}, concurrency=4)
        self.assertLess(self.nova.requests / 20, 8)
        self.assertIn((tracking.Event.RUNNING, "s0", "memory remaining 3 MiB"),
                      self.events)

    def test_looks_when_the_next_move_should_arrive(self) -> None:
        done = self.run_moves({"s0": "ok", "s1": "ok"}, concurrency=1,
                              stamped=True)
        self.assertEqual({Outcome.MOVED}, {m.outcome for m in done.values()})
        first, second = self.nova.records
        assert first.updated_at is not None and first.created_at is not None
        assert second.created_at is not None
        # s0 arrived between the look that missed it and the one that saw
        # it, closer together than Nova's whole-second stamps: their
        # middle (posted when its record was made, in this fake).
        missed = max(w for w in self.woke if w < first.updated_at - 1e-9)
        took = (missed + first.updated_at) / 2 - first.created_at
        self.assertLess(first.updated_at - missed, plan.STAMP_RESOLUTION)
        # Once s1 runs, the next look is when it should arrive, learned
        # from s0.
        arrival = second.created_at + took
        self.assertTrue(any(abs(w - arrival) < 1e-9 for w in self.woke),
                        (arrival, self.woke))
        self.assertEqual(
            [], [w for w in self.woke if second.created_at + 0.5 < w
                 < arrival - 1e-9])

    def test_a_record_changes_since_misses_is_asked_for(self) -> None:
        nova = UnstampedNova({"s": "ok"})
        now = [0.0]
        done = runner.Runner(
            nova, tracking.Options(1, 60, 2, 0),  # type: ignore[arg-type]
            lambda e, m, d: None, clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + max(s, 0.01)),
        ).run([tracking.Move(plan.Step("h1", "s", "s", plan.Action.LIVE))])
        self.assertIn(None, nova.called("migration_records"))
        self.assertNotIn("no migration record", done[0].detail)

    def test_polls_ask_only_since_the_oldest_flying_change(self) -> None:
        # Nova's clock is ours here; a margin of 2 s instead of a minute.
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.migration.plan.CLOCK_SKEW", 2.0))
        nova = WindowedNova({f"s{i}": "ok" for i in range(12)})
        nova.answers = []
        now = [time.time()]
        nova.clock = lambda: now[0]
        done = runner.Runner(
            nova, tracking.Options(2, 600, 30, 0),  # type: ignore[arg-type]
            lambda e, m, d: None, clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + max(s, 0.5)),
            wall=lambda: now[0]).run([tracking.Move(plan.Step(
                "h1", f"s{i}", "", plan.Action.LIVE)) for i in range(12)])
        self.assertEqual([Outcome.MOVED] * 12, [m.outcome for m in done])
        # Every change was seen, yet no answer held every record: the
        # window follows the moves in flight.
        self.assertLess(max(nova.answers), 12)

    def test_a_freed_slot_is_filled_before_the_move_is_judged(self) -> None:
        self.run_moves({"s0": "ok", "s1": "ok"}, concurrency=1)
        calls = self.nova.calls
        # s0's record says completed: s1 is posted, then s0's server read.
        verify = calls.index(("server_state", "s0"))
        self.assertEqual(("live_migrate", "s1"), calls[verify - 1])
        self.assertEqual("migration_records", calls[verify - 2][0])
        self.assertEqual(1, max(self.nova.flying_seen))

    def test_cold_is_confirmed(self) -> None:
        done = self.run_moves({"c": "cold"})
        self.assertEqual(Outcome.MOVED, done["c"].outcome)
        self.assertEqual(["c"], self.nova.called("confirm_resize"))

    def test_precheck_failure_retried_then_failed_with_fault(self) -> None:
        done = self.run_moves({"s": "precheck"}, retries=2)
        self.assertEqual(Outcome.FAILED, done["s"].outcome)
        self.assertEqual(3, len(self.nova.called("live_migrate")))
        self.assertIn("no room", done["s"].detail)
        self.assertEqual(2, [e for e, *_ in self.events].count(
            tracking.Event.RETRYING))

    def test_conflict_on_post_is_retried(self) -> None:
        done = self.run_moves({"s": "conflict"})
        self.assertEqual(Outcome.MOVED, done["s"].outcome)
        self.assertEqual(["s", "s"], self.nova.called("live_migrate"))
        self.assertEqual(1, len(self.nova.records))

    def test_completed_on_the_source_is_not_success(self) -> None:
        done = self.run_moves({"s": "stays"})
        self.assertEqual(Outcome.FAILED, done["s"].outcome)
        self.assertIn("still on h1", done["s"].detail)

    def test_server_timeout_aborts(self) -> None:
        done = self.run_moves({"s": "hold", "t": "ok"}, server_timeout=5)
        self.assertEqual(Outcome.TIMED_OUT, done["s"].outcome)
        self.assertEqual(["s"], self.nova.called("abort"))
        self.assertEqual(Outcome.MOVED, done["t"].outcome)

    def test_deadline_aborts_live_and_leaves_the_queue(self) -> None:
        done = self.run_moves({"a": "hold", "b": "hold", "c": "ok"},
                              timeout=20, server_timeout=600)
        self.assertEqual({"a": Outcome.ABORTED, "b": Outcome.ABORTED,
                          "c": Outcome.NOT_STARTED},
                         {u: m.outcome for u, m in done.items()})

    def test_resumed_move_is_not_posted(self) -> None:
        self.nova = FakeNova({"s": "ok"})
        move = tracking.Move(plan.Step("h1", "s", "s", plan.Action.LIVE))
        done = self.run_moves({"s": "ok", "t": "ok"}, moves=[move])
        self.assertEqual(["s"], self.nova.called("live_migrate"))
        self.assertEqual(Outcome.MOVED, done["s"].outcome)

    def test_resume_picks_up_the_record(self) -> None:
        fates = {"s": "ok"}
        record = server_moves.MigrationRecord(1, "m1", "s", "running",
                                              "live-migration", "h1", "h2")
        nova = FakeNova(fates)
        nova.records.append(record)
        nova.paths[1] = ["completed"]
        nova.servers["s"] = server_moves.ServerState(
            "s", "s", "MIGRATING", "migrating", "h1", "n1")
        self.now = [0.0]
        events: list[Any] = []
        moves = runner.Runner(
            nova, tracking.Options(2, 60, 30, 0),  # type: ignore[arg-type]
            lambda e, m, d: events.append(e), clock=lambda: self.now[0],
            sleep=lambda s: self.now.__setitem__(0, self.now[0] + s),
        ).run([tracking.Move(plan.Step("h1", "s", "s", plan.Action.LIVE),
                             record=record)])
        self.assertEqual([], nova.called("live_migrate"))
        self.assertEqual(Outcome.MOVED, moves[0].outcome)
        self.assertEqual(tracking.Event.RESUMED, events[0])

    def test_ctrl_c_aborts_what_this_run_started(self) -> None:
        nova = FakeNova({"a": "hold"})
        polls = [0]

        def sleep(seconds: float) -> None:
            polls[0] += 1
            if polls[0] == 4:
                raise KeyboardInterrupt

        run = runner.Runner(nova, tracking.Options(2, 60, 30, 0),  # type: ignore
                            lambda e, m, d: None, sleep=sleep)
        self.assertRaises(KeyboardInterrupt, run.run, [tracking.Move(
            plan.Step("h1", "a", "a", plan.Action.LIVE))])
        self.assertEqual(["a"], nova.called("abort"))
        self.assertEqual(Outcome.ABORTED, run.done[0].outcome)
