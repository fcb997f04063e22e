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

"""What ``drain host`` and ``drain node`` share: gather facts, carry out steps.

The decisions are in :mod:`nova_drain_filters.drain`; this module only reads
Nova, placement and Ironic into its facts and performs its steps.
"""
import argparse
import dataclasses
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import ClassVar

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters import node_drain
from nova_drain_filters import orphans
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from osc_plugin import client as drain_client
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

COLUMNS = ("Host", "Step", "Target", "Result")
Row = tuple[str, ...]
#: A host's servers, migrations and consumers.
Load = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
IRONIC_PAGE = 1000


@dataclasses.dataclass
class Gathered:
    """Facts by host, and every provider of each host's trees."""

    hosts: dict[str, drain.HostFacts]
    providers: dict[str, list[str]]
    has_ironic: bool


def marked_providers(client: drain_client.DrainClient) -> set[str]:
    """Providers carrying the mark (one request, two if the trait exists).

    Placement answers 400 to ``required`` naming a trait it never saw.
    """
    if not client.placement.existing_traits([drain.MARK]):
        return set()
    return {p["uuid"] for p in client.placement.providers(
        required=drain.MARK)}


def gather_hosts(client: drain_client.DrainClient,
                 hosts: Sequence[str] | None) -> Gathered:
    """Facts for ``hosts``, or for every host that is not Active.

    Requests: the service list, hypervisor pages, the provider list, the
    marked providers, Ironic's node pages (only if a host has Ironic
    nodes), then for each host looked at closer its servers and migrations
    (or the whole lists, without ``hosts``) and one allocation read per
    provider of its trees.
    """
    nova, placement = client.nova, client.placement
    services = {s.host: s for s in nova.services()}
    nodes_of: dict[str, list[compute.Hypervisor]] = {}
    for hv in nova.hypervisors():
        nodes_of.setdefault(hv.host, []).append(hv)
    tree: dict[str, list[str]] = {}
    for p in placement.providers():
        tree.setdefault(p.get("root_provider_uuid") or p["uuid"],
                        []).append(p["uuid"])
    marked = marked_providers(client)
    names = list(hosts) if hosts is not None else sorted(
        set(services) | set(nodes_of))
    has_ironic = client.has_ironic()
    ironic_marked: set[str] = set()
    if has_ironic and any(decisions.is_ironic(hv.hypervisor_type)
                          for h in names for hv in nodes_of.get(h, ())):
        ironic_marked = {n.uuid for n in client.ironic.list_nodes(IRONIC_PAGE)
                         if drain.MARK in n.traits}
    found: dict[str, drain.HostFacts] = {}
    for host in names:
        service = services.get(host)
        facts = None if service is None else service.facts
        found[host] = drain.HostFacts(host, facts, tuple(
            drain.NodeMark(
                uuid=hv.uuid, name=hv.hypervisor_hostname,
                ironic=decisions.is_ironic(hv.hypervisor_type),
                provider=hv.uuid in tree, in_placement=hv.uuid in marked,
                in_ironic=hv.uuid in ironic_marked)
            for hv in nodes_of.get(host, ())))
    if hosts is None:
        found = {h: f for h, f in found.items()
                 if drain.host_phase(f) is not drain.Phase.ACTIVE}
    providers = {h: [rp for n in f.nodes for rp in tree.get(n.uuid, ())]
                 for h, f in found.items()}
    load = _load(client, [h for h, f in found.items() if f.service],
                 providers, bulk=hosts is None)
    for h, (servers, migrations, consumers) in load.items():
        found[h] = dataclasses.replace(found[h], servers=servers,
                                       migrations=migrations,
                                       consumers=consumers)
    return Gathered(found, providers, has_ironic)


def _load(client: drain_client.DrainClient, hosts: Sequence[str],
          providers: dict[str, list[str]], bulk: bool) -> dict[str, Load]:
    """Servers, migrations and consumers of each host."""
    if not hosts:
        return {}
    nova = client.nova
    servers: dict[str, list[str]] = {h: [] for h in hosts}
    migrations: dict[str, list[str]] = {h: [] for h in hosts}
    if bulk:
        for s in nova.servers():
            if s.host in servers:
                servers[s.host].append(s.uuid)
        for m in nova.migrations_in_progress():
            for h in set(hosts) & {m.source_compute, m.dest_compute}:
                migrations[h].append(m.uuid)
    else:
        for h in hosts:
            servers[h] = [s.uuid for s in nova.servers(host=h)]
            migrations[h] = [m.uuid for m in nova.migrations_in_progress(h)]
    allocations = orphans.read_allocations(
        client.placement, [rp for h in hosts for rp in providers[h]])
    load: dict[str, Load] = {}
    for h in hosts:
        consumers = sorted({c for rp in providers[h]
                            for c in allocations.get(rp, {})})
        load[h] = (tuple(servers[h]), tuple(migrations[h]), tuple(consumers))
    return load


def gather_nodes(client: drain_client.DrainClient, idents: Sequence[str]
                 ) -> tuple[list[node_drain.BaremetalFacts], list[str]]:
    """Facts for Ironic nodes by UUID or name; and the idents not found."""
    found, unknown = [], []
    hosts = {hv.uuid: hv.host for hv in client.nova.hypervisors()}
    for ident in idents:
        node = client.ironic.get_node(ident)
        if node is None:
            unknown.append(ident)
            continue
        try:
            have, _gen = client.placement.provider_traits(node.uuid)
            provider = True
        except http.NotFound:
            have, provider = set(), False
        consumers = tuple(sorted(client.placement.provider_allocations(
            node.uuid))) if provider else ()
        found.append(node_drain.BaremetalFacts(
            label=ident, host=hosts.get(node.uuid),
            instance=node.instance_uuid, consumers=consumers,
            node=drain.NodeMark(
                uuid=node.uuid, name=node.name or node.uuid, ironic=True,
                provider=provider, in_placement=drain.MARK in have,
                in_ironic=drain.MARK in node.traits)))
    return found, unknown


def carry_out(client: drain_client.DrainClient,
              step: drain.Step) -> drain.Outcome:
    """Perform one step; raise http.ApiError if the API refuses."""
    action = step.action
    if action is drain.Action.MARK_NODE:
        client.ironic.add_trait(step.target, drain.MARK)
    elif action is drain.Action.UNMARK_NODE:
        client.ironic.remove_trait(step.target, drain.MARK)
    elif action is drain.Action.MARK_PROVIDER:
        client.placement.ensure_trait(drain.MARK)
        client.placement.update_provider_traits(step.target, add=[drain.MARK])
    elif action is drain.Action.UNMARK_PROVIDER:
        client.placement.update_provider_traits(step.target,
                                                remove=[drain.MARK])
    elif action is drain.Action.DISABLE:
        client.nova.update_service(step.target, disabled=True,
                                   reason=step.reason)
    elif action is drain.Action.ENABLE:
        # Enable only what still carries our reason: someone may have
        # disabled it again for their own reason since we looked.
        now = [s for s in client.nova.services(step.host)
               if s.uuid == step.target]
        if not now or not drain.ours(now[0].facts):
            return drain.Outcome.LEFT_DISABLED
        client.nova.update_service(step.target, disabled=False)
    elif action is drain.Action.DELETE_SERVICE:
        client.nova.delete_service(step.target)
    return drain.Outcome.DONE


def row(step: drain.Step, result: str | drain.Outcome) -> Row:
    """The step's row; an outcome in the words of ``results.drained``."""
    text = result if isinstance(result, str) else results.drained(result)
    return (step.host, step.action.value, step.target, text)


def failure(step: drain.Step, exc: Exception) -> str:
    """``host: what failed: the API's own words`` on one line."""
    return f"{step.host}: {step.action.value} {step.target}: {drain.tail(str(exc))}"


#: run_all_or_nothing or run_each.
Runner = Callable[[drain_client.DrainClient, Iterable[drain.Step]],
                  tuple[list[Row], list[str]]]


def run_all_or_nothing(client: drain_client.DrainClient, steps: Iterable[drain.Step]
                       ) -> tuple[list[Row], list[str]]:
    """Carry out steps; on the first failure undo the ones done, newest
    first. Returns the rows and the failures (the cause first)."""
    rows: list[Row] = []
    done: list[drain.Step] = []
    for step in steps:
        try:
            carry_out(client, step)
        except http.ApiError as exc:
            rows.append(row(step, drain.Outcome.FAILED))
            failures = [failure(step, exc)]
            for prior in reversed(done):
                back = drain.undo(prior)
                try:
                    carry_out(client, back)
                    rows.append(row(back, drain.Outcome.ROLLED_BACK))
                except http.ApiError as undo_exc:
                    rows.append(row(back, drain.Outcome.ROLLBACK_FAILED))
                    failures.append("rollback " + failure(back, undo_exc))
            touched = sorted({s.host for s in done})
            failures[0] += ("; rolled back this run's changes"
                            + (f" on {', '.join(touched)}" if touched else
                               " (none were made)"))
            return rows, failures
        done.append(step)
        rows.append(row(step, drain.Outcome.DONE))
    return rows, []


def run_each(client: drain_client.DrainClient, steps: Iterable[drain.Step]
             ) -> tuple[list[Row], list[str]]:
    """Carry out every step; a failure does not stop the others."""
    rows, failures = [], []
    for step in steps:
        try:
            rows.append(row(step, carry_out(client, step)))
        except http.ApiError as exc:
            rows.append(row(step, drain.Outcome.FAILED))
            failures.append(failure(step, exc))
    return rows, failures


def leftovers(client: drain_client.DrainClient, host: str,
              providers: Iterable[str]) -> list[str]:
    """What Nova left behind after deleting ``host``'s compute service."""
    present = {p["uuid"] for p in client.placement.providers()}
    return drain.leftovers(
        host, [rp for rp in providers if rp in present],
        service_left=bool(client.nova.services(host)),
        mapped=client.nova.host_mapped(host),
        aggregates=[a.name for a in client.nova.aggregates()
                    if host in a.hosts])


def as_plan(plan: drain.Plan) -> planned.Plan[drain.Step]:
    """A drain plan as the base shows it: hosts with nothing to do first."""
    return planned.Plan(steps=list(plan.steps), notes=list(plan.notes),
                        rows=[(r.host, "nothing to do", "", r.why)
                              for r in plan.done])


class DrainChange(planned.PlannedChange[drain.Step]):
    """A drain of hosts or nodes: drain steps, carried out by ``runner``."""

    columns = COLUMNS
    #: run_all_or_nothing or run_each.
    runner: ClassVar[Runner]

    def step_row(self, step: drain.Step, result: str) -> planned.Row:
        return row(step, result)

    def run_steps(self, steps: list[drain.Step],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        rows, failures = type(self).runner(self.client, steps)
        return list(rows), failures
