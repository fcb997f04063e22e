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

"""The one plan, ask and run path of every command that changes something.

A changing command decides what it would do (a :class:`Plan` of steps),
shows that plan on stderr, asks (or takes ``--yes``, or stops at
``--dry-run``), carries the steps out, and reports every failure at the end
with exit status 1. :class:`PlannedChange` does all of that but the
deciding and the doing, which are the command's own.
"""
import argparse
import dataclasses
from typing import Any
from typing import ClassVar
from typing import Generic
from typing import NamedTuple
from typing import TypeVar

from osc_lib import exceptions

from osc_plugin import client as drain_client_mod
from osc_plugin.v1 import common
from osc_plugin.v1 import results

#: One line of a changing command's table.
Row = tuple[Any, ...]
#: The rows of the steps carried out, and one line per failed step.
Ran = tuple[list[Row], list[str]]
S = TypeVar("S")


class Budget(NamedTuple):
    """A disruption budget: records the plan touches, records in all."""

    acting: int
    total: int
    #: What they are, for the refusal ("compute nodes").
    what: str


@dataclasses.dataclass
class Plan(Generic[S]):
    """What a command would do, and what to show the operator with it."""

    #: The steps, in the order they run.
    steps: list[S] = dataclasses.field(default_factory=list)
    #: The plan as shown, one line per change; None: ``str()`` of each step.
    lines: list[str] | None = None
    #: Printed as "Note: ..." before the plan, when there is one.
    notes: list[str] = dataclasses.field(default_factory=list)
    #: Rows shown whatever the answer, before the steps' (nothing to do...).
    rows: list[Row] = dataclasses.field(default_factory=list)
    #: Refusals that do not stop the plan but make the run exit 1.
    failures: list[str] = dataclasses.field(default_factory=list)
    #: Checked with --max-fraction by a ``budgeted`` command.
    budget: Budget | None = None

    @property
    def shown(self) -> list[str]:
        return self.lines if self.lines is not None else [
            str(s) for s in self.steps]


def add_change_options(
        parser: argparse.ArgumentParser,
        dry_run_help: str = "print the plan on stderr and change nothing",
        yes_help: str = "do not ask before carrying out the plan (needed "
                        "when stdin is not a terminal)") -> None:
    """``--dry-run`` and ``--yes``, as every changing command takes them."""
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument("--yes", action="store_true", help=yes_help)


class PlannedChange(common.Table, Generic[S]):
    """Shows its plan, asks, acts, and reports every failure at the end.

    A new changing command is one module with one subclass, and one entry
    point in ``setup.cfg``::

        class MigrateHost(planned.PlannedChange[migrate.Step]):
            '''Help text: the first line, then what it does.'''

            columns = ("Host", "Step", "Target", "Result")

            def make_plan(self, parsed_args) -> planned.Plan[migrate.Step]:
                facts = gather(self.client, parsed_args.hosts)
                return planned.Plan(steps=migrate.plan(facts))

            def step_row(self, step, result) -> planned.Row:
                return (step.host, step.action.value, step.target, result)

            def run_steps(self, steps, parsed_args) -> planned.Ran:
                ...carry each out on self.client; return (rows, failures)

    The base adds ``--dry-run`` and ``--yes`` (and ``--max-fraction`` when
    ``budgeted``), prints the plan's notes and lines on stderr, checks the
    budget, asks on a terminal (without one it refuses unless ``--yes``),
    then calls ``run_steps`` with every step, or shows each with
    ``step_row(step, "planned" or "not done")``. The rows are the plan's
    own ``rows`` followed by the steps'. Failures, the plan's and the
    run's, are printed on stderr after the table, and make the exit status
    1. ``make_plan`` raises ``CommandError`` to refuse the whole run with
    nothing changed. Add arguments in ``get_parser`` after ``super()``'s;
    word Results in :mod:`osc_plugin.v1.results`.

    A command whose steps are ``drain.Step`` subclasses
    ``drain_steps.DrainChange`` instead: it only sets ``runner``
    (``run_all_or_nothing`` or ``run_each``) and writes ``make_plan``.
    """

    #: The table's columns, stable for scripts.
    columns: ClassVar[tuple[str, ...]]
    #: Whether the command takes --max-fraction and checks ``Plan.budget``.
    #: The drain commands act only on what their command line names.
    budgeted: ClassVar[bool] = False
    #: Said on stderr when the plan has no step to take.
    nothing: ClassVar[str] = "nothing to do"

    failures: list[str]

    # --- what a command provides ---------------------------------------
    def make_plan(self, parsed_args: argparse.Namespace) -> Plan[S]:
        """Gather the facts and decide; change nothing."""
        raise NotImplementedError

    def step_row(self, step: S, result: str) -> Row:
        """The row of a step that is not carried out (``result`` says why)."""
        raise NotImplementedError

    def run_steps(self, steps: list[S],
                  parsed_args: argparse.Namespace) -> Ran:
        """Carry out the steps; their rows and one line per failure."""
        raise NotImplementedError

    # --- what the base does ---------------------------------------------
    @property
    def client(self) -> drain_client_mod.DrainClient:
        return common.drain_client(self.app)

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_change_options(parser)
        if self.budgeted:
            parser.add_argument(
                "--max-fraction", metavar="<fraction>",
                type=common.fraction_arg("--max-fraction"),
                default=common.DEFAULT_FRACTION,
                help="refuse a plan that touches more than this share of "
                     "the cloud's compute nodes (default "
                     f"{common.DEFAULT_FRACTION}; a plan that touches one "
                     "is always allowed)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[tuple[str, ...], list[Row]]:
        plan = self.make_plan(parsed_args)
        self.failures += plan.failures
        go = self.confirm(parsed_args, plan)
        rows = list(plan.rows)
        if go:
            done, failures = self.run_steps(plan.steps, parsed_args)
            rows += done
            self.failures += failures
        else:
            result = (results.PLANNED if parsed_args.dry_run
                      else results.NOT_DONE)
            rows += [self.step_row(s, result) for s in plan.steps]
        return self.columns, rows

    def confirm(self, parsed_args: argparse.Namespace, plan: Plan[S]) -> bool:
        """Print the notes and the plan on stderr; True to go ahead.

        A plan without a step asks nothing; unless it has refusals, it says
        ``nothing`` on stderr.
        A plan over its budget is refused (a dry run only says so).
        """
        lines = plan.shown
        stderr = self.app.stderr
        if not lines:
            if not plan.failures:  # refusals say why instead
                stderr.write(f"{self.nothing}\n")
            return False
        stderr.write("".join(f"Note: {note}\n" for note in plan.notes))
        stderr.write("Plan:\n" + "".join(f"  {line}\n" for line in lines))
        stderr.flush()
        if self.budgeted and plan.budget is not None:
            try:
                common.check_budget(*plan.budget, parsed_args.max_fraction)
            except exceptions.CommandError as exc:
                if not parsed_args.dry_run:
                    raise
                stderr.write(f"A run without --dry-run would stop: {exc}\n")
        if parsed_args.dry_run:
            return False
        if parsed_args.yes:
            return True
        if not self.app.stdin.isatty():
            raise exceptions.CommandError(
                "refusing to change anything without a terminal to ask on: "
                "pass --yes, or --dry-run to see the plan")
        stderr.write(f"Carry out these {len(lines)} step(s)? [y/N] ")
        stderr.flush()
        return bool(self.app.stdin.readline().strip().lower()
                    in ("y", "yes"))

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.failures = []
        rc: int = super().run(parsed_args)
        for failure in self.failures:
            self.app.stderr.write(f"failed: {failure}\n")
        if self.failures:
            self.app.stderr.write(f"{len(self.failures)} step(s) failed\n")
            return 1
        return rc

