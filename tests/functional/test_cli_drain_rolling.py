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


"""``openstack drain rolling`` in Nova's harness: six computes, real
migrations through Nova's scheduler, COMMAND through the real shell.

What COMMAND sees is taken when it starts (``hook.start`` is wrapped):
the instances Nova has on the host at that moment, which must be none.
"""
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import fixtures
from nova import context as nova_context
from nova import objects
from testtools import content as testtools_content

from nova_drain_filters.rolling import hook
from tests.functional import migrate_base

HOSTS = tuple(f"host{n}" for n in range(1, 7))


class RollingTestBase(migrate_base.MigrateTestBase):
    HOSTS = HOSTS
    HOLD = 0.1

    def setUp(self) -> None:
        # A heartbeat a second: 'wait up' needs one after COMMAND ends.
        self.flags(report_interval=1)
        super().setUp()
        self.state = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.state, True)
        self.ran = self.state / "ran"
        #: (host, instances Nova has on it) as each COMMAND starts.
        self.seen: list[tuple[str, list[str]]] = []
        real_start = hook.start

        def start(command: str, host: str, directory: Path,
                  timeout: float) -> hook.Started:
            ctxt = nova_context.get_admin_context()
            self.seen.append((host, [i.uuid for i in objects.InstanceList
                                     .get_by_host(ctxt, host)]))
            self.on_start(host)
            return real_start(command, host, directory, timeout)
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.rolling.hook.start", start))

    def on_start(self, host: str) -> None:
        """Called as COMMAND starts on ``host``."""

    def roll(self, *argv: str, rc: int = 0
             ) -> tuple[dict[str, dict[str, Any]], Any]:
        run = self.cli("drain", "rolling", *argv, "--state-dir",
                       str(self.state), "--yes", "-f", "json")
        self.assertEqual(rc, run.rc, run)
        self.assertNotIn("Traceback", run.stderr)
        rows = json.loads(run.stdout) if run.stdout.strip() else []
        return {r["Host"]: r for r in rows}, run

    def commands(self) -> list[str]:
        return self.ran.read_text().split() if self.ran.exists() else []

    def service(self, host: str) -> dict[str, Any]:
        (found,) = [s for s in self.admin_api.get_services(
            binary="nova-compute") if s["host"] == host]
        return dict(found)


class CleanRollTest(RollingTestBase):
    def test_three_batches_of_two(self) -> None:
        servers = [self.boot_on(h) for h in HOSTS]
        spread = self.group("spread", "anti-affinity")
        members = [self.boot_in(spread, h) for h in ("host1", "host2")]
        began = time.monotonic()
        rows, run = self.roll("host1", "host2", "host3", "host4", "host5",
                              "host6", "--batch", "2", "--run",
                              f"echo {{host}} >> {self.ran}")
        elapsed = time.monotonic() - began
        self.assertEqual({"done"}, {r["Result"] for r in rows.values()})
        self.assertEqual([1, 1, 2, 2, 3, 3],
                         [rows[h]["Batch"] for h in HOSTS])
        # Every COMMAND once, and never with a server on its host.
        self.assertEqual(sorted(HOSTS), sorted(self.commands()))
        self.assertEqual([(h, []) for h in HOSTS], self.seen)
        for host in HOSTS:
            self.assertEqual("enabled", self.service(host)["status"], host)
        for server in servers + members:
            self.assertEqual("ACTIVE", self.server(server)["status"])
        where = [self.server(m)["OS-EXT-SRV-ATTR:host"] for m in members]
        self.assertEqual(2, len(set(where)), where)
        # The trait is gone from every provider: nothing left marked.
        for host in HOSTS:
            rp = self._get_provider_uuid_by_host(host)
            self.assertNotIn("CUSTOM_DRAIN_HOST",
                             self._get_provider_traits(rp))
        self.assertIn("rolling: batch 3:", run.stderr)
        self.addDetail("timeline", testtools_content.text_content(
            timeline(self.state, elapsed)))


def timeline(state: Path, elapsed: float) -> str:
    """The roll's wall time beside the sum of its parts, from its journal:
    per batch, drain and migrate (the first event to COMMAND's start), the
    COMMANDs, and the wait until the hosts reported again."""
    (path,) = state.glob("*/journal.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    at: dict[tuple[str, str], float] = {}
    for event in events:
        at.setdefault((event["host"], event["event"]), event["time"])
    hosts = sorted({e["host"] for e in events})
    parts = {"drain and migrate": 0.0, "command": 0.0, "wait up": 0.0}
    for batch in range(0, len(hosts), 2):
        pair = hosts[batch:batch + 2]
        first = min(at[(h, "drained")] for h in pair)
        started = max(at[(h, "command started")] for h in pair)
        ended = max(at[(h, "command ended")] for h in pair)
        up = max(at[(h, "up")] for h in pair)
        parts["drain and migrate"] += started - first
        parts["command"] += ended - started
        parts["wait up"] += up - ended
    return (f"wall {elapsed:.1f} s; parts " + ", ".join(
        f"{k} {v:.1f} s" for k, v in parts.items())
        + f"; sum {sum(parts.values()):.1f} s")


class FailingCommandTest(RollingTestBase):
    HOSTS = HOSTS[:4]

    def test_stops_at_the_third_host_and_resumes_there(self) -> None:
        for host in self.HOSTS:
            self.boot_on(host)
        fixed = self.state / "fixed"
        command = (f"echo {{host}} >> {self.ran}; test {{host}} != host3 "
                   f"|| test -e {fixed} || {{ echo disk full >&2; exit 3; }}")
        rows, run = self.roll(*self.HOSTS, "--run", command, rc=1)
        self.assertEqual(["done", "done", "failed", "not reached"],
                         [rows[h]["Result"] for h in self.HOSTS])
        self.assertIn("disk full", rows["host3"]["Detail"])
        self.assertIn("host3: command: COMMAND exited with 3", run.stderr)
        self.assertEqual(("disabled", "drain: rolling maintenance"),
                         (self.service("host3")["status"],
                          self.service("host3")["disabled_reason"]))
        for host in ("host1", "host2", "host4"):
            self.assertEqual("enabled", self.service(host)["status"])
        fixed.touch()
        rows, _run = self.roll(*self.HOSTS, "--run", command)
        self.assertEqual({"done"}, {r["Result"] for r in rows.values()})
        self.assertEqual(["host1", "host2", "host3", "host3", "host4"],
                         sorted(self.commands()))
        self.assertEqual("enabled", self.service("host3")["status"])


class HostNotBackTest(RollingTestBase):
    HOSTS = HOSTS[:3]

    def on_start(self, host: str) -> None:
        if host == "host2":  # it never reports again
            self.computes["host2"].stop()

    def test_a_host_that_does_not_come_back_stays_disabled(self) -> None:
        rows, run = self.roll(*self.HOSTS, "--run", "true {host}",
                              "--wait-up", "5", rc=1)
        self.assertEqual(["done", "failed", "not reached"],
                         [rows[h]["Result"] for h in self.HOSTS])
        self.assertEqual("wait up", rows["host2"]["Step"])
        self.assertEqual("disabled", self.service("host2")["status"])
        self.assertEqual("enabled", self.service("host1")["status"])


class InterruptedTest(RollingTestBase):
    HOSTS = HOSTS[:3]

    def test_a_run_cut_off_in_a_migration_and_in_a_command(self) -> None:
        server = self.boot_on("host1")
        command = f"sleep 1; echo {{host}} >> {self.ran}"
        # Cut off once a migration is posted: it goes on in Nova.
        with fixtures.MonkeyPatch(
                "osc_plugin.v1.migrate.Progress.__call__", _interrupt):
            self.roll(*self.HOSTS, "--run", command, rc=130)
        self.assertEqual(1, len(self.wait_for(
            "the migration's record", lambda: self.records(server))))
        # Cut off once the COMMAND started: it goes on in its session.
        self.on_start = lambda host: None
        with fixtures.MonkeyPatch(
                "nova_drain_filters.rolling.runner.Runner._commands",
                _start_then_interrupt):
            self.roll(*self.HOSTS, "--run", command, rc=130)
        rows, _run = self.roll(*self.HOSTS, "--run", command)
        self.assertEqual({"done"}, {r["Result"] for r in rows.values()})
        self.assertEqual(sorted(self.HOSTS), sorted(self.commands()))
        # It moved once from each host it was on when that host's batch
        # came (and it may land on a later batch's host): never twice
        # from one host.
        sources = [m.source_compute for m in self.records(server)]
        self.assertEqual("host1", sources[0])
        self.assertEqual(len(sources), len(set(sources)), sources)
        self.assertEqual("ACTIVE", self.server(server)["status"])


def _interrupt(*args: Any) -> None:
    raise KeyboardInterrupt


def _start_then_interrupt(self: Any, number: int, hosts: list[str],
                          waiting: dict[str, Any]) -> list[str]:
    for host in hosts:
        self._start(number, host)
    raise KeyboardInterrupt

