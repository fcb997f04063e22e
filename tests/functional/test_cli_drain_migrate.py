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

"""``openstack drain host migrate`` through the real shell, against Nova's
real API, conductor, scheduler, computes (held-migration fake) and
placement. Every check reads Nova's own records, never the command's."""
import json
import threading
import time
from typing import Any

import fixtures
from nova import objects

from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import runner
from tests.functional import migrate_base
from tests.functional.migrate_base import OVER


class MixedStatesTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")

    def test_active_paused_shutoff_move_and_host_is_released(self) -> None:
        active = self.boot_on("host1")
        paused = self.boot_on("host1")
        self.api.post_server_action(paused["id"], {"pause": None})
        self._wait_for_state_change(paused, "PAUSED")
        shutoff = self.boot_on("host1")
        self._stop_server(shutoff)
        self.start_drain("host1")

        rows, run = self.migrate("host1")
        self.assertEqual(
            {active["id"]: ("live", "moved", "host2"),
             paused["id"]: ("live", "moved", "host2"),
             shutoff["id"]: ("cold", "moved", "host2")},
            {s: (r["Action"], r["Result"], r["Destination"])
             for s, r in rows.items()})
        self.assertEqual(["Host", "Server", "Name", "Action", "Result",
                          "Destination", "Detail"],
                         list(next(iter(rows.values()))))
        for server, status in ((active, "ACTIVE"), (paused, "PAUSED"),
                               (shutoff, "SHUTOFF")):
            now = self.server(server)
            self.assertEqual(("host2", status, None), (
                now["OS-EXT-SRV-ATTR:host"], now["status"],
                now["OS-EXT-STS:task_state"]))
            self.assertEqual(1, len(self.records(server)))
        self.assertEqual("confirmed", self.records(shutoff)[0].status)
        self.assertEqual({"completed"}, {self.records(s)[0].status
                                         for s in (active, paused)})
        self.assertEqual(0, sum(self.usage("host1").values()))
        self.assertIn("started live migration", run.stderr)
        self.assertIn("completed", run.stderr)
        shown = self.cli_json("drain", "host", "show", "host1")
        self.assertEqual(("Drained", 0), (shown[0]["Phase"],
                                          shown[0]["Migrations"]))

        self.computes["host1"].stop()
        self.admin_api.put_service_force_down(self.service_id("host1"), True)
        done = self.cli("drain", "host", "finish", "host1", "--yes")
        self.assertEqual(0, done.rc, done)
        self.assertEqual([], self.admin_api.get_services(
            binary="nova-compute", host="host1"))


class TwoHostsTest(migrate_base.MigrateTestBase):
    def test_both_hosts_empty_onto_the_third(self) -> None:
        servers = [self.boot_on(h) for h in ("host1", "host1", "host2",
                                             "host2")]
        self.start_drain("host1", "host2")
        rows, _run = self.migrate("host1", "host2", "--concurrency", "3")
        self.assertEqual({"moved"}, {r["Result"] for r in rows.values()})
        self.assertEqual(["host3"] * 4, [
            self.server(s)["OS-EXT-SRV-ATTR:host"] for s in servers])


class GroupsTest(migrate_base.MigrateTestBase):
    def test_anti_affinity_kept_and_affinity_reported(self) -> None:
        anti = self.group("spread", "anti-affinity")
        mover = self.boot_in(anti, "host1")
        other = self.boot_in(anti, "host2")
        # host3 is busier, so Nova's weighers would pick host2: only the
        # anti-affinity filter keeps the mover off it.
        for _ in range(2):
            self.boot_on("host3")
        together = self.group("pair", "affinity")
        pair = [self.boot_in(together, "host1") for _ in range(2)]
        self.start_drain("host1")

        rows, _run = self.migrate("host1", rc=1)
        self.assertEqual(("moved", "host3"), (rows[mover["id"]]["Result"],
                                              rows[mover["id"]]["Destination"]))
        self.assertEqual("host3", self.server(mover)["OS-EXT-SRV-ATTR:host"])
        self.assertEqual("host2", self.server(other)["OS-EXT-SRV-ATTR:host"])
        for server in pair:
            row = rows[server["id"]]
            self.assertEqual(("unmovable", "unmovable"),
                             (row["Action"], row["Result"]))
            self.assertIn("affinity group: pair", row["Detail"])
            self.assertEqual("host1", self.server(server)[
                "OS-EXT-SRV-ATTR:host"])
            self.assertEqual([], self.records(server))


class UnmovableTest(migrate_base.MigrateTestBase):
    def test_suspended_and_foreign_resize_stay(self) -> None:
        suspended = self.boot_on("host1")
        self._suspend_server(suspended)
        movable = self.boot_on("host1")
        resized = self.boot_on("host2")
        # Someone's cold migration onto host1, never confirmed (2.56: a
        # target host, still checked by the scheduler).
        self.admin_api.post_server_action(resized["id"],
                                          {"migrate": {"host": "host1"}})
        self._wait_for_state_change(resized, "VERIFY_RESIZE")
        self.start_drain("host1")

        rows, run = self.migrate("host1", rc=1)
        self.assertEqual("moved", rows[movable["id"]]["Result"])
        self.assertIn("SUSPENDED", rows[suspended["id"]]["Detail"])
        self.assertIn("someone else's resize", rows[resized["id"]]["Detail"])
        self.assertEqual({"unmovable"}, {rows[s["id"]]["Result"]
                                         for s in (suspended, resized)})
        self.assertEqual("VERIFY_RESIZE", self.server(resized)["status"])
        self.assertEqual("finished", self.records(resized)[0].status)
        self.assertIn("host1: not done", run.stderr)
        shown = self.cli_json("drain", "host", "show", "host1")
        self.assertEqual("Draining", shown[0]["Phase"])


class PreCheckFailureTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")

    def test_async_precheck_failure_retried_and_quoted(self) -> None:
        server = self.boot_on("host1")
        self.start_drain("host1")
        self.driver("host2").precheck_error = "injected: no room for the disk"

        rows, run = self.migrate("host1", "--retries", "1", rc=1)
        row = rows[server["id"]]
        self.assertEqual("failed", row["Result"])
        self.assertIn("injected: no room for the disk", row["Detail"])
        self.assertEqual(["error", "error"],
                         [m.status for m in self.records(server)])
        self.assertEqual(["live-migration"] * 2, self.actions(server))
        now = self.server(server)
        self.assertEqual(("host1", "ACTIVE", None), (
            now["OS-EXT-SRV-ATTR:host"], now["status"],
            now["OS-EXT-STS:task_state"]))
        self.assertIn("retrying", run.stderr)


class TimeoutTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")
    HOLD = None

    def test_held_migration_is_aborted(self) -> None:
        server = self.boot_on("host1")
        self.start_drain("host1")
        rows, run = self.migrate("host1", "--server-timeout", "2", rc=1)
        self.assertEqual("timed out, aborted", rows[server["id"]]["Result"])
        self.assertIn("--server-timeout 2s", rows[server["id"]]["Detail"])
        self.assertEqual(["cancelled"],
                         [m.status for m in self.records(server)])
        now = self.server(server)
        self.assertEqual(("host1", "ACTIVE", None), (
            now["OS-EXT-SRV-ATTR:host"], now["status"],
            now["OS-EXT-STS:task_state"]))
        allocations = self._get_allocations_by_server_uuid(server["id"])
        self.assertEqual([self._get_provider_uuid_by_host("host1")],
                         list(allocations))
        self.assertEqual(0, sum(self.usage("host2").values()))
        self.assertIn("aborting", run.stderr)


class ConcurrencyTest(migrate_base.MigrateTestBase):
    HOLD = 1.0
    PARALLEL_LIVE = 6

    def test_never_more_than_the_cap_in_flight(self) -> None:
        servers = [self.boot_on("host1") for _ in range(6)]
        self.start_drain("host1")
        seen: list[int] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                found = objects.MigrationList.get_by_filters(
                    self.ctxt, {"source_compute": "host1"})
                seen.append(sum(m.status not in OVER for m in found))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            rows, _run = self.migrate("host1", "--concurrency", "2")
        finally:
            stop.set()
            watcher.join()
        self.assertEqual({"moved"}, {r["Result"] for r in rows.values()})
        self.assertGreater(len(seen), 20)
        self.assertEqual(2, max(seen), seen)
        self.assertEqual([1] * 6, [len(self.records(s)) for s in servers])


class ResumeTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")
    HOLD = None

    def test_rerun_picks_up_the_migration_in_flight(self) -> None:
        servers = [self.boot_on("host1") for _ in range(3)]
        self.start_drain("host1")
        post = server_moves.MoveClient.live_migrate

        def post_then_die(client: Any, uuid: str) -> None:
            post(client, uuid)
            raise SystemExit(137)  # as if the process were killed

        with fixtures.MonkeyPatch(
                "nova_drain_filters.clients.server_moves.MoveClient."
                "live_migrate", post_then_die):
            first = self.cli("drain", "host", "migrate", "host1", "--yes")
        self.assertEqual(137, first.rc, first)
        # The 202 came before the conductor made the record (a cast).
        posted = self.wait_for("the first migration record", lambda: [
            s for s in servers if self.records(s)])
        self.assertEqual(1, len(posted))
        self.wait_for("the held migration to run", lambda: self.records(
            posted[0])[0].status == "running")

        def post_and_let_go(client: Any, uuid: str) -> None:
            # The rerun has gathered by now: migrations may complete.
            for host in self.HOSTS:
                self.driver(host).hold = 0.2
            post(client, uuid)

        with fixtures.MonkeyPatch(
                "nova_drain_filters.clients.server_moves.MoveClient."
                "live_migrate", post_and_let_go):
            rows, run = self.migrate("host1")
        self.assertIn(f"({posted[0]['id']}): resumed (running)", run.stderr)
        self.assertEqual({"moved"}, {r["Result"] for r in rows.values()})
        for server in servers:
            self.assertEqual(["completed"],
                             [m.status for m in self.records(server)])
            self.assertEqual(["live-migration"], self.actions(server))


class DryRunTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")

    def service_state(self, host: str) -> list[tuple[Any, ...]]:
        return [(s["id"], s["status"], s["disabled_reason"], s["forced_down"])
                for s in self.admin_api.get_services(
                    host=host, binary="nova-compute")]

    def test_plan_changes_nothing(self) -> None:
        live = self.boot_on("host1")
        cold = self.boot_on("host1")
        self._stop_server(cold)
        stays = self.boot_on("host1")
        self._suspend_server(stays)
        self.start_drain("host1")
        before = {s["id"]: self.actions(s) for s in (live, cold, stays)}
        service = self.service_state("host1")

        run = self.cli("drain", "host", "migrate", "host1", "--dry-run",
                       "-f", "json")
        self.assertEqual(0, run.rc, run)
        rows = {r["Server"]: r for r in json.loads(run.stdout)}
        self.assertEqual(
            {live["id"]: ("live", "planned"), cold["id"]: ("cold", "planned"),
             stays["id"]: ("unmovable", "unmovable")},
            {s: (r["Action"], r["Result"]) for s, r in rows.items()})
        self.assertIn("Plan:", run.stderr)
        for server in (live, cold, stays):
            self.assertEqual([], self.records(server))
            self.assertEqual(before[server["id"]], self.actions(server))
            self.assertEqual("host1", self.server(server)[
                "OS-EXT-SRV-ATTR:host"])
        self.assertEqual(service, self.service_state("host1"))


class BadInputTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")

    def one_line(self, *argv: str) -> str:
        run = self.cli("drain", "host", "migrate", *argv, "--yes")
        self.assertEqual(1, run.rc, run)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), run.stderr)
        self.assertEqual("", run.stdout)
        return lines[0]

    def test_unknown_zero_and_not_started(self) -> None:
        server = self.boot_on("host1")
        self.assertIn("nosuch: no compute service",
                      self.one_line("nosuch"))
        self.assertIn("--concurrency '0': must be a whole number",
                      self.one_line("host1", "--concurrency", "0"))
        self.assertIn("host1: not draining: run 'openstack drain host start "
                      "host1 --reason ...' first", self.one_line("host1"))
        self.assertEqual([], self.records(server))


class InterruptTest(migrate_base.MigrateTestBase):
    HOSTS = ("host1", "host2")
    HOLD = None

    def test_ctrl_c_aborts_what_it_started(self) -> None:
        server = self.boot_on("host1")
        self.start_drain("host1")
        poll = runner.Runner.poll

        def poll_then_ctrl_c(run: Any, since: str) -> None:
            poll(run, since)
            if any(m.record and m.record.status == "running"
                   for m in run.flying):
                raise KeyboardInterrupt

        with fixtures.MonkeyPatch(
                "nova_drain_filters.migration.runner.Runner.poll",
                poll_then_ctrl_c):
            run = self.cli("drain", "host", "migrate", "host1", "--yes")
        self.assertEqual(130, run.rc, run)
        self.assertIn("aborted", run.stderr)
        self.wait_for("the abort to land", lambda: self.records(server)[
            0].status == "cancelled")
        self.wait_for("the task to clear", lambda: self.server(server)[
            "OS-EXT-STS:task_state"] is None)
        now = self.server(server)
        self.assertEqual(("host1", "ACTIVE"), (now["OS-EXT-SRV-ATTR:host"],
                                               now["status"]))
