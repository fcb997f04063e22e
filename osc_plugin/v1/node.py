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

"""``openstack drain node start|show|cancel``: drain single baremetal nodes.

Only the mark: ``CUSTOM_DRAIN_HOST`` on the Ironic node (so Nova's Ironic
driver copies it) and on its provider (so it counts at once). The service
that fronts the node, and its other nodes, are left alone.
"""
import argparse
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import drain
from nova_drain_filters import node_drain
from osc_plugin import client as drain_client
from osc_plugin.v1 import common
from osc_plugin.v1 import drain_steps
from osc_plugin.v1 import planned

COLUMNS = ("Node", "Name", "Host", "Phase", "Instance", "Allocations",
           "Marked On")


def _marked_on(mark: drain.NodeMark) -> str:
    return ",".join(where for where, yes in (("ironic", mark.in_ironic),
                                             ("placement", mark.in_placement))
                    if yes)


def _row(facts: node_drain.BaremetalFacts) -> tuple[Any, ...]:
    return (facts.node.uuid, facts.node.name, facts.host or "",
            node_drain.node_phase(facts).value, facts.instance or "",
            len(facts.consumers), _marked_on(facts.node))


def _gather(client: drain_client.DrainClient,
            idents: list[str]) -> list[node_drain.BaremetalFacts]:
    if not client.has_ironic():
        raise exceptions.CommandError(
            "no baremetal endpoint in the catalog: 'drain node' needs Ironic")
    with common.api_errors():
        found, unknown = drain_steps.gather_nodes(client, idents)
    if unknown:
        raise exceptions.CommandError(
            "unknown Ironic node(s): " + ", ".join(unknown))
    return found


def _nodes_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nodes", metavar="<node>", nargs="+",
                        help="an Ironic node UUID or name")


class ShowNode(common.Table):
    """Show the drain phase of baremetal nodes.

    Instance is the instance Ironic has on the node; Marked On says where
    the drain mark is (ironic, placement). A node is Drained once it is
    marked and holds no instance and no allocation.

    Columns: Node, Name, Host, Phase, Instance, Allocations, Marked On.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _nodes_arg(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        idents = common.unique(parsed_args.nodes)
        return COLUMNS, [_row(f) for f in _gather(
            common.drain_client(self.app), idents)]


class _NodeChange(drain_steps.DrainChange):
    """A change to baremetal nodes: plan on stderr, ask, act, report."""

    #: Whether the command marks (start) or unmarks (cancel).
    start: bool

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _nodes_arg(parser)
        return parser

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[drain.Step]:
        facts = _gather(self.client, common.unique(parsed_args.nodes))
        return drain_steps.as_plan(node_drain.plan_node(facts, start=self.start))


class StartNode(_NodeChange):
    """Keep new boots off baremetal nodes (the mark only).

    The mark, CUSTOM_DRAIN_HOST, goes on the Ironic node, then on its
    provider; the nova-compute service and its other nodes are left alone.
    If a step fails, everything this run did is undone.
    """

    start = True
    runner = drain_steps.run_all_or_nothing


class CancelNode(_NodeChange):
    """Remove the drain mark from baremetal nodes.

    The mark goes from the Ironic node, then from its provider.
    """

    start = False
    runner = drain_steps.run_each
