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

"""Boots, drains and the CLI on the real cloud, with real tokens.

One cloud for the whole class (starting one costs minutes). The tests
share it and run in name order; each leaves the hosts it did not end
for good as it found them. Hosts: ``fake-1`` is disabled and enabled
again, ``fake-2`` is drained, emptied and released for good, ``fake-3``'s
nova-compute is killed (``tools/cloud.sh up`` starts it again). Ironic
node ``bm-0`` goes into maintenance and back, then is deployed and left
cleaning, its automated cleaning on.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e import baremetal
from tests.e2e import running_cloud
from tests.e2e import servers
from tests.e2e import workers
from tests.e2e.running_cloud import RunningCloud
from tests.e2e.workers_case import WorkersCase
from tests.functional.cloud import configs

NO_VALID_HOST = "No valid host"
#: Seconds a rolling COMMAND sleeps after its counter line, before it
#: restarts the host: the window the roll test's second kill lands in.
COMMAND_PAUSE = 5
#: Bound on reaching the point a roll is killed at (a host's migration or
#: COMMAND): a batch took about 35 s.
ROLL_STEP_TIMEOUT = 600.0


def _kill_if_running(proc: subprocess.Popen[bytes]) -> None:
    """A test's roll that failed half-way: stop it by its PID."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


class CloudTest(WorkersCase):
    cloud: RunningCloud
    admin: Any
    image: str
    first_active: float | None = None

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.cloud = RunningCloud()
        # Registered first: a start that fails half-way is stopped too.
        cls.addClassCleanup(cls.cloud.stop)
        cls.cloud.start()
        # Runs before the stop above (class cleanups run last first).
        cls.addClassCleanup(cls.cloud.note_memory, "at the end of the tier")
        cls.admin = cls.cloud.connect()
        cls.image = str(cls.cloud.state.facts["image"])
        cls.first_boot()

    @classmethod
    def first_boot(cls) -> None:
        """The issue's clock: nothing to the first ACTIVE server, the first
        request after `up`, before any test changes the cloud."""
        server = servers.boot(cls.admin, cls.image, "e2e-first")
        try:
            got = servers.wait_settled(cls.admin, server)
        finally:
            servers.delete(cls.admin, server)
        if got["status"] != "ACTIVE":
            raise AssertionError(f"the first boot after up is {got['status']}"
                                 f": {servers.fault(got)}")
        cls.first_active = time.monotonic() - cls.cloud.began
        cls.cloud.note(f"first ACTIVE server, {cls.first_active:.1f} s after "
                       "the tier began")
        cls.cloud.note_memory("after the first boot")

    # -- helpers ---------------------------------------------------------
    def boot(self, name: str, host: str) -> dict[str, Any]:
        """Boot asking for ``host``; the settled server (deleted at the
        end of the test)."""
        server = servers.boot(self.admin, self.image, f"e2e-{name}", host)
        self.addCleanup(servers.delete, self.admin, server)
        return servers.wait_settled(self.admin, server)

    def assertActiveOn(self, server: dict[str, Any], host: str) -> None:
        self.assertEqual(("ACTIVE", host),
                         (server["status"], server[servers.HOST_FIELD]),
                         servers.fault(server))

    def assertAvoided(self, server: dict[str, Any]) -> None:
        """The scheduler found no host: the requested one was excluded."""
        self.assertEqual("ERROR", server["status"])
        self.assertIn(NO_VALID_HOST, servers.fault(server))

    def cli(self, cloud: str, *args: str) -> Any:
        return self.cloud.openstack(cloud, *args)

    def cli_ok(self, *args: str, cloud: str = "ndf-admin") -> str:
        result = self.cli(cloud, *args)
        self.assertEqual(0, result.returncode,
                         f"openstack {' '.join(args)}: {result.stderr}")
        return str(result.stdout)

    def host_row(self, host: str) -> dict[str, Any]:
        rows = json.loads(self.cli_ok("drain", "host", "show", host,
                                      "-f", "json"))
        self.assertEqual(1, len(rows))
        return dict(rows[0])

    def node_uuid(self, host: str) -> str:
        """The compute node (and root provider) of a fake host."""
        found = [h for h in self.admin.compute.hypervisors(details=True)
                 if h.name == host]
        self.assertEqual(1, len(found), host)
        return str(found[0].id)

    def provider_traits(self, uuid: str) -> list[str]:
        resp = self.admin.placement.get(f"/resource_providers/{uuid}/traits",
                                        microversion="1.6")
        resp.raise_for_status()
        return list(resp.json()["traits"])

    # -- tests -----------------------------------------------------------
    # Named to run first (tests run in name order): the roll needs every
    # fake host in service, before fake-2 is released for good.
    def test_a_rolling_patch_of_the_fake_computes(self) -> None:
        """``drain rolling`` over fake-1, fake-2 and fake-3, a batch of one;
        COMMAND restarts the host's nova-compute through ``cloud.sh``, as a
        patch would. The run is killed (``kill -9``) while fake-1's server
        migrates and again while fake-2's COMMAND runs; the same command
        line, run again, finishes. Each COMMAND ran once, no server moved
        twice off one host, every server is ACTIVE, every host enabled."""
        hosts = ["fake-1", "fake-2", "fake-3"]
        booted = [self.boot(f"roll-{host}", host) for host in hosts]
        for server, host in zip(booted, hosts, strict=True):
            self.assertActiveOn(server, host)
        state = Path(tempfile.mkdtemp(prefix="ndf-e2e-roll-"))
        self.addCleanup(shutil.rmtree, state, True)
        ran = state / "commands"
        # The counter line first, then a few seconds before the restart:
        # the window the second kill lands in.
        command = (f"echo {{host}} >> {ran} && sleep {COMMAND_PAUSE} && "
                   f"{running_cloud.CLOUD_SH} stop nova-compute-{{host}} && "
                   f"{running_cloud.CLOUD_SH} up")
        args = ("drain", "rolling", *hosts, "--batch", "1", "--run", command,
                "--hook-timeout", "600", "--wait-up", "300",
                "--state-dir", str(state), "--yes", "-f", "json")
        began = time.monotonic()

        # Kill 1: a migration row of fake-1's server exists (Nova's record
        # of the live migration the run posted). In the runs so far it was
        # still 'accepted' (in flight) at the kill; Nova carries it on
        # without the CLI, and the fake driver's move is over before the
        # rerun reads Nova, so the rerun finds fake-1 empty. When the move
        # is over before the kill, the kill still lands in the run's
        # migrate step (fake-1 drained in the journal, no COMMAND). Either
        # way the rerun must neither move the server again nor lose it.
        # (A rerun that finds the move in flight tracks Nova's record and
        # posts nothing: test_cli_drain_migrate's
        # test_rerun_picks_up_the_migration_in_flight.)
        def migrating() -> str | None:
            rows = self.migrations(booted[0]["id"])
            return str(rows[0]["status"]) if rows else None
        seen = self.kill_roll(args, state, "migration", migrating)
        self.assertEqual([], self.lines(ran), "no COMMAND before the kill")

        # Kill 2: fake-2's COMMAND has written its line and sleeps; it runs
        # in a session of its own and outlives the kill of the CLI.
        def commanding() -> str | None:
            return "fake-2" if "fake-2" in self.lines(ran) else None
        self.kill_roll(args, state, "COMMAND", commanding)

        result = self.cloud.openstack("ndf-admin", *args, timeout=1800)
        took = time.monotonic() - began
        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        rows = json.loads(result.stdout)
        self.assertEqual([(h, b, "done") for b, h in enumerate(hosts, 1)],
                         [(r["Host"], r["Batch"], r["Result"]) for r in rows])
        self.assertEqual(hosts, self.lines(ran), "each COMMAND once")
        for host in hosts:
            service = servers.compute_service(self.admin, host)
            assert service is not None
            self.assertEqual(("enabled", "up"),
                             (service["status"], service["state"]), host)
            self.assertNotIn("CUSTOM_DRAIN_HOST",
                             self.provider_traits(self.node_uuid(host)))
        moved = 0
        for server in booted:
            now = servers.show(self.admin, server["id"])
            self.assertEqual("ACTIVE", now["status"], servers.fault(now))
            sources = [m["source_compute"]
                       for m in self.migrations(server["id"])]
            self.assertEqual(sorted(set(sources)), sorted(sources),
                             f"{server['id']} moved twice off one host")
            moved += len(sources)
        self.cloud.note(f"rolling: 3 hosts, a batch of one, killed twice "
                        f"(first while a migration was {seen}), {moved} "
                        f"migration(s), {took:.1f} s")

    def kill_roll(self, args: tuple[str, ...], state: Path, during: str,
                  ready: Callable[[], str | None]) -> str:
        """Start the roll, wait until ``ready`` says something, SIGKILL
        the CLI's process (only it: COMMAND runs in a session of its own);
        what ``ready`` said."""
        out, err = state / f"killed-{during}.out", state / f"killed-{during}.err"
        proc = self.cloud.openstack_started("ndf-admin", *args, out=out,
                                            err=err)
        self.addCleanup(_kill_if_running, proc)
        deadline = time.monotonic() + ROLL_STEP_TIMEOUT
        said = ready()
        while said is None and proc.poll() is None:
            if time.monotonic() > deadline:
                self.fail(f"no {during} within {ROLL_STEP_TIMEOUT:.0f} s: "
                          f"{err.read_text()[-2000:]}")
            time.sleep(0.1)
            said = ready()
        self.assertIsNone(proc.poll(), f"the run ended before a {during}: "
                          f"{err.read_text()[-2000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.assertEqual(-signal.SIGKILL, proc.returncode)
        self.cloud.note(f"rolling: kill -9 during a {during} ({said})")
        return str(said)

    def migrations(self, server: str) -> list[dict[str, Any]]:
        """Nova's migration records of one server, newest first."""
        resp = self.admin.compute.get(f"/os-migrations?instance_uuid={server}",
                                      microversion="2.59")
        resp.raise_for_status()
        return [m for m in resp.json()["migrations"]
                if m["instance_uuid"] == server]

    @staticmethod
    def lines(path: Path) -> list[str]:
        try:
            return path.read_text().split()
        except FileNotFoundError:
            return []

    def test_cli_roles_and_ironic_scope(self) -> None:
        """Admin drains; member and reader are refused in one line, exit 1,
        and nothing changes; the Ironic listing works with the token the
        CLI picks although the project token lists no node."""
        before = self.host_row("fake-1")
        self.assertEqual("Active", before["Phase"])
        provider = self.node_uuid("fake-1")
        for cloud in ("ndf-member", "ndf-reader"):
            result = self.cli(cloud, "drain", "host", "start", "fake-1",
                              "--reason", "e2e refused", "--yes")
            err = result.stderr.strip()
            self.assertEqual(1, result.returncode, (cloud, err))
            self.assertEqual(1, len(err.splitlines()), (cloud, err))
            self.assertNotIn("Traceback", err)
            self.assertIn("admin role", err, cloud)
        self.assertEqual(before, self.host_row("fake-1"))
        self.assertNotIn("CUSTOM_DRAIN_HOST", self.provider_traits(provider))

        # Ironic's default policy: a project-scoped admin lists only its
        # project's nodes (none here), or is refused.
        nodes = self.cloud.state.facts["ironic_nodes"]
        resp = self.admin.baremetal.get("/nodes", microversion="1.1")
        project_sees = ([n["uuid"] for n in resp.json()["nodes"]]
                        if resp.status_code == 200 else [])
        self.assertEqual([], [u for u in project_sees if u in nodes],
                         resp.text)
        # The same clouds.yaml entry through the CLI: it asks Keystone
        # for a system-scoped token for Ironic (osc_plugin/scope.py).
        rows = json.loads(self.cli_ok("drain", "node", "show", *nodes,
                                      "-f", "json"))
        self.assertEqual(sorted(nodes), sorted(r["Node"] for r in rows))
        self.assertEqual({"ironic-compute"}, {r["Host"] for r in rows})

    def test_concurrent_boots_all_go_active(self) -> None:
        """``--min 4``: one request, four servers, each ACTIVE (SQLite under
        Nova left three in BUILD, 'database is locked')."""
        t0 = time.monotonic()
        ids = servers.boot_many(self.admin, self.image, "e2e-min4", 4)
        for server in ids:
            self.addCleanup(servers.delete, self.admin, server)
        self.assertEqual(4, len(ids))
        got = [servers.wait_settled(self.admin, s) for s in ids]
        self.assertEqual(["ACTIVE"] * 4, [g["status"] for g in got],
                         [servers.fault(g) for g in got])
        self.assertLessEqual({g[servers.HOST_FIELD] for g in got},
                             set(configs.FAKE_COMPUTES))
        self.cloud.note(f"--min 4: all ACTIVE in "
                        f"{time.monotonic() - t0:.1f} s")

    def test_disabled_host_is_avoided(self) -> None:
        self.assertActiveOn(self.boot("before-disable", "fake-1"), "fake-1")
        self.cli_ok("compute", "service", "set", "--disable",
                    "--disable-reason", "e2e", "fake-1", "nova-compute")
        self.addCleanup(self.cli_ok, "compute", "service", "set", "--enable",
                        "fake-1", "nova-compute")
        self.assertAvoided(self.boot("disabled", "fake-1"))

    def test_drain_host_end_to_end(self) -> None:
        """start, the boot that avoids it, migrate, stop nova-compute,
        finish: the service, the provider and the host mapping are gone."""
        server = self.boot("to-move", "fake-2")
        self.assertActiveOn(server, "fake-2")
        provider = self.node_uuid("fake-2")
        self.cli_ok("drain", "host", "start", "fake-2", "--reason",
                    "e2e drain", "--yes")
        self.assertIn("CUSTOM_DRAIN_HOST", self.provider_traits(provider))
        self.assertAvoided(self.boot("drained", "fake-2"))

        # An ACTIVE server live-migrates (nova/virt/fake.py live_migration
        # calls back at once; the two computes are separate processes).
        self.cli_ok("drain", "host", "migrate", "fake-2", "--yes")
        moved = servers.show(self.admin, server["id"])
        self.assertEqual("ACTIVE", moved["status"])
        self.assertNotEqual("fake-2", moved[servers.HOST_FIELD])

        # The runbook's "stop nova-compute", as the README does it.
        self.cloud.stop_process("nova-compute-fake-2")
        servers.wait_service(self.admin, "fake-2", "down")
        self.cli_ok("drain", "host", "finish", "fake-2", "--yes")
        self.assertIsNone(servers.compute_service(self.admin, "fake-2"))
        resp = self.admin.placement.get(f"/resource_providers/{provider}")
        self.assertEqual(404, resp.status_code, resp.text)
        hosts = self.cloud.nova_manage("cell_v2", "list_hosts")
        self.assertNotIn(" fake-2 ", hosts)
        self.assertIn(" fake-1 ", hosts)

    def test_killed_compute_is_avoided(self) -> None:
        """After service_down_time (30 s in the cloud's nova.conf); then
        ``up`` starts it again and it takes boots (a fake compute keeps its
        node identity: configs.write_node_identity)."""
        servers.wait_service(self.admin, "fake-3", "up")
        self.cloud.kill("nova-compute-fake-3")
        servers.wait_service(self.admin, "fake-3", "down")
        self.assertAvoided(self.boot("down", "fake-3"))
        took = self.cloud.up_again()
        servers.wait_service(self.admin, "fake-3", "up")
        self.assertActiveOn(self.boot("back", "fake-3"), "fake-3")
        self.cloud.note(f"killed compute back with `up` in {took:.1f} s")

    # == Workers: nova-scheduler's two forked workers =====================
    # tests/e2e/workers.py says how Nova 34 forks them and what SIGKILL and
    # SIGHUP do; the helpers are WorkersCase's (tests/e2e/workers_case.py).
    # Which worker served is read from the scheduler's log (the PID on
    # every line), never from a counter of ours. Each test leaves both
    # workers running with their view ready.
    def test_workers_both_serve_with_view_ready(self) -> None:
        parent, log = self.scheduler()
        pids = self.ready_workers(parent, log)
        t0 = time.monotonic()
        served = self.probe(log, pids)
        for line in served.values():
            self.assertIn(line.pid, pids)
            self.assertDecidedReady(log, line)
        # Each worker has a reader process of its own (the cloud's nova.conf
        # leaves baremetal_notifications_host_reader at its default, off):
        # every worker hears every event on a queue of its own (issue 41).
        # The parent, which serves nothing, stopped its own as it forked
        # them (new_workers found only the two workers among its children).
        self.reading_alone(pids)
        self.assertEqual(set(), workers.readers(parent))
        # Each on a queue of its own, and no reader ever found another on
        # its queue: the fork hooks once closed a worker's new slot lock,
        # and the next worker read the same queue (issue 41).
        def listening(pid: int) -> str:
            return workers.wait_for(f"worker {pid} listening",
                                    lambda: log.pools(pid) or None,
                                    timeout=60)[-1]
        queues = {pid: listening(pid) for pid in pids}
        self.assertEqual(len(pids), len(set(queues.values())), queues)
        self.assertFalse([x.msg for x in log.lines()
                          if x.pid in pids | {parent}
                          and workers.ANOTHER_READER in x.msg])
        for pid in pids:
            self.assertYields(pid)
        self.cloud.note(f"workers {sorted(pids)} served {len(served)} "
                        f"requests in {time.monotonic() - t0:.1f} s")

    def test_workers_killed_worker_is_replaced(self) -> None:
        parent, log = self.scheduler()
        before = self.ready_workers(parent, log)
        self.addCleanup(self.ready_workers, parent, log)
        # Either worker: each reads on its own, and its reader ends with it.
        self.reading_alone(before)
        victim = min(before)
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        (new,) = self.new_workers(parent, keep=before - {victim},
                                  gone=frozenset({victim})) - before
        forked = time.monotonic() - t0
        # At once, not waiting for its view: its first request must wait.
        self.probe(log, frozenset({new}))
        first = log.first_request(new)
        assert first is not None
        self.assertDecidedReady(log, first)
        # cotyledon/_service_manager.py _get_last_worker_died ("-9" here).
        self.assertTrue(log.contains(parent,
                                     f"Child {victim} killed by signal"))
        # A reader for each live worker again: the new one started its own
        # (the killed one's ended with it). Started from that worker's
        # event thread, it still runs +10 above the worker.
        self.reading_alone(before - {victim} | {new})
        self.assertYields(new)
        self.cloud.note(f"worker {victim} killed: {new} forked "
                        f"{forked:.1f} s later, served in "
                        f"{time.monotonic() - t0:.1f} s")

    def assertYields(self, worker: int) -> None:
        """Native threads, nova.conf alone: the worker's two event
        threads (taking batches in, applying them) run +10 above its
        other threads, and its reader +10 above the worker
        (nova_drain_filters/ironic_view/priority.py)."""
        # Here, not at the top: discovery imports tests.e2e before
        # tests.functional, and our package loads oslo.context, whose
        # request store must be made after Nova's harness chose eventlet
        # (tests/functional/test_concurrency_mode.py).
        from nova_drain_filters.ironic_view import priority
        threads = workers.niceness(worker)
        base = threads[worker]  # the main thread's TID is the PID
        lowered = min(19, base + priority.THREAD_NICE)
        self.assertEqual(2, sum(1 for nice in threads.values()
                                if nice == lowered), threads)
        self.assertEqual(set(), {nice for nice in threads.values()} - {
            base, lowered}, threads)
        want = min(19, base + priority.READER_NICE)
        for pid in workers.readers(worker):
            # A reader lowers itself once it has its settings: a worker
            # forked a moment ago may have started it only just now.
            workers.wait_for(
                f"reader {pid} of worker {worker} at niceness {want}",
                lambda pid=pid: (  # type: ignore[misc]
                    True if set(workers.niceness(pid).values()) == {want}
                    else None), timeout=30)

    def reading_alone(self, pids: set[int] | frozenset[int]) -> None:
        """Each worker has exactly one event reader among its children, as
        baremetal_notifications_host_reader off gives them; waits
        (bounded) for it."""
        def each() -> bool | None:
            return True if all(len(workers.readers(pid)) == 1
                               for pid in pids) else None
        workers.wait_for("one reader for each worker", each, timeout=60)

    def drained_boot(self, log: workers.SchedulerLog,
                     name: str) -> tuple[int, list[str]]:
        """Boot on the marked ``fake-1``: avoided. The worker that
        served it and what it logged for it (our pre-filter's traits,
        Nova's "no allocation candidates"), found by the request ID."""
        server = self.boot(name, "fake-1")
        self.assertAvoided(server)
        req = workers.request_id(self.admin, server["id"])

        def logged() -> list[workers.Line] | None:
            lines = log.of_request(req)
            return lines if any(workers.NO_CANDIDATES in x.msg
                                for x in lines) else None
        lines = workers.wait_for(f"the scheduler's lines for {req}",
                                 logged, timeout=30)
        self.assertEqual(1, len({x.pid for x in lines}), lines)
        msgs = [x.msg for x in lines if x.msg.startswith(workers.PREFILTER)
                or workers.NO_CANDIDATES in x.msg]
        self.assertTrue(any(x.startswith(workers.PREFILTER)
                            and "CUSTOM_DRAIN_HOST" in x for x in msgs), msgs)
        return lines[0].pid, msgs

    def test_workers_sighup_keeps_excluding(self) -> None:
        """A host marked drained is avoided by the workers SIGHUP brings:
        each logs the same for the request as the worker before."""
        parent, log = self.scheduler()
        before = self.ready_workers(parent, log)
        self.addCleanup(self.ready_workers, parent, log)
        # The drain's mark alone (the service stays enabled, so Nova's own
        # COMPUTE_STATUS_DISABLED does not hide it): only our pre-filter
        # excludes it. Straight in placement: the CLI costs 10 s a run here.
        provider = self.node_uuid("fake-1")
        workers.set_trait(self.admin, provider, "CUSTOM_DRAIN_HOST", True)
        self.addCleanup(workers.set_trait, self.admin, provider,
                        "CUSTOM_DRAIN_HOST", False)
        pid, verdict = self.drained_boot(log, "sighup-before")
        self.assertIn(pid, before)

        t0 = time.monotonic()
        os.kill(parent, signal.SIGHUP)  # the parent only, as an operator
        after = self.ready_workers(parent, log, gone=before)
        reloaded = time.monotonic() - t0
        seen: set[int] = set()
        for round_ in range(2 * workers.PROBE_ROUNDS):
            pid, again = self.drained_boot(log, f"sighup-after-{round_}")
            self.assertIn(pid, after)
            self.assertEqual(verdict, again)
            seen.add(pid)
            if seen == after:
                break
        self.assertEqual(after, seen)
        # Each old worker stopped itself gracefully (cotyledon's default
        # Service.reload); the parent forked the new ones and runs on.
        for old in before:
            self.assertTrue(log.contains(
                parent, f"Child {old} exited with status 0"), old)
        self.assertTrue(self.cloud.state.procs["nova-scheduler"].alive())
        self.cloud.note(f"SIGHUP: workers {sorted(before)} replaced by "
                        f"{sorted(after)} in {reloaded:.1f} s")

    # -- Ironic: maintenance by event, cleaning through Nova's driver ----
    # One node's life, in one test to boot and delete once (a baremetal
    # boot and its delete cost ~30 s of the tier). Nodes: bm-0 is put in
    # maintenance and back, deployed, deleted and left cleaning, with
    # automated cleaning on (it is available again
    # configs.CLEAN_SECONDS later).
    def test_ironic_node_in_maintenance_then_cleaning_is_avoided(self) -> None:
        """Maintenance, set in Ironic, excludes the node by event (the
        view lists Ironic every 600 s) in each worker; once unset a boot
        lands on it; its server deleted, the node cleans and a boot avoids
        it."""
        parent, log = self.scheduler()
        pids = self.ready_workers(parent, log)
        system = self.cloud.connect("ndf-system-admin")
        node = str(self.cloud.state.facts["ironic_nodes"][0])
        bm = system.baremetal
        baremetal.wait_available(system, node)  # a reused cloud's last clean
        reason = f"e2e-{uuid.uuid4().hex[:8]}"
        bm.set_node_maintenance(node, reason=reason)
        self.addCleanup(baremetal.end_maintenance, system, node)
        marked = time.monotonic()
        # Boots until each worker served one: RabbitMQ hands the calls to
        # the workers in turn, and one boot may land on the worker that
        # happened to hear the event (issue 41: two readers on one queue
        # split the events between the workers, and one boot passed).
        served = self.avoided_in_each(log, pids, node,
                                      f"maintenance ({reason})")
        self.cloud.note(f"maintenance by event: boots avoided in workers "
                        f"{sorted(served)}, {time.monotonic() - marked:.1f} "
                        "s after the mark")

        baremetal.end_maintenance(system, node)
        baremetal.wait_unreserved(self.admin, node)
        # Cleaning on for this node only (ironic/conductor/utils.py
        # skip_automated_cleaning reads node.automated_clean first); left
        # on: turning it off waits for the clean step's lock (409).
        bm.update_node(node, is_automated_clean_enabled=True)
        server = self.boot_on_node("deployed", node)
        self.assertEqual(("ACTIVE", node),
                         (server["status"], server[baremetal.NODE_FIELD]),
                         servers.fault(server))

        # nova/virt/ironic/driver.py IronicDriver._unprovision returns once
        # the node is CLEANING (or CLEAN WAIT); the fake clean step then
        # sleeps configs.CLEAN_SECONDS.
        servers.delete(self.admin, server["id"])
        deleted = time.monotonic()
        self.assertIn(baremetal.provision_state(system, node),
                      baremetal.CLEANING)
        self.assertAvoided(self.boot_on_node("cleaning", node))
        self.assertIn(baremetal.provision_state(system, node),
                      baremetal.CLEANING,
                      "the clean ended before the boot was judged")
        # Who excluded it: Nova's delete reserves a cleaning node
        # (ResourceTracker.update_usage -> IronicDriver.update_provider_tree,
        # _node_resources_used), so placement hides it before our filter.
        self.cloud.note(f"cleaning: boot avoided {time.monotonic() - deleted:.1f}"
                        f" s after the delete; placement reserved "
                        f"{baremetal.reserved(self.admin, node)}")

    def avoided_in_each(self, log: workers.SchedulerLog,
                        want: frozenset[int], node: str,
                        why: str) -> dict[int, workers.Line]:
        """Boots on Ironic ``node``, two at a time (bounded), until each
        worker of ``want`` served one; each avoided, its line naming
        ``why``. Each worker's first such line, by PID."""
        served: dict[int, workers.Line] = {}
        for round_ in range(workers.PROBE_ROUNDS):
            ids = [baremetal.boot(self.admin, self.image,
                                  f"e2e-avoided-{round_}-{i}", node)
                   for i in range(2)]
            for server in ids:
                self.addCleanup(servers.delete, self.admin, server)
            for server in ids:
                self.assertAvoided(servers.wait_settled(self.admin, server))
                # The line names this request and the reason: our filter
                # saw the node and rejected it; placement did not hide it
                # first (Nova's periodic reserves a node in maintenance,
                # see baremetal.reserved). Nothing listed Ironic in between
                # (600 s, configs.nova_conf), so the worker's view had it
                # from Ironic's notification.
                line = workers.wait_for(
                    f"the summary line of {server}",
                    functools.partial(log.request, server), timeout=30)
                self.assertIn(line.pid, want)
                self.assertIn("BaremetalAvailabilityFilter rejected 1 (1 x "
                              f"baremetal: {why})", line.msg)
                served.setdefault(line.pid, line)
            if want <= served.keys():
                return served
        self.fail(f"workers {sorted(want)} did not all serve a boot on "
                  f"{node}: {sorted(served)}")

    def boot_on_node(self, name: str, node: str) -> dict[str, Any]:
        """Boot a baremetal server that can only go to Ironic ``node``;
        the settled server (deleted at the end, if it is not by then)."""
        server = baremetal.boot(self.admin, self.image, f"e2e-{name}", node)
        self.addCleanup(servers.delete, self.admin, server)
        return servers.wait_settled(self.admin, server)
