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

"""``openstack drain host migrate``: move a drained host's servers away.

The decisions are :mod:`nova_drain_filters.migration.plan`'s, the moves are run
by :mod:`nova_drain_filters.migration.runner`; this module asks, renders
progress and the table, and says whether every host is done.
"""
import argparse
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import drain
from nova_drain_filters import fit
from nova_drain_filters import fit_check
from nova_drain_filters.migration import facts
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import runner
from nova_drain_filters.migration import tracking
from osc_plugin import client as osc_client
from osc_plugin.v1 import check
from osc_plugin.v1 import common
from osc_plugin.v1 import drain_steps
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

COLUMNS = ("Host", "Server", "Name", "Action", "Result", "Destination",
           "Detail")
#: With --dry-run, the check's columns follow; Destination is predicted.
DRY_RUN_COLUMNS = COLUMNS + ("Fits", "Candidates", "Why")
DEFAULTS = {"concurrency": 2, "timeout": 3600, "server_timeout": 900,
            "retries": 2}
LIMITS = {"concurrency": (1, 1000), "timeout": (1, 7 * 86400),
          "server_timeout": (1, 86400), "retries": (0, 100)}

#: The words of each reason a server stays, and of each outcome.
WHY, RESULT = results.STAYS, results.MIGRATED


def why_text(step: plan.Step) -> str:
    text = WHY[step.why] if step.why else ""
    return f"{text}: {step.detail}" if step.detail else text


def move_row(move: tracking.Move) -> tuple[str, ...]:
    step, outcome = move.step, move.outcome or plan.Outcome.PLANNED
    return (step.host, step.server, step.name, step.action.value,
            RESULT[outcome], move.destination, move.detail)


def stay_row(step: plan.Step, result: str = RESULT[plan.Outcome.UNMOVABLE]
             ) -> tuple[str, ...]:
    return (step.host, step.server, step.name, step.action.value, result,
            "", why_text(step))


def plan_line(move: tracking.Move) -> str:
    step, record = move.step, move.record
    what = f"{step.host}: {step.name or '-'} ({step.server}): "
    if record is not None:
        return what + (f"pick up its {record.migration_type} "
                       f"({record.status}), posting nothing")
    if step.action is plan.Action.LIVE:
        return what + "live-migrate, the scheduler picks the host"
    return what + "cold-migrate, the scheduler picks the host; then confirm"


def _count(args: argparse.Namespace, name: str) -> int:
    """A whole number within LIMITS, or a one-line error naming it."""
    value, (low, high) = getattr(args, name), LIMITS[name]
    option = "--" + name.replace("_", "-")
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = low - 1
    if not low <= number <= high:
        raise exceptions.CommandError(
            f"{option} {value!r}: must be a whole number from {low} to "
            f"{high}")
    return number


class Progress:
    """One line per event on stderr; a line of counts on a terminal."""

    def __init__(self, stderr: Any, total: int) -> None:
        self.stderr, self.total = stderr, total
        self.counts: dict[str, int] = {}
        self.tty = stderr.isatty()

    def __call__(self, event: tracking.Event, move: tracking.Move,
                 detail: str) -> None:
        step = move.step
        verb = {tracking.Event.STARTED: f"started {step.action.value} "
                                      "migration"}.get(event, event.value)
        line = (f"migrate: {step.host}: {step.name or '-'} ({step.server}): "
                f"{verb}" + (f" ({detail})" if detail else ""))
        self.counts[event.value] = self.counts.get(event.value, 0) + 1
        prefix = "\r\x1b[K" if self.tty else ""
        self.stderr.write(f"{prefix}{line}\n")
        if self.tty:
            done = sum(self.counts.get(e, 0) for e in ("completed", "failed",
                                                       "aborted"))
            self.stderr.write(f"migrate: {done}/{self.total} over, "
                              + ", ".join(f"{n} {e}" for e, n in
                                          sorted(self.counts.items())))
        self.stderr.flush()

    def close(self) -> None:
        """End the line of counts, so the table starts on its own line."""
        if self.tty and self.counts:
            self.stderr.write("\n")


class MigrateHost(planned.PlannedChange[tracking.Move]):
    """Move every server off drained hosts through Nova's scheduler.

    Each host must be drained ('openstack drain host start') first, so no
    server lands on the next. ACTIVE and PAUSED servers live-migrate,
    SHUTOFF ones cold-migrate and are confirmed; the rest stay and are
    named with the reason. A server has moved only when its migration is
    over, it is on another host and has no task. Exit 0 only when every
    host is left with no server and no unfinished migration. A rerun picks
    up the migrations in flight instead of posting again.

    Before anything moves, it runs 'openstack drain host check' on the
    hosts: if a movable server has nowhere to go it refuses to start
    (exit 1, nothing moved) unless --allow-partial. With --dry-run the
    table adds the check's columns (Fits, Candidates, Why) and the
    predicted Destination.
    """

    columns = COLUMNS
    prediction: fit.Result | None = None

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("hosts", metavar="<host>", nargs="+",
                            help="a drained compute host")
        for name, help_text in (
                ("concurrency", "migrations in flight at once, from the "
                                "202 until a final status"),
                ("timeout", "seconds for the whole run; live migrations "
                            "this run started are aborted then"),
                ("server_timeout", "seconds a live migration may run once "
                                   "'running' before it is aborted"),
                ("retries", "retries of a server whose migration failed "
                            "transiently (a 409, or a failed pre-check)")):
            parser.add_argument(
                "--" + name.replace("_", "-"), metavar="<n>",
                default=str(DEFAULTS[name]),
                help=f"{help_text} (default {DEFAULTS[name]})")
        parser.add_argument(
            "--allow-partial", action="store_true",
            help="start even when the check finds a movable server with "
                 "nowhere to go (it is still tried; the scheduler decides)")
        return parser

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[tracking.Move]:
        self.options = tracking.Options(**{n: _count(parsed_args, n)
                                           for n in DEFAULTS})
        self.hosts = common.unique(parsed_args.hosts)
        client = self.client
        with common.api_errors():
            found = drain_steps.gather_hosts(client, self.hosts).hosts
            refusals = [refusal(found[h]) for h in self.hosts]
            if any(refusals):
                raise exceptions.CommandError("nothing changed: " + "; ".join(
                    r for r in refusals if r))
            hosts = [facts.gather(client.moves, h, {
                n.name for n in found[h].nodes if n.ironic})
                for h in self.hosts]
        moves = [m for h in hosts for m in h.moves]
        stays = [s for h in hosts for s in h.unmovable]
        notes = [f"{s.host}: {s.name or '-'} ({s.server}) stays: "
                 f"{why_text(s)}" for s in stays]
        if moves:
            notes += self.fit_notes(parsed_args)
        return planned.Plan(
            steps=moves, lines=[plan_line(m) for m in moves], notes=notes,
            rows=[stay_row(s) for s in stays])

    def fit_notes(self, parsed_args: argparse.Namespace) -> list[str]:
        """Run the check; refuse when a movable server has nowhere to go
        (a dry run, or --allow-partial, only says so)."""
        client = self.client
        hosts, cloud = check.picture(client, self.hosts, [], [],
                                     common.DEFAULT_FRACTION)
        with common.api_errors():
            self.prediction = fit_check.check(fit_check.Clients(
                client.needs, client.moves, client.placement), cloud, hosts)
        homeless = [f"{v.need.step.host}: {v.need.step.name or '-'} "
                    f"({v.need.step.server}): {check.why_text(v)}"
                    for v in self.prediction.homeless]
        if not homeless:
            return []
        refusal = (f"nothing moved: {len(homeless)} server(s) have nowhere "
                   "to go ('openstack drain host check' shows why): "
                   + "; ".join(homeless)
                   + "; pass --allow-partial to move the rest anyway")
        if parsed_args.allow_partial:
            return [f"nowhere to go (--allow-partial): {h}"
                    for h in homeless]
        if not parsed_args.dry_run:
            raise exceptions.CommandError(refusal)
        return [f"a run without --dry-run would stop: {refusal}"]

    def step_row(self, step: tracking.Move, result: str) -> planned.Row:
        return move_row(step)[:4] + (result, "", why_text(step.step))

    def run_steps(self, steps: list[tracking.Move],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        progress = Progress(self.app.stderr, len(steps))
        with common.api_errors():
            try:
                ran = runner.Runner(self.client.moves, self.options,
                                    progress).run(steps)
            finally:
                progress.close()
            rows: list[planned.Row] = [move_row(m) for m in ran]
            return rows, []

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[tuple[str, ...], list[planned.Row]]:
        """The base's plan, ask and run; then whether each host is done
        (also when there was nothing to move)."""
        columns, rows = super().take_action(parsed_args)
        if parsed_args.dry_run:
            return DRY_RUN_COLUMNS, self.predicted(rows)
        with common.api_errors():
            rows += self.check_done(self.client, self.hosts, rows)
        return columns, rows

    def predicted(self, rows: list[planned.Row]) -> list[planned.Row]:
        """The dry run's rows with the check's prediction of each."""
        verdicts = {v.need.step.server: v for v in (
            self.prediction.verdicts if self.prediction else ())}
        found: list[planned.Row] = []
        for row in rows:
            v = verdicts.get(row[1])
            if v is None:
                found.append(tuple(row) + ("", "", ""))
                continue
            found.append(tuple(row[:5]) + (v.destination,) + tuple(row[6:])
                         + ("yes" if v.fits else "no", v.candidates,
                            check.why_text(v)))
        return found

    def check_done(self, client: osc_client.DrainClient, hosts: list[str],
                   rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """A failure line for each host not done; a row for each server on
        it that no row names yet (one that arrived during the run)."""
        named = {r[1] for r in rows}
        extra: list[tuple[str, ...]] = []
        for host in hosts:
            load = facts.load(client.moves, host)
            if not plan.host_done(load):
                self.failures.append(
                    f"{host}: not done: {len(load.servers)} server(s) on it, "
                    f"{len(load.unfinished)} migration(s) unfinished")
            extra += [(host, s, "", plan.Action.NONE.value, "not planned", "",
                       "on the host after the plan was made")
                      for s in load.servers if s not in named]
        return extra


def refusal(host: drain.HostFacts) -> str:
    """Why migrate will not touch a host: unknown, or not drained by
    'start' (its servers could land on a host about to be drained)."""
    if host.service is None:
        return f"{host.host}: no compute service (unknown host, or released)"
    if not host.marked:
        return (f"{host.host}: not draining: run 'openstack drain host start "
                f"{host.host} --reason ...' first")
    return ""

