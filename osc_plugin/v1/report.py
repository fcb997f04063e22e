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

"""``openstack drain report``: how much capacity cannot be scheduled, and why."""
import argparse
import datetime
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import fit_check
from nova_drain_filters import headroom
from nova_drain_filters import orphans
from nova_drain_filters import report
from nova_drain_filters import report_metrics
from nova_drain_filters import traits
from nova_drain_filters.clients import ironic
from osc_plugin import client as drain_client
from osc_plugin.v1 import common

#: The default of --max-unschedulable-fraction.
DEFAULT_MAX_UNSCHEDULABLE = 0.2
GROUP_COLUMNS = {"host": "Host", "aggregate": "Aggregate",
                 "az": "Availability Zone"}
#: Only in machine-readable output: every node of the row, all its reasons.
NODES_COLUMN = "Node Reasons"
_MACHINE = ("json", "yaml")
WHAT = "report capacity"


def gather(client: drain_client.DrainClient, nova: orphans.NovaSide,
           parsed_args: argparse.Namespace, what: str = WHAT
           ) -> report.Picture:
    """Read the picture in bulk: pages and lists, never one per host.

    Requests: hypervisor, server and migration pages (none with
    --nova-config), one service list, one provider list, one trait check
    and one provider list per forbidden trait placement knows (a
    ``required`` trait it has never seen is a 400), one ``COMPUTE_NODE``
    query only when a root has no compute node record, and Ironic's node
    pages.
    """
    fraction = parsed_args.max_missing_fraction
    with common.api_errors():
        hypervisors = nova.hypervisors()
        services = client.nova.services()
        servers = nova.servers()
        migrations = nova.migrations_in_progress()
        listed = client.placement.providers()
        try:
            orphans.compute_roots(client.placement, listed,
                                  {h.uuid: h for h in hypervisors}, fraction)
        except orphans.NovaViewIncomplete as exc:
            raise common.nova_view_refused(
                exc.verdict, what, parsed_args.nova_config, fraction) from None
        known = client.placement.existing_traits(traits.DEFAULT_FORBIDDEN)
        marked = {t: {p["uuid"] for p in client.placement.providers(
            required=t)} for t in traits.DEFAULT_FORBIDDEN if t in known}
        nodes, verdict = common.ironic_listing(
            client, hypervisors, fraction, ironic.REPORT_FIELDS)
    if verdict is not None and nodes is None:
        raise exceptions.CommandError(
            f"refusing to {what}: "
            + common.untrusted(client, verdict, fraction))
    return report.Picture(
        hypervisors, services, {p["uuid"] for p in listed}, marked, nodes,
        servers, migrations, datetime.datetime.now(datetime.timezone.utc))


def columns(by: str, classes: list[str], machine: bool) -> tuple[str, ...]:
    head = (GROUP_COLUMNS[by],) if by in GROUP_COLUMNS else ()
    tail = (NODES_COLUMN,) if machine else ()
    return head + ("Reason", "Hosts", "Nodes") + tuple(classes) + tail


def row_values(row: report.Row, by: str, classes: list[str],
               machine: bool) -> tuple[Any, ...]:
    head = (row.group,) if by in GROUP_COLUMNS else ()
    tail = ([{"host": v.host, "node": v.node, "uuid": v.uuid,
              "reasons": list(v.reasons)} for v in row.members],
            ) if machine else ()
    return (head + (row.reason, row.hosts, row.nodes)
            + tuple(row.inventory.get(rc, 0) for rc in classes) + tail)


def headroom_table(client: drain_client.DrainClient,
                   verdicts: list[report.NodeVerdict], classes: list[str],
                   by: str, groups: dict[str, list[str]] | None
                   ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """``--headroom``: one candidates request per resource class, then a
    row per group with each class's free room, capacity and share free."""
    with common.api_errors():
        rooms = fit_check.provider_rooms(client.placement, classes)
    found = headroom.rows(verdicts, rooms, by, groups)
    classes = headroom.resource_classes(found) or classes
    head = (GROUP_COLUMNS[by],) if by in GROUP_COLUMNS else ()
    columns = head + ("Hosts", "Nodes") + tuple(
        f"{rc} {what}" for rc in classes
        for what in ("Free", "Capacity", "Free Fraction"))
    return columns, [
        ((r.group,) if head else ()) + (r.hosts, r.nodes) + tuple(
            value for rc in classes for value in (
                r.free.get(rc, 0), r.capacity.get(rc, 0),
                round(r.fraction(rc), 3)))
        for r in found]


class ReportCapacity(common.DrainLister):
    """Report how much capacity cannot be scheduled, and why.

    One row per reason a compute node cannot take a server (the drain
    filters', the pre-filter's forbidden traits, Ironic states and drain
    phases), then Schedulable and Total. A node with several reasons is
    counted once, under its first in the filters' order; -f json lists
    all of them in the Node Reasons column. Hosts counts compute hosts,
    Nodes compute nodes; each resource class column sums the nodes' total
    inventory. With --by, the rows repeat per host, aggregate or
    availability zone. Reads only.

    Columns: [Host|Aggregate|Availability Zone], Reason, Hosts, Nodes, one
    per resource class[, Node Reasons]. With --headroom: [Host|Aggregate|
    Availability Zone], Hosts, Nodes, then for each resource class its
    Free, Capacity and Free Fraction on the schedulable nodes.
    """

    exit_help = (f"exit {common.FOUND_EXIT} when the unschedulable share of "
                 "any resource class exceeds --max-unschedulable-fraction")

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--by", choices=report.BY, default="reason",
            help="rows per reason (default), or per host, aggregate or "
                 "availability zone (az) and reason")
        parser.add_argument(
            "--headroom", action="store_true",
            help="instead, the free capacity of the schedulable nodes per "
                 "resource class (placement's capacity and usage), per "
                 "--by host, aggregate or az (one row without --by)")
        parser.add_argument(
            "--nova-config", metavar="<path>", type=common.nova_config_arg,
            help="nova.conf of a controller: read compute nodes, instances "
                 "and migrations from Nova's databases, as 'orphan list' "
                 "does (services, placement and Ironic through their APIs)")
        parser.add_argument(
            "--max-unschedulable-fraction", metavar="<fraction>",
            type=common.fraction_arg("--max-unschedulable-fraction"),
            default=DEFAULT_MAX_UNSCHEDULABLE,
            help="largest unschedulable share of a resource class's total "
                 f"inventory --exit-code accepts (default "
                 f"{DEFAULT_MAX_UNSCHEDULABLE})")
        parser.add_argument(
            "--prometheus-textfile", metavar="<path>",
            help="also write the figures there, atomically, in the "
                 "Prometheus text format (node_exporter's textfile "
                 "collector)")
        common.add_missing_fraction_option(
            parser, "largest share of the Ironic nodes Nova knows, and of "
                    "placement's compute node providers, that the Ironic "
                    "listing and Nova's records may lack")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        client = common.drain_client(self.app)
        nova = common.nova_side(client, parsed_args.nova_config)
        picture = gather(client, nova, parsed_args)
        by = parsed_args.by
        groups = None
        if by in ("aggregate", "az"):
            with common.api_errors():
                groups = report.groups_by(client.nova.aggregates(), by)
        verdicts = report.judge(picture)
        if parsed_args.prometheus_textfile:
            try:
                report_metrics.write(verdicts, parsed_args.prometheus_textfile)
            except OSError as exc:
                raise exceptions.CommandError(
                    f"cannot write --prometheus-textfile "
                    f"{parsed_args.prometheus_textfile}: {exc.strerror or exc}"
                ) from None
        limit = parsed_args.max_unschedulable_fraction
        over = report.over(verdicts, limit)
        shares = report.fractions(verdicts)
        for rc in over if parsed_args.exit_code else ():
            self.app.stderr.write(
                f"{rc}: {shares[rc]:.1%} of the inventory is unschedulable, "
                f"more than --max-unschedulable-fraction {limit}\n")
        self.found = len(over)
        classes = report.resource_classes(verdicts)
        if parsed_args.headroom:
            return headroom_table(client, verdicts, classes, by, groups)
        machine = getattr(parsed_args, "formatter", "") in _MACHINE
        return (columns(by, classes, machine),
                [row_values(r, by, classes, machine)
                 for r in report.rows(verdicts, by, groups)])
