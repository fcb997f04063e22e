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

"""``openstack drain host migrate``: parser, refusals, columns and rows."""
import argparse

from osc_lib import exceptions

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import tracking
from osc_plugin.v1 import migrate
from tests.unit.osc_plugin import fakes


def step(action: plan.Action = plan.Action.LIVE, **kw: object) -> plan.Step:
    return plan.Step("h1", "s1", "web", action, **kw)  # type: ignore[arg-type]


class TestParser(fakes.CommandTestCase):
    cls, prog = migrate.MigrateHost, "openstack drain host migrate"

    def test_defaults(self) -> None:
        args = self.parse("h1", "h2")
        self.assertEqual(["h1", "h2"], args.hosts)
        self.assertEqual({"concurrency": 2, "timeout": 3600,
                          "server_timeout": 900, "retries": 2},
                         {n: migrate._count(args, n)
                          for n in migrate.DEFAULTS})
        self.assertFalse(args.dry_run or args.yes)

    def test_options(self) -> None:
        args = self.parse("h1", "--concurrency", "4", "--timeout", "60",
                          "--server-timeout", "30", "--retries", "0",
                          "--dry-run", "--yes")
        self.assertEqual((4, 60, 30, 0), tuple(migrate._count(args, n) for n in (
            "concurrency", "timeout", "server_timeout", "retries")))
        self.assertTrue(args.dry_run and args.yes)

    def test_bad_counts_are_one_line_errors(self) -> None:
        for name, value in (("concurrency", "0"), ("concurrency", "x"),
                            ("retries", "-1"), ("timeout", "1.5")):
            args = argparse.Namespace(**{name: value})
            exc = self.assertRaises(exceptions.CommandError, migrate._count,
                                    args, name)
            self.assertIn(f"--{name.replace('_', '-')} {value!r}", str(exc))

    def test_needs_a_host(self) -> None:
        self.assertIn("required", self.parse_error())


class TestRefusal(fakes.CommandTestCase):
    def test_refusal(self) -> None:
        service = decisions.ServiceFacts("h1", True, False, True, "drain: x")
        self.assertEqual("", migrate.refusal(drain.HostFacts("h1", service)))
        self.assertIn("h1: no compute service",
                      migrate.refusal(drain.HostFacts("h1", None)))
        other = decisions.ServiceFacts("h1", True, False, True, "ticket 42")
        self.assertEqual(
            "h1: not draining: run 'openstack drain host start h1 --reason "
            "...' first", migrate.refusal(drain.HostFacts("h1", other)))


class TestRows(fakes.CommandTestCase):
    def test_columns(self) -> None:
        self.assertEqual(("Host", "Server", "Name", "Action", "Result",
                          "Destination", "Detail"), migrate.COLUMNS)

    def test_move_and_stay_rows(self) -> None:
        move = tracking.Move(step(), outcome=plan.Outcome.MOVED,
                             destination="h3")
        self.assertEqual(("h1", "s1", "web", "live", "moved", "h3", ""),
                         migrate.move_row(move))
        failed = tracking.Move(step(plan.Action.COLD),
                               outcome=plan.Outcome.TIMED_OUT, detail="x")
        self.assertEqual("timed out, aborted", migrate.move_row(failed)[4])
        stays = step(plan.Action.NONE, why=plan.Why.TASK, detail="rebooting")
        self.assertEqual(("h1", "s1", "web", "unmovable", "unmovable", "",
                          "a task is in progress: rebooting"),
                         migrate.stay_row(stays))

    def test_every_reason_and_outcome_has_words(self) -> None:
        self.assertEqual(set(plan.Why), set(migrate.WHY))
        self.assertEqual(set(plan.Outcome), set(migrate.RESULT))

    def test_plan_lines(self) -> None:
        self.assertIn("live-migrate", migrate.plan_line(tracking.Move(step())))
        self.assertIn("then confirm", migrate.plan_line(tracking.Move(
            step(plan.Action.COLD))))
        record = server_moves.MigrationRecord(7, "m", "s1", "running",
                                              "live-migration", "h1", "h2")
        self.assertIn("pick up its live-migration (running), posting nothing",
                      migrate.plan_line(tracking.Move(step(), record=record)))


class TestProgress(fakes.CommandTestCase):
    def test_lines_and_counts(self) -> None:
        plain = fakes.Stream()
        migrate.Progress(plain, 2)(tracking.Event.STARTED,
                                   tracking.Move(step()), "attempt 1")
        self.assertEqual("migrate: h1: web (s1): started live migration "
                         "(attempt 1)\n", plain.getvalue())
        tty = fakes.Stream(tty=True)
        progress = migrate.Progress(tty, 2)
        progress(tracking.Event.COMPLETED, tracking.Move(step()), "h2")
        self.assertIn("migrate: 1/2 over, 1 completed", tty.getvalue())
        progress.close()
        self.assertTrue(tty.getvalue().endswith("completed\n"))
