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


"""``openstack drain rolling``: drain, patch and put back many hosts, a
batch at a time, resumably.

The run is :mod:`nova_drain_filters.rolling`'s; this module resolves the
hosts, checks the input, shows the schedule, asks, and renders the rows.
It also gives the run its :class:`~nova_drain_filters.rolling.runner.Cloud`:
the drain steps of ``drain host start`` and ``cancel``, the migrate engine
of ``drain host migrate``, and the check of ``drain host check``.
"""
import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import drain
from nova_drain_filters import fit_check
from nova_drain_filters.migration import facts
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import runner as migration_runner
from nova_drain_filters.migration import tracking
from nova_drain_filters.rolling import journal
from nova_drain_filters.rolling import runner
from nova_drain_filters.rolling import schedule
from osc_plugin import client as drain_client
from osc_plugin.v1 import check as check_cli
from osc_plugin.v1 import common
from osc_plugin.v1 import drain_steps
from osc_plugin.v1 import migrate
from osc_plugin.v1 import planned

COLUMNS = ("Host", "Batch", "Result", "Step", "Detail", "Log")
DEFAULTS = {"batch": 1, "hook_timeout": 3600.0, "wait_up": 900.0}


@dataclasses.dataclass(frozen=True)
class HostStep:
    """One host of the schedule, and what it needs next."""

    host: str
    batch: int
    next: schedule.Next


class CloudAdapter:
    """The run's cloud: this command's client, through the drain, migrate
    and check engines."""

    def __init__(self, client: drain_client.DrainClient,
                 options: tracking.Options, stderr: Any) -> None:
        self.client, self.options, self.stderr = client, options, stderr
        self._ironic: bool | None = None

    def facts(self, hosts: Sequence[str]) -> dict[str, drain.HostFacts]:
        return drain_steps.gather_hosts(self.client, list(hosts)).hosts

    def has_ironic(self) -> bool:
        if self._ironic is None:
            self._ironic = self.client.has_ironic()
        return self._ironic

    def carry_out(self, steps: Sequence[drain.Step],
                  all_or_nothing: bool) -> list[str]:
        run = (drain_steps.run_all_or_nothing if all_or_nothing
               else drain_steps.run_each)
        _rows, failures = run(self.client, steps)
        return failures

    def check(self, hosts: Sequence[str], avoid: Sequence[str]) -> list[str]:
        return check_lines(self.client, hosts, avoid)

    def migrate(self, hosts: Sequence[str]) -> dict[str, str]:
        found = drain_steps.gather_hosts(self.client, list(hosts)).hosts
        gathered = [facts.gather(self.client.moves, h, {
            n.name for n in found[h].nodes if n.ironic}) for h in hosts]
        moves = [m for g in gathered for m in g.moves]
        progress = migrate.Progress(self.stderr, len(moves))
        try:
            migration_runner.Runner(self.client.moves, self.options,
                                    progress).run(moves)
        finally:
            progress.close()
        why: dict[str, str] = {}
        for host in hosts:
            load = facts.load(self.client.moves, host)
            if not plan.host_done(load):
                stays = [s for g in gathered if g.host == host
                         for s in g.unmovable]
                why[host] = (
                    f"{len(load.servers)} server(s) still on it, "
                    f"{len(load.unfinished)} migration(s) unfinished"
                    + "".join(f"; {s.name or s.server} stays: "
                              f"{migrate.why_text(s)}" for s in stays))
        return why


def resolve_hosts(client: drain_client.DrainClient,
                  parsed_args: argparse.Namespace) -> list[str]:
    """The hosts named, or those of the aggregate or the AZ; a one-line
    error for an unknown host, an empty aggregate or AZ."""
    named = common.unique(parsed_args.hosts)
    chosen = [bool(named), parsed_args.aggregate is not None,
              parsed_args.az is not None]
    if sum(chosen) != 1:
        raise exceptions.CommandError(
            "name the hosts, or give --aggregate or --az (exactly one)")
    with common.api_errors():
        services = {s.host for s in client.nova.services()}
        if not named:
            aggregates = client.nova.aggregates()
            if parsed_args.aggregate is not None:
                what = f"--aggregate {parsed_args.aggregate}"
                found = [a for a in aggregates
                         if a.name == parsed_args.aggregate]
                if not found:
                    raise exceptions.CommandError(f"{what}: no such "
                                                  "aggregate")
            else:
                what = f"--az {parsed_args.az}"
                found = [a for a in aggregates
                         if a.availability_zone == parsed_args.az]
            named = sorted({h for a in found for h in a.hosts})
            if not named:
                raise exceptions.CommandError(f"{what}: no hosts in it")
    unknown = [h for h in named if h not in services]
    if unknown:
        raise exceptions.CommandError(
            f"unknown host(s) {', '.join(unknown)}: no nova-compute service "
            "by that name")
    return named


def _positive(what: str, low: float, integer: bool = False) -> Any:
    def check(value: str) -> float:
        try:
            number = int(value) if integer else float(value)
        except ValueError:
            number = low - 1
        if number < low:
            kind = "a whole number" if integer else "a number of seconds"
            raise argparse.ArgumentTypeError(
                f"{what} {value!r}: must be {kind} of at least {low:g}"
                if integer else
                f"{what} {value!r}: must be {kind} above 0")
        return number
    return check


class RollHosts(planned.PlannedChange[HostStep]):
    """Patch many hosts a batch at a time: drain, run COMMAND, put back.

    Hosts go in name order, --batch at a time. For each batch: check that
    every movable server of the batch fits elsewhere (refuse the batch if
    one does not), start the drain of the batch (mark, then disable),
    migrate its servers, run COMMAND for each host ('{host}' replaced by
    its name; output in a log per host, under --hook-timeout), wait until
    each host's nova-compute reports up again with its providers in
    placement (--wait-up), then enable and unmark only what this run
    changed. A failure stops the run: the failed host stays disabled with
    its drain reason, the rest of its batch is put back, and the exit
    status is 1. Running the same command again resumes: a host whose
    COMMAND succeeded never runs it again, a COMMAND still running is
    waited for. A host someone else disabled is never touched.

    Columns: Host, Batch, Result, Step, Detail, Log.
    """

    columns = COLUMNS
    nothing = "nothing to do: every host was finished by an earlier run"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("hosts", metavar="<host>", nargs="*",
                            help="a compute host (or --aggregate, --az)")
        parser.add_argument("--aggregate", metavar="<name>",
                            help="every host of this aggregate")
        parser.add_argument("--az", metavar="<name>",
                            help="every host of this availability zone")
        parser.add_argument(
            "--run", metavar="<command>", required=True,
            help="the shell command run for each host, with {host} in it")
        parser.add_argument(
            "--batch", metavar="<n>", default=DEFAULTS["batch"],
            type=_positive("--batch", 1, integer=True),
            help=f"hosts per batch (default {DEFAULTS['batch']})")
        parser.add_argument(
            "--hook-timeout", metavar="<seconds>",
            default=DEFAULTS["hook_timeout"],
            type=_positive("--hook-timeout", 0),
            help="seconds COMMAND may run on one host (default "
                 f"{DEFAULTS['hook_timeout']:g})")
        parser.add_argument(
            "--wait-up", metavar="<seconds>", default=DEFAULTS["wait_up"],
            type=_positive("--wait-up", 0),
            help="seconds to wait for a host to come back after COMMAND "
                 f"(default {DEFAULTS['wait_up']:g})")
        parser.add_argument(
            "--concurrency", metavar="<n>",
            default=migrate.DEFAULTS["concurrency"],
            type=_positive("--concurrency", 1, integer=True),
            help="migrations in flight at once (default "
                 f"{migrate.DEFAULTS['concurrency']})")
        parser.add_argument(
            "--server-timeout", metavar="<seconds>",
            default=migrate.DEFAULTS["server_timeout"],
            type=_positive("--server-timeout", 1, integer=True),
            help="seconds a live migration may run before it is aborted "
                 f"(default {migrate.DEFAULTS['server_timeout']})")
        parser.add_argument(
            "--reason", metavar="<text>", default="rolling maintenance",
            help="the drain's disabled reason, 'drain: TEXT' (default "
                 "'rolling maintenance')")
        parser.add_argument(
            "--state-dir", metavar="<dir>", default=None,
            help="where runs keep their journals and COMMAND logs (default "
                 f"{journal.default_root()})")
        return parser

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[HostStep]:
        why = schedule.validate(parsed_args.run, parsed_args.batch,
                                parsed_args.hook_timeout,
                                parsed_args.wait_up)
        reason = drain.disable_reason(parsed_args.reason)
        if why is None and (len(reason) > drain.MAX_REASON
                            or not parsed_args.reason.strip()):
            why = "--reason must be 1 to 200 characters"
        if why:
            raise exceptions.CommandError(why)
        client = self.client
        hosts = resolve_hosts(client, parsed_args)
        root = Path(parsed_args.state_dir) if parsed_args.state_dir else (
            journal.default_root())
        self.journal = journal.Journal(journal.run_dir(
            root, hosts, parsed_args.run, _cloud_name(self.app)))
        self.batches = schedule.batches(hosts, parsed_args.batch)
        with common.api_errors():
            found = drain_steps.gather_hosts(client, hosts).hosts
        progress = self.journal.progress()
        steps = [HostStep(h, n, schedule.next_step(
            progress.get(h, schedule.Progress()), found[h]))
            for n, batch in enumerate(self.batches, 1) for h in batch]
        notes = [f"journal and logs: {self.journal.directory}"]
        if self.journal.exists():
            notes.append("resuming the run recorded there")
        notes += [f"{s.host}: {_said(s.next, found[s.host])}"
                  for s in steps if s.next in (schedule.Next.FOREIGN,
                                               schedule.Next.NOTHING)]
        todo = [s for s in steps if s.next is not schedule.Next.NOTHING]
        if parsed_args.dry_run and todo:
            first = [s.host for s in todo if s.batch == todo[0].batch
                     and s.next is not schedule.Next.FOREIGN]
            later = [s.host for s in todo if s.batch > todo[0].batch]
            with common.api_errors():
                nowhere = check_lines(client, first, later) if first else []
            notes += ([f"batch {todo[0].batch} would be refused: {line}"
                       for line in nowhere] or [
                f"batch {todo[0].batch}: every movable server fits on "
                "another host"])
        lines = [_plan_line(s, parsed_args) for s in todo]
        self.options = runner.Options(
            command=parsed_args.run, reason=parsed_args.reason,
            hook_timeout=parsed_args.hook_timeout,
            wait_up=parsed_args.wait_up)
        self.moves = tracking.Options(
            concurrency=parsed_args.concurrency,
            timeout=migrate.DEFAULTS["timeout"],
            server_timeout=parsed_args.server_timeout,
            retries=migrate.DEFAULTS["retries"])
        return planned.Plan(steps=todo, lines=lines, notes=notes)

    def step_row(self, step: HostStep, result: str) -> planned.Row:
        return (step.host, step.batch, result, step.next.value, "", "")

    def run_steps(self, steps: list[HostStep],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        stderr = self.app.stderr

        def report(line: str) -> None:
            stderr.write(f"rolling: {line}\n")
            stderr.flush()

        cloud = CloudAdapter(self.client, self.moves, stderr)
        with common.api_errors():
            ran = runner.Runner(cloud, self.journal, self.options,
                                report).run(self.batches)
        rows: list[planned.Row] = [
            (r.host, r.batch, r.outcome.value, r.step, r.detail, r.log)
            for r in ran]
        failures = [f"{r.host}: {r.step or r.outcome.value}: {r.detail}"
                    for r in ran if r.outcome in (
                        schedule.Outcome.FAILED, schedule.Outcome.REFUSED,
                        schedule.Outcome.SKIPPED)]
        return rows, failures


def _said(step: schedule.Next, host: drain.HostFacts) -> str:
    if step is schedule.Next.NOTHING:
        return "finished by an earlier run: nothing to do"
    service = host.service
    return (f"disabled by someone else "
            f"({(service.disabled_reason if service else None) or 'no reason'}"
            "): never touched, and the run exits 1")


def _plan_line(step: HostStep, parsed_args: argparse.Namespace) -> str:
    command = schedule.command_for(parsed_args.run, step.host)
    head = f"batch {step.batch}: {step.host}: "
    back = (f"wait up to {parsed_args.wait_up:g} s for it to come back, "
            "then enable and unmark what this run changed")
    if step.next is schedule.Next.FOREIGN:
        return head + "skip: disabled by someone else"
    if step.next is schedule.Next.WAIT_UP:
        return head + "its COMMAND succeeded in an earlier run: " + back
    if step.next is schedule.Next.WAIT_COMMAND:
        return head + "wait for the COMMAND an earlier run started; " + back
    first = ("check, mark and disable, migrate its servers" if step.next
             is schedule.Next.DRAIN else
             "still drained by this run: migrate what is left")
    return (f"{head}{first}; run {command!r} (at most "
            f"{parsed_args.hook_timeout:g} s); {back}")


def _cloud_name(app: Any) -> str:
    """The cloud's name for the run's key: its auth URL, or the cloud."""
    options = getattr(getattr(app, "client_manager", None), "_cli_options",
                      None)
    config = getattr(options, "config", None) or {}
    auth = config.get("auth") or {}
    return str(auth.get("auth_url") or config.get("cloud") or "")



def check_lines(client: drain_client.DrainClient, hosts: Sequence[str],
                avoid: Sequence[str]) -> list[str]:
    """``drain host check`` of a batch: one line per movable server with
    nowhere to go; none if all fit.

    The batches still to come are tried last: the check first keeps
    their hosts out, and only if something does not fit then lets them
    take it (a server moved there moves again with its batch). Nova's
    scheduler picks the real destination; this only says whether it can.
    """
    checked, cloud = check_cli.picture(client, list(hosts), [], [],
                                       common.DEFAULT_FRACTION)
    clients = fit_check.Clients(client.needs, client.moves,
                                client.placement)
    if avoid:
        later = set(avoid)
        spared = dataclasses.replace(cloud, excluded=set(cloud.excluded) | {
            hv.uuid for hv in cloud.hypervisors if hv.host in later})
        with common.api_errors():
            if not fit_check.check(clients, spared, checked).homeless:
                return []
    with common.api_errors():
        result = fit_check.check(clients, cloud, checked)
    return [f"{v.need.step.host}: {v.need.step.name or '-'} "
            f"({v.need.step.server}) has nowhere to go: "
            f"{check_cli.why_text(v)}" for v in result.homeless]
