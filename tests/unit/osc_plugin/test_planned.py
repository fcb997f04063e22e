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

"""PlannedChange, the one plan/ask/run path, on a toy command."""
import argparse

from osc_lib import exceptions

from osc_plugin.v1 import planned
from tests.unit.osc_plugin import fakes


class Toy(planned.PlannedChange[str]):
    """Carries out the plan the test gives it; a step "bad" fails."""

    columns = ("Step", "Result")
    plan: planned.Plan[str] = planned.Plan()
    ran: list[list[str]]

    def make_plan(self, parsed_args: argparse.Namespace) -> planned.Plan[str]:
        self.ran = []
        return self.plan

    def step_row(self, step: str, result: str) -> planned.Row:
        return (step, result)

    def run_steps(self, steps: list[str],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        self.ran.append(list(steps))
        return ([(s, "failed" if s == "bad" else "done") for s in steps],
                [f"{s}: boom" for s in steps if s == "bad"])


class BudgetedToy(Toy):
    budgeted = True


class Refusing(Toy):
    def make_plan(self, parsed_args: argparse.Namespace) -> planned.Plan[str]:
        self.ran = []
        raise exceptions.CommandError("nothing changed: no such host")


PLAN = planned.Plan(steps=["a", "b"], notes=["mind the gap"],
                    rows=[("c", "nothing to do")],
                    failures=["d: refused"])


class TestPlannedChange(fakes.CommandTestCase):
    cls, prog = Toy, "openstack drain toy"

    def setUp(self) -> None:
        super().setUp()
        self.patch(Toy, "plan", PLAN)

    def test_parser(self) -> None:
        args = self.parse()
        self.assertEqual((False, False), (args.dry_run, args.yes))
        self.assertFalse(hasattr(args, "max_fraction"))
        self.cls = BudgetedToy
        self.assertEqual(planned.common.DEFAULT_FRACTION,
                         self.parse().max_fraction)
        self.assertEqual(0.5, self.parse("--max-fraction", "0.5").max_fraction)

    def test_dry_run_shows_notes_and_plan_and_runs_nothing(self) -> None:
        columns, rows = self.take(None, "--dry-run", "--yes")
        self.assertEqual(("Step", "Result"), columns)
        self.assertEqual([("c", "nothing to do"), ("a", "planned"),
                          ("b", "planned")], rows)
        self.assertEqual([], self.cmd.ran)
        self.assertEqual("Note: mind the gap\nPlan:\n  a\n  b\n",
                         self.app.stderr.getvalue())
        self.assertEqual(["d: refused"], self.cmd.failures)

    def test_yes_runs_every_step_once(self) -> None:
        _columns, rows = self.take(None, "--yes")
        self.assertEqual([["a", "b"]], self.cmd.ran)
        self.assertEqual([("c", "nothing to do"), ("a", "done"),
                          ("b", "done")], rows)
        self.assertNotIn("[y/N]", self.app.stderr.getvalue())

    def test_without_a_terminal_or_yes_nothing_runs(self) -> None:
        cmd = self.command(answer="y\n")
        cmd.failures = []
        exc = self.assertRaises(exceptions.CommandError, cmd.take_action,
                                self.parse(cmd=cmd))
        self.assertEqual(
            "refusing to change anything without a terminal to ask on: pass "
            "--yes, or --dry-run to see the plan", str(exc))
        self.assertEqual([], cmd.ran)

    def test_terminal_no_is_not_done(self) -> None:
        _columns, rows = self.take(None, answer="n\n", tty=True)
        self.assertEqual([], self.cmd.ran)
        self.assertEqual([("c", "nothing to do"), ("a", "not done"),
                          ("b", "not done")], rows)
        self.assertTrue(self.app.stderr.getvalue().endswith(
            "Carry out these 2 step(s)? [y/N] "))
        _columns, rows = self.take(None, answer="y\n", tty=True)
        self.assertEqual([["a", "b"]], self.cmd.ran)

    def test_lines_when_the_plan_shows_steps_its_own_way(self) -> None:
        self.patch(Toy, "plan", planned.Plan(steps=["a"], lines=["x", "y"]))
        self.take(None, "--dry-run")
        self.assertEqual("Plan:\n  x\n  y\n", self.app.stderr.getvalue())

    def test_empty_plan_asks_nothing_and_shows_no_notes(self) -> None:
        self.patch(Toy, "plan", planned.Plan(notes=["unseen"],
                                             rows=[("c", "nothing to do")]))
        _columns, rows = self.take(None)  # no terminal, no --yes: fine
        self.assertEqual([("c", "nothing to do")], rows)
        self.assertEqual("nothing to do\n", self.app.stderr.getvalue())
        self.assertEqual([], self.cmd.ran)

    def test_failures_of_plan_and_run_exit_1(self) -> None:
        self.patch(Toy, "plan", planned.Plan(steps=["a", "bad"],
                                             failures=["d: refused"]))
        self.assertEqual(1, self.run_cmd(None, "--yes"))
        self.assertEqual("a done\nbad failed\n", self.app.stdout.getvalue())
        self.assertTrue(self.app.stderr.getvalue().endswith(
            "failed: d: refused\nfailed: bad: boom\n2 step(s) failed\n"))
        self.patch(Toy, "plan", planned.Plan(steps=["a"]))
        self.assertEqual(0, self.run_cmd(None, "--yes"))

    def test_refused_plan_runs_nothing(self) -> None:
        self.cls = Refusing
        cmd = self.command()
        cmd.failures = []
        exc = self.assertRaises(exceptions.CommandError, cmd.take_action,
                                self.parse("--yes", cmd=cmd))
        self.assertEqual("nothing changed: no such host", str(exc))
        self.assertEqual([], cmd.ran)

    def test_budget_refuses_before_running(self) -> None:
        self.cls = BudgetedToy
        self.patch(Toy, "plan", planned.Plan(
            steps=["a", "b"], budget=planned.Budget(2, 5, "compute nodes")))
        exc = self.assertRaises(exceptions.CommandError, self.take, None,
                                "--yes")
        self.assertIn("refusing to act on 2 of 5 compute nodes", str(exc))
        _columns, rows = self.take(None, "--yes", "--max-fraction", "0.4")
        self.assertEqual([["a", "b"]], self.cmd.ran)
        _columns, rows = self.take(None, "--dry-run")
        self.assertEqual([("a", "planned"), ("b", "planned")], rows)
        self.assertIn("A run without --dry-run would stop: refusing to act "
                      "on 2 of 5", self.app.stderr.getvalue())
        # An unbudgeted command ignores a budget it was given.
        self.cls = Toy
        self.take(None, "--yes")
        self.assertEqual([["a", "b"]], self.cmd.ran)
