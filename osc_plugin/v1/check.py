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

"""``openstack drain host check``: if these hosts left now, where would each
of their servers go?

The simulation is :mod:`nova_drain_filters.fit`'s, the reads
:mod:`nova_drain_filters.fit_check`'s on the capacity report's picture;
this module resolves the hosts, renders the table, the summary and the
exit code. It reads and never writes.
"""
import argparse
from collections.abc import Sequence
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import fit
from nova_drain_filters import fit_check
from nova_drain_filters import report
from nova_drain_filters.clients import compute
from osc_plugin import client as drain_client
from osc_plugin.v1 import common
from osc_plugin.v1 import report as report_cli
from osc_plugin.v1 import results

COLUMNS = ("Host", "Server", "Name", "Move", "Fits", "Candidates",
           "Destination", "Why")
#: Exit status when a movable server has nowhere to go.
NO_FIT_EXIT = 1
WHAT = "check hosts"


def why_text(verdict: fit.Verdict) -> str:
    """The Why column: the reason in words, then its detail."""
    if verdict.why is None:
        return ""
    step = verdict.need.step
    if verdict.why is fit.Why.UNMOVABLE and step.why is not None:
        text = results.STAYS[step.why]
        return f"{text}: {step.detail}" if step.detail else text
    text = results.NOWHERE[verdict.why]
    return f"{text}: {verdict.detail}" if verdict.detail else text


def row(verdict: fit.Verdict) -> tuple[Any, ...]:
    step = verdict.need.step
    return (step.host, step.server, step.name, step.action.value,
            "yes" if verdict.fits else "no", verdict.candidates,
            verdict.destination, why_text(verdict))


def summary_lines(result: fit.Result) -> list[str]:
    """Free capacity per class before and after, the homeless, the
    footer of what is not modelled."""
    lines = [f"{c.resource_class}: free {c.free_before} of {c.capacity} "
             f"({c.fraction_before:.1%}) before, {c.free_after} "
             f"({c.fraction_after:.1%}) after" for c in result.summary]
    homeless = result.homeless
    lines.append(f"nowhere to go: {len(homeless)} server(s)"
                 + "".join(f"\n  {v.need.step.host}: "
                           f"{v.need.step.name or '-'} "
                           f"({v.need.step.server})" for v in homeless))
    lines.append("not modelled: " + ", ".join(fit.NOT_MODELLED))
    return lines


def resolve(hosts: Sequence[str], aggregates: Sequence[str],
            zones: Sequence[str], known: set[str],
            listed: Sequence[compute.Aggregate]) -> list[str]:
    """The hosts to check, in order, each once; a one-line error for an
    unknown host or an aggregate or zone with no host."""
    found = list(hosts)
    unknown = [h for h in hosts if h not in known]
    if unknown:
        raise exceptions.CommandError(
            "unknown host(s) " + ", ".join(unknown)
            + ": no compute node record")
    for kind, names, pick in (
            ("aggregate", aggregates, lambda a, n: a.name == n),
            ("availability zone", zones,
             lambda a, n: a.availability_zone == n)):
        for name in names:
            members = [h for a in listed if pick(a, name) for h in a.hosts]
            if not members:
                raise exceptions.CommandError(
                    f"{kind} {name!r}: no such {kind}, or it has no host")
            found += members
    if not found:
        raise exceptions.CommandError(
            "name at least one host, --aggregate or --az")
    return common.unique(found)


def picture(client: drain_client.DrainClient, hosts: Sequence[str],
            aggregates: Sequence[str], zones: Sequence[str],
            fraction: float) -> tuple[list[str], fit_check.Cloud]:
    """The hosts to check and the cloud, read in bulk; the capacity
    report's refusal of an untrusted picture (a partial Nova view, an
    Ironic listing lacking nodes) is this command's too."""
    args = argparse.Namespace(max_missing_fraction=fraction,
                              nova_config=None)
    seen = report_cli.gather(client, client.nova, args, WHAT)
    with common.api_errors():
        listed = client.nova.aggregates()
    known = {hv.host for hv in seen.hypervisors}
    checked = resolve(hosts, aggregates, zones, known, listed)
    excluded = {v.uuid for v in report.judge(seen) if v.reasons}
    where = {s.uuid: s.host for s in seen.servers if s.host}
    return checked, fit_check.Cloud(seen.hypervisors, excluded, listed,
                                    where)


class CheckHost(common.Table):
    """Show where each server of these hosts would go if they left now.

    Reads, never writes, needs no 'drain host start'. One row per server:
    how migrate would move it (live, cold or unmovable), whether it fits,
    how many hosts could take it, where the simulation put it and, when it
    does not fit, why. Servers are packed in migrate's order onto the
    hosts left (not excluded by the drain filters, not being checked),
    spread by free RAM as Nova's default weigher does. A summary of each
    resource class's free capacity before and after follows the table.
    Exit 0 when every movable server fits, 1 when one does not (an
    untrusted picture is refused with an error, also exit 1).
    """

    result: fit.Result | None = None

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("hosts", metavar="<host>", nargs="*",
                            help="a compute host to check")
        parser.add_argument("--aggregate", metavar="<name>", action="append",
                            default=[], help="check every host of this "
                                             "aggregate (repeatable)")
        parser.add_argument("--az", metavar="<name>", action="append",
                            default=[], help="check every host of this "
                                             "availability zone "
                                             "(repeatable)")
        common.add_missing_fraction_option(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        client = common.drain_client(self.app)
        hosts, cloud = picture(client, parsed_args.hosts,
                               parsed_args.aggregate, parsed_args.az,
                               parsed_args.max_missing_fraction)
        with common.api_errors():
            self.result = fit_check.check(fit_check.Clients(
                client.needs, client.moves, client.placement), cloud, hosts)
        return COLUMNS, [row(v) for v in self.result.verdicts]

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.result = None
        rc = super().run(parsed_args)
        if rc != 0 or self.result is None:
            return rc
        table = getattr(parsed_args, "formatter", "table") == "table"
        out = self.app.stdout if table else self.app.stderr
        out.write("\n".join(summary_lines(self.result)) + "\n")
        return NO_FIT_EXIT if self.result.homeless else 0
