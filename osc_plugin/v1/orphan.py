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

"""``openstack drain orphan list|clear``: allocations nothing stands behind."""
import argparse
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from nova_drain_filters.clients import http
from osc_plugin import client as drain_client
from osc_plugin.v1 import common
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

#: One consumer, and {provider: the node it stands for} to take it off.
Removal = tuple[str, dict[str, str | None]]

COLUMNS = ("Consumer", "Resource Provider", "Host", "Node", "Resources",
           "Reason", "Project")


def _rows(found: list[orphans.Orphan]) -> list[tuple[Any, ...]]:
    return [(o.consumer, o.provider, o.host, o.node, o.resources_text,
             str(o.reason), o.project or "") for o in found]


def _add_provider_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resource-provider", metavar="<uuid>",
                        type=common.uuid_arg("resource provider"),
                        help="only the allocations on this resource provider")


def _on_provider(found: list[orphans.Orphan],
                 rp: str | None) -> list[orphans.Orphan]:
    return [o for o in found if o.provider == rp] if rp else found


def _add_nova_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nova-config", metavar="<path>", type=common.nova_config_arg,
        help="nova.conf of a controller: read compute nodes, instances and "
             "migrations from Nova's databases, as 'nova-manage placement "
             "audit' does, instead of the compute API (far lighter on a "
             "large cloud; placement is still read through its API)")
    common.add_missing_fraction_option(
        parser, "largest share of placement's compute node providers "
                "(COMPUTE_NODE roots) that Nova's records may lack")


def _gather(client: drain_client.DrainClient, nova: orphans.NovaSide,
            parsed_args: argparse.Namespace) -> list[orphans.Orphan]:
    progress = common.Progress("reading provider allocations")
    try:
        with common.api_errors():
            # NovaRecords also knows deleted instances' projects; the API
            # does not list deleted servers.
            return orphans.gather(
                nova, client.placement, progress,
                getattr(nova, "deleted_projects", None),
                parsed_args.max_missing_fraction)
    except orphans.NovaViewIncomplete as exc:
        raise common.nova_view_refused(
            exc.verdict, "judge any allocation", parsed_args.nova_config,
            parsed_args.max_missing_fraction) from None
    finally:
        progress.close()


def _budget(nova: orphans.NovaSide,
            found: list[orphans.Orphan]) -> planned.Budget:
    """The disruption budget's counts: compute nodes touched, and in all.

    A node's whole provider tree counts once; a provider with no node
    counts on its own.
    """
    with common.api_errors():
        nodes = {h.hypervisor_hostname for h in nova.hypervisors()}
    touched = {o.node or o.provider for o in found}
    return planned.Budget(len(touched), len(nodes | touched),
                          "compute nodes")


class ListOrphan(common.DrainLister):
    """List allocations whose consumer is gone or lives on another node.

    An allocation is orphaned when its consumer is neither an instance nor
    a migration in progress, or is an instance on another node (a source
    allocation left behind). Every resource class is looked at, custom ones
    such as CUSTOM_BAREMETAL_GOLD included, on every provider of Nova's
    trees: those rooted at a compute node, or at a COMPUTE_NODE provider
    whose compute node record is gone.

    Columns: Consumer, Resource Provider, Host, Node, Resources, Reason,
    Project.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _add_provider_option(parser)
        _add_nova_options(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        client = common.drain_client(self.app)
        nova = common.nova_side(client, parsed_args.nova_config)
        found = _on_provider(_gather(client, nova, parsed_args),
                             parsed_args.resource_provider)
        self.found = len(found)
        return COLUMNS, _rows(found)


class ClearOrphan(planned.PlannedChange[Removal]):
    """Remove orphaned allocations, only the orphaned part of each consumer.

    A consumer that also holds live allocations elsewhere keeps them: its
    allocations are rewritten without the orphaned providers. Otherwise its
    allocations are deleted. Each consumer is checked again right before
    the write, and both writes carry the consumer generation of that read,
    so an allocation another writer added meanwhile is never removed. On a
    consumer generation conflict (409) the consumer is read and checked
    again, up to 5 times; the Result then says "after N consumer generation
    conflicts". Results: deleted, rewritten, already gone (another run or
    writer removed them first), skipped (with why).
    """

    columns = ("Consumer", "Resource Providers", "Result")
    budgeted = True
    nothing = "nothing to clear"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("consumers", metavar="<consumer>", nargs="*",
                            type=common.uuid_arg("consumer"),
                            help="a consumer UUID that 'orphan list' shows "
                                 "(default: every orphaned consumer)")
        _add_provider_option(parser)
        _add_nova_options(parser)
        return parser

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[Removal]:
        nova = common.nova_side(self.client, parsed_args.nova_config)
        found = _gather(self.client, nova, parsed_args)
        if parsed_args.consumers:
            wanted = set(parsed_args.consumers)
            unknown = wanted - {o.consumer for o in found}
            if unknown:
                raise exceptions.CommandError(
                    "not an orphaned consumer: " + ", ".join(sorted(unknown)))
            found = [o for o in found if o.consumer in wanted]
        found = _on_provider(found, parsed_args.resource_provider)
        by_consumer: dict[str, dict[str, str | None]] = {}
        for orphan in found:
            by_consumer.setdefault(orphan.consumer, {})[orphan.provider] = (
                orphan.node)
        steps = sorted(by_consumer.items())
        return planned.Plan(
            steps=steps,
            lines=[f"{consumer}: remove its allocations on "
                   f"{', '.join(sorted(drop))}" for consumer, drop in steps],
            budget=_budget(nova, found) if steps else None)

    def step_row(self, step: Removal, result: str) -> planned.Row:
        consumer, drop = step
        return (consumer, ",".join(sorted(drop)), result)

    def run_steps(self, steps: list[Removal],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        client = self.client
        rows: list[planned.Row] = []
        failures = []
        for consumer, drop in steps:
            try:
                outcome = orphan_clear.clear_consumer(client.nova, client.placement,
                                                 consumer, drop)
            except http.ApiError as exc:
                failures.append(f"consumer {consumer}: {exc}")
                rows.append(self.step_row((consumer, drop), "failed"))
                continue
            rows.append((consumer, ",".join(outcome.providers),
                         results.cleared(outcome)))
        return rows, failures
