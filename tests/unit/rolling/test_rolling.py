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


import dataclasses
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import fixtures
import testtools

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters.rolling import hook
from nova_drain_filters.rolling import journal
from nova_drain_filters.rolling import runner
from nova_drain_filters.rolling import schedule
from nova_drain_filters.rolling.schedule import Next
from nova_drain_filters.rolling.schedule import Outcome
from nova_drain_filters.rolling.schedule import Progress
from tests.unit import rolling_fakes


def facts(disabled: bool = False, reason: str | None = None
          ) -> drain.HostFacts:
    return drain.HostFacts("h1", decisions.ServiceFacts(
        host="h1", disabled=disabled, forced_down=False, is_up=True,
        disabled_reason=reason))


class ScheduleTest(testtools.TestCase):
    def test_bad_input_is_one_line_naming_it(self) -> None:
        self.assertIn("{host}", schedule.validate("reboot", 1, 1, 1))
        self.assertIn("--batch 0", schedule.validate("x {host}", 0, 1, 1))
        self.assertIn("--hook-timeout 0",
                      schedule.validate("x {host}", 1, 0, 1))
        self.assertIn("--wait-up 0", schedule.validate("x {host}", 1, 1, 0))
        self.assertIsNone(schedule.validate("x {host}", 1, 1, 1))

    def test_batches_are_stable_whatever_the_order_given(self) -> None:
        self.assertEqual([["a", "b"], ["c", "d"], ["e"]],
                         schedule.batches(["e", "c", "a", "d", "b", "a"], 2))

    def test_the_host_is_quoted_for_the_shell(self) -> None:
        self.assertEqual("ssh 'a b' reboot; echo 'a b'",
                         schedule.command_for("ssh {host} reboot; echo {host}",
                                              "a b"))

    def test_next_step(self) -> None:
        ours = facts(True, "drain: patching")
        theirs = facts(True, "broken disk")
        for progress, host, expected in (
                (Progress(), facts(), Next.DRAIN),
                (Progress(), ours, Next.DRAIN),
                (Progress(), theirs, Next.FOREIGN),
                # The run drained it: its own even if the reason changed.
                (Progress(changed=True), theirs, Next.COMMAND),
                (Progress(changed=True, started={"pid": 1}), ours,
                 Next.WAIT_COMMAND),
                (Progress(changed=True, started={"pid": 1}, rc=2), ours,
                 Next.COMMAND),
                (Progress(changed=True, started={"pid": 1}, rc=0), ours,
                 Next.WAIT_UP),
                (Progress(changed=True, rc=0, up=True, finished=True),
                 facts(), Next.NOTHING)):
            self.assertEqual(expected, schedule.next_step(progress, host),
                             (progress, host))


class JournalTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.dir = Path(self.useFixture(
            fixtures.TempDir()).path) / "run"
        self.journal = journal.Journal(self.dir)

    def test_events_make_progress(self) -> None:
        self.journal.record("h1", journal.CHANGED, changed=True)
        self.journal.record("h1", journal.STARTED, pid=5, log="l", rc="r")
        self.journal.record("h1", journal.ENDED, status=3)
        self.journal.record("h2", journal.CHANGED, changed=False)
        self.assertEqual({
            "h1": Progress(changed=True, started={
                "pid": 5, "log": "l", "rc": "r", "boot": None, "since": None},
                rc=3),
            "h2": Progress(changed=False)}, self.journal.progress())
        # A new COMMAND clears the last one's status.
        self.journal.record("h1", journal.STARTED, pid=6, log="l", rc="r")
        self.assertIsNone(self.journal.progress()["h1"].rc)
        self.assertEqual(0o600, self.journal.path.stat().st_mode & 0o777)

    def test_a_line_cut_short_by_a_crash_is_ignored(self) -> None:
        self.journal.record("h1", journal.CHANGED, changed=True)
        with open(self.journal.path, "a") as f:
            f.write('{"host": "h1", "event": "fin')
        self.assertEqual({"h1": Progress(changed=True)},
                         self.journal.progress())

    def test_the_same_command_line_finds_the_same_run(self) -> None:
        root = Path("/r")
        self.assertEqual(journal.run_dir(root, ["b", "a"], "x {host}", "c"),
                         journal.run_dir(root, ["a", "b", "a"], "x {host}",
                                         "c"))
        self.assertNotEqual(journal.run_dir(root, ["a"], "x {host}", "c"),
                            journal.run_dir(root, ["a"], "y {host}", "c"))


def wait(started: hook.Started, seconds: float = 20.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = hook.status(started)
        if status is not None:
            return status
        time.sleep(0.05)
    raise AssertionError(f"{started} did not end in {seconds} s")


class HookTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_status_and_log(self) -> None:
        started = hook.start("echo patched h1; echo oops >&2; exit 3", "h1",
                             self.dir, 10)
        self.assertEqual(3, wait(started))
        self.assertEqual("patched h1 oops", hook.tail(started.log))

    def test_timeout(self) -> None:
        started = hook.start("sleep 30", "h1", self.dir, 0.3)
        self.assertEqual(hook.TIMED_OUT, wait(started))

    def test_it_outlives_its_starter_and_its_status_is_kept(self) -> None:
        # In its own session: a Ctrl-C or kill of the openstack process
        # (its process group) does not reach it.
        started = hook.start("sleep 0.5; exit 0", "h1", self.dir, 10)
        self.assertNotEqual(os.getpgid(0), os.getpgid(started.pid))
        self.assertEqual(0, wait(started))

    def test_a_shell_gone_without_a_status_is_interrupted(self) -> None:
        started = hook.start("sleep 30", "h1", self.dir, 60)
        os.killpg(started.pid, signal.SIGKILL)  # as a reboot would
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if hook.status(started) is None:
                    time.sleep(0.05)
                    continue
            except hook.Interrupted:
                return
        self.fail("not seen as interrupted")


class RunnerTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.cloud = rolling_fakes.FakeCloud("h1", "h2", "h3", "h4")
        self.cloud.hosts["h1"].servers = ("s1",)
        self.lines: list[str] = []
        self.ran = self.dir / "ran"

    def roll(self, command: str, batch: int = 2,
             wait_up: float = 5.0) -> list[runner.HostResult]:
        options = runner.Options(
            command=command, reason="patching", hook_timeout=10,
            wait_up=wait_up)
        return runner.Runner(
            self.cloud, journal.Journal(self.dir / "run"), options,
            self.lines.append, sleep=lambda s: time.sleep(0.02)).run(
                schedule.batches(list(self.cloud.hosts), batch))

    def commands(self) -> list[str]:
        return self.ran.read_text().split() if self.ran.exists() else []

    def test_a_clean_roll(self) -> None:
        rows = self.roll(f"echo {{host}} >> {self.ran}")
        self.assertEqual([Outcome.DONE] * 4, [r.outcome for r in rows])
        self.assertEqual(["h1", "h2", "h3", "h4"], sorted(self.commands()))
        # Drained before its COMMAND, put back after: all enabled, unmarked.
        for host in self.cloud.hosts.values():
            self.assertEqual((False, False, ()),
                             (host.disabled, host.marked, host.servers))
        self.assertEqual([["h1", "h2"], ["h3", "h4"]], self.cloud.migrated)
        # Each batch checked with the later batches' hosts to avoid.
        self.assertEqual([(["h1", "h2"], ["h3", "h4"]), (["h3", "h4"], [])],
                         self.cloud.checked)
        # Once more: nothing runs again.
        self.lines.clear()
        rows = self.roll(f"echo {{host}} >> {self.ran}")
        self.assertEqual(4, len(self.commands()))
        self.assertEqual({"finished by an earlier run"},
                         {r.detail for r in rows})

    def test_a_failing_command_stops_the_run_and_resumes_there(self) -> None:
        fixed = self.dir / "fixed"
        command = (f"echo {{host}} >> {self.ran}; test {{host}} != h3 "
                   f"|| test -e {fixed} || {{ echo disk full; exit 4; }}")
        rows = {r.host: r for r in self.roll(command)}
        self.assertEqual(Outcome.FAILED, rows["h3"].outcome)
        self.assertIn("COMMAND exited with 4", rows["h3"].detail)
        self.assertIn("disk full", rows["h3"].detail)
        self.assertEqual(Outcome.DONE, rows["h4"].outcome)
        # The failed host stays disabled with its drain reason; the rest
        # of the batch is put back.
        self.assertEqual((True, "drain: patching"),
                         (self.cloud.hosts["h3"].disabled,
                          self.cloud.hosts["h3"].reason))
        self.assertFalse(self.cloud.hosts["h4"].disabled)
        fixed.touch()
        rows = {r.host: r for r in self.roll(command)}
        self.assertEqual([Outcome.DONE] * 4,
                         [rows[h].outcome for h in sorted(rows)])
        # h1, h2 and h4 ran once; h3 twice (failed, then fixed).
        self.assertEqual(["h1", "h2", "h3", "h3", "h4"],
                         sorted(self.commands()))
        self.assertFalse(self.cloud.hosts["h3"].disabled)

    def test_a_failing_command_stops_before_the_next_batch(self) -> None:
        rows = {r.host: r for r in self.roll(
            f"echo {{host}} >> {self.ran}; test {{host}} != h1")}
        self.assertEqual(Outcome.FAILED, rows["h1"].outcome)
        self.assertEqual(Outcome.DONE, rows["h2"].outcome)
        self.assertEqual([Outcome.NOT_REACHED] * 2,
                         [rows["h3"].outcome, rows["h4"].outcome])
        self.assertEqual(["h1", "h2"], sorted(self.commands()))

    def test_a_batch_whose_servers_have_nowhere_to_go_is_refused(self) -> None:
        self.cloud.nowhere["h1"] = ["s1 needs 64 GB of MEMORY_MB"]
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}")}
        self.assertEqual(Outcome.REFUSED, rows["h1"].outcome)
        self.assertIn("s1 needs 64 GB", rows["h1"].detail)
        self.assertEqual([], self.commands())
        self.assertEqual([], self.cloud.steps)  # nothing changed

    def test_a_migration_left_unfinished_skips_the_command(self) -> None:
        self.cloud.fail_migrate["h1"] = "1 server(s) still on it"
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}")}
        self.assertEqual((Outcome.FAILED, "migrate"),
                         (rows["h1"].outcome, rows["h1"].step))
        # Never a COMMAND on a host with a server on it.
        self.assertEqual(["h2"], self.commands())
        self.assertTrue(self.cloud.hosts["h1"].disabled)

    def test_a_host_that_does_not_come_back(self) -> None:
        self.cloud.hosts["h2"].silent = 10 ** 6
        rows = {r.host: r for r in self.roll(
            f"echo {{host}} >> {self.ran}", wait_up=0.3)}
        self.assertEqual((Outcome.FAILED, "wait up"),
                         (rows["h2"].outcome, rows["h2"].step))
        self.assertTrue(self.cloud.hosts["h2"].disabled)
        self.assertFalse(self.cloud.hosts["h1"].disabled)
        self.assertEqual(Outcome.NOT_REACHED, rows["h3"].outcome)

    def test_someone_elses_disable_is_never_touched(self) -> None:
        self.cloud.hosts["h3"].disabled = True
        self.cloud.hosts["h3"].reason = "RMA 1234"
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}",
                                             batch=1)}
        self.assertEqual(Outcome.SKIPPED, rows["h3"].outcome)
        self.assertIn("RMA 1234", rows["h3"].detail)
        self.assertEqual((True, "RMA 1234", False),
                         (self.cloud.hosts["h3"].disabled,
                          self.cloud.hosts["h3"].reason,
                          self.cloud.hosts["h3"].marked))
        self.assertNotIn("h3", self.commands())

    def test_a_host_drained_before_the_run_is_left_drained(self) -> None:
        self.cloud.hosts["h2"].disabled = True
        self.cloud.hosts["h2"].reason = "drain: earlier"
        self.cloud.hosts["h2"].marked = True
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}")}
        self.assertEqual(Outcome.DONE, rows["h2"].outcome)
        self.assertIn("left draining", rows["h2"].detail)
        self.assertTrue(self.cloud.hosts["h2"].disabled)

    def test_a_command_still_running_is_waited_for_not_run_again(self) -> None:
        # An earlier run was killed while h1's COMMAND ran: the COMMAND
        # went on in its own session.
        run = journal.Journal(self.dir / "run")
        run.record("h1", journal.CHANGED, changed=True)
        self.cloud.hosts["h1"].disabled = True
        self.cloud.hosts["h1"].reason = "drain: patching"
        self.cloud.hosts["h1"].servers = ()
        started = hook.start(f"sleep 0.5; echo h1 >> {self.ran}", "h1",
                             run.directory, 10)
        run.record("h1", journal.STARTED, **dataclasses.asdict(started))
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}")}
        self.assertEqual([Outcome.DONE] * 4,
                         [rows[h].outcome for h in sorted(rows)])
        self.assertEqual(["h1", "h2", "h3", "h4"], sorted(self.commands()))

    def test_a_command_cut_off_by_a_reboot_runs_again(self) -> None:
        run = journal.Journal(self.dir / "run")
        run.record("h1", journal.CHANGED, changed=True)
        self.cloud.hosts["h1"].disabled = True
        self.cloud.hosts["h1"].reason = "drain: patching"
        started = hook.start("exec sleep 30", "h1", run.directory, 60)
        os.killpg(started.pid, signal.SIGKILL)
        run.record("h1", journal.STARTED, **dataclasses.asdict(started))
        rows = {r.host: r for r in self.roll(f"echo {{host}} >> {self.ran}")}
        self.assertEqual(Outcome.DONE, rows["h1"].outcome)
        self.assertEqual(["h1", "h2", "h3", "h4"], sorted(self.commands()))
        self.assertTrue(any("no exit status: running COMMAND again" in line
                            for line in self.lines), self.lines)
