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

"""``openstack drain host start|show|finish|cancel``: a host's drain lifecycle.

The phase is derived from Nova and placement on every run
(:mod:`nova_drain_filters.drain`); nothing is kept between runs. These
commands never migrate a server (``drain host migrate`` does, in
:mod:`osc_plugin.v1.migrate`) and never enable a service they did not
disable.
"""
import argparse
import time
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import drain
from nova_drain_filters.clients import http
from osc_plugin import client as drain_client
from osc_plugin.v1 import common
from osc_plugin.v1 import drain_steps
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

COLUMNS = ("Host", "Phase", "Instances", "Migrations", "Allocations",
           "Disabled Reason", "Blocked By")
DEFAULT_TIMEOUT = 600


def _row(facts: drain.HostFacts) -> tuple[Any, ...]:
    service = facts.service
    return (facts.host, drain.host_phase(facts).value, len(facts.servers),
            len(facts.migrations), len(facts.consumers),
            (service.disabled_reason or "") if service and service.disabled
            else "", drain.summarize_blockers(drain.host_blockers(facts)))


def _hosts_arg(parser: argparse.ArgumentParser, nargs: str) -> None:
    parser.add_argument("hosts", metavar="<host>", nargs=nargs,
                        help="a compute host, as its nova-compute service "
                             "names it")


def _gather(client: drain_client.DrainClient,
            hosts: list[str] | None) -> drain_steps.Gathered:
    with common.api_errors():
        return drain_steps.gather_hosts(client, hosts)


class ShowHost(common.Table):
    """Show the drain phase of hosts (default: every host not Active).

    The phase is Active, Disabled, Draining, Drained or Released, derived
    afresh from Nova, placement and Ironic on every run. A name with no
    compute service and no compute node is an error (exit 1), as for
    'start': Nova keeps no record of a released host, so nothing tells it
    from a typo; Released is shown only while Nova still holds compute
    node records under the name. Migrations counts
    those in flight to or from the host (not over; a cold migration
    awaiting its confirm counts). Blocked By names up to three of the
    servers, migrations and consumers that keep a host from Drained.

    Columns: Host, Phase, Instances, Migrations, Allocations, Disabled
    Reason, Blocked By.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _hosts_arg(parser, "*")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        hosts = common.unique(parsed_args.hosts) or None
        found = _gather(common.drain_client(self.app), hosts).hosts
        unknown = [r for r in map(drain.unknown, found.values()) if r]
        if unknown:
            raise exceptions.CommandError("; ".join(map(str, unknown)))
        return COLUMNS, [_row(found[h]) for h in (hosts or sorted(found))]


class _HostChange(drain_steps.DrainChange):
    """A change to hosts: plan on stderr, ask, act, report."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _hosts_arg(parser, "+")
        return parser


class StartHost(_HostChange):
    """Start draining hosts: mark them all, then disable each service once.

    The mark, CUSTOM_DRAIN_HOST on every provider of the host (and first on
    each Ironic node), keeps new boots off at once. The service is disabled
    with the reason 'drain: TEXT'; a service someone else disabled keeps
    its own reason and gets only the mark. If a step fails, everything this
    run did is undone, newest first. Servers are not moved: run 'openstack
    drain host migrate' next.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--reason", metavar="<text>", required=True,
            help="why the hosts are drained, kept as the service's "
                 "disabled reason 'drain: TEXT'")
        return parser

    runner = drain_steps.run_all_or_nothing

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[drain.Step]:
        reason = drain.disable_reason(parsed_args.reason)
        if len(reason) > drain.MAX_REASON or not parsed_args.reason.strip():
            raise exceptions.CommandError(
                f"--reason must be 1 to {drain.MAX_REASON_TEXT} characters")
        hosts = common.unique(parsed_args.hosts)
        gathered = _gather(self.client, hosts)
        plan = drain.plan_start([gathered.hosts[h] for h in hosts],
                                parsed_args.reason, gathered.has_ironic)
        if plan.refusals:
            raise exceptions.CommandError(
                "nothing changed: " + "; ".join(map(str, plan.refusals)))
        return drain_steps.as_plan(plan)


class CancelHost(_HostChange):
    """Stop draining hosts: unmark them; enable only what a drain disabled.

    The mark goes from every node of the host, node drains included. The
    service is enabled only if the drain's reason is still on it, checked
    again right before enabling; a service someone else disabled stays
    disabled, with their reason.
    """

    runner = drain_steps.run_each

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[drain.Step]:
        hosts = common.unique(parsed_args.hosts)
        gathered = _gather(self.client, hosts)
        plan = drain.plan_cancel([gathered.hosts[h] for h in hosts],
                                 gathered.has_ironic)
        change = drain_steps.as_plan(plan)
        change.failures = [str(r) for r in plan.refusals]
        return change


#: A host to release now, or one to wait for first (``finish --wait``).
Release = drain.Step | drain.Refusal


class FinishHost(planned.PlannedChange[Release]):
    """Release Drained hosts: delete their compute service (no undo).

    Only a Drained host whose nova-compute no longer reports is released
    (stop it, then 'openstack compute service set --down HOST
    nova-compute'); anything else is refused, with the reason. Nova then
    removes the host's providers, host mapping and aggregate membership;
    whatever it leaves behind is reported and the command exits 1.
    """

    columns = drain_steps.COLUMNS

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _hosts_arg(parser, "+")
        parser.add_argument(
            "--wait", action="store_true",
            help="wait until each host is Drained and its nova-compute is "
                 "down, then release it")
        parser.add_argument(
            "--timeout", metavar="<seconds>",
            type=common.int_arg("--timeout", 1),
            help=f"with --wait, give up after this long (default "
                 f"{DEFAULT_TIMEOUT}); the drain itself goes on")
        return parser

    def make_plan(self, parsed_args: argparse.Namespace) -> planned.Plan[Release]:
        if parsed_args.timeout and not parsed_args.wait:
            raise exceptions.CommandError("--timeout needs --wait")
        parsed_args.timeout = parsed_args.timeout or DEFAULT_TIMEOUT
        hosts = common.unique(parsed_args.hosts)
        self.gathered = _gather(self.client, hosts)
        plan = drain.plan_finish([self.gathered.hosts[h] for h in hosts])
        waiting = [r for r in plan.refusals if parsed_args.wait and r.wait]
        lines = [str(s) for s in plan.steps] + [
            f"{r.host}: wait up to {parsed_args.timeout}s until it is "
            f"Drained and its nova-compute is down, then delete its compute "
            f"service (no undo)" for r in waiting]
        change = drain_steps.as_plan(plan)
        return planned.Plan[Release](
            steps=[*plan.steps, *waiting], lines=lines, notes=change.notes,
            rows=change.rows,
            failures=[str(r) for r in plan.refusals if r not in waiting])

    def step_row(self, step: Release, result: str) -> planned.Row:
        if isinstance(step, drain.Refusal):
            return (step.host, "wait", "", result)
        return drain_steps.row(step, result)

    def run_steps(self, steps: list[Release],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        now = [s for s in steps if isinstance(s, drain.Step)]
        waiting = [s.host for s in steps if isinstance(s, drain.Refusal)]
        rows: list[planned.Row] = list(self.release(now, self.gathered))
        if waiting:
            rows += self.wait_and_release(waiting, parsed_args.timeout)
        # release and wait_and_release add their failures to self.failures.
        return rows, []

    def release(self, steps: list[drain.Step],
                gathered: drain_steps.Gathered) -> list[drain_steps.Row]:
        client = self.client
        rows = []
        for step in steps:
            try:
                drain_steps.carry_out(client, step)
                left = drain_steps.leftovers(
                    client, step.host, gathered.providers.get(step.host, []))
            except http.ApiError as exc:
                rows.append(drain_steps.row(step, drain.Outcome.FAILED))
                self.failures.append(drain_steps.failure(step, exc))
                continue
            if left:
                self.failures.append(
                    f"{step.host}: released, but Nova left behind "
                    f"{', '.join(left)} (see 'openstack drain stale list')")
            rows.append(drain_steps.row(step, results.drained(
                drain.Outcome.RELEASED, left)))
        return rows

    def wait_and_release(self, hosts: list[str],
                         timeout: float) -> list[drain_steps.Row]:
        """Poll with backoff until each host can go, or the deadline.

        A failed read is retried like a host still draining: an API that
        is briefly away does not end the wait, only the deadline does.
        """
        deadline = time.monotonic() + timeout
        rows: list[drain_steps.Row] = []
        pending, attempt = list(hosts), 0
        blocked: list[str] = []
        while pending:
            time.sleep(drain.next_delay(attempt, deadline - time.monotonic()))
            attempt += 1
            try:
                gathered = drain_steps.gather_hosts(self.client, pending)
            except http.ApiError as exc:
                blocked = [f"{', '.join(pending)}: could not read: "
                           f"{drain.tail(str(exc))}"]
            else:
                plan = drain.plan_finish([gathered.hosts[h] for h in pending])
                rows += [(r.host, "nothing to do", "", r.why)
                         for r in plan.done]
                rows += self.release(plan.steps, gathered)
                pending = [r.host for r in plan.refusals if r.wait]
                blocked = [str(r) for r in plan.refusals if r.wait]
                self.failures += [str(r) for r in plan.refusals
                                  if not r.wait]
            if pending and time.monotonic() >= deadline:
                self.failures += [f"gave up waiting after {timeout}s: {b}"
                                  for b in blocked]
                break
        return rows

