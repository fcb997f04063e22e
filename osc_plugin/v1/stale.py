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

"""``openstack drain stale list|clear``: records no live reporter stands behind."""
import argparse
import contextlib
import dataclasses
import datetime
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import decisions
from nova_drain_filters import listing_trust
from nova_drain_filters import orphan_clear
from nova_drain_filters import orphans
from nova_drain_filters import stale
from nova_drain_filters.clients import http
from nova_drain_filters.clients import nova_db
from osc_plugin import client as drain_client
from osc_plugin.v1 import common
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

COLUMNS = ("UUID", "Kind", "Host", "Node", "Hypervisor Type", "Reasons",
           "Reason Codes", "Instances", "Allocations")
REASONS = sorted(c.value for c in decisions.ReasonCode)


class StepRefused(Exception):
    """A step the re-check before writing stopped: the plan is out of date."""


class Facts:
    """Everything ``stale`` needs, gathered in bulk (pages, not records)."""

    def __init__(self, client: drain_client.DrainClient,
                 max_missing_fraction: float,
                 grace: int = stale.DEFAULT_GRACE) -> None:
        self.client = client
        self.max_missing_fraction = max_missing_fraction
        progress = common.Progress("reading provider allocations")
        with common.api_errors(), contextlib.closing(progress):
            self.hypervisors = client.nova.hypervisors()
            services = client.nova.services()
            self.servers = client.nova.servers()
            self.migrations = client.nova.migrations_in_progress()
            listed = client.placement.providers()
            providers = {p["uuid"] for p in listed}
            marked = {p["uuid"] for p in client.placement.providers(
                required=orphans.COMPUTE_NODE_TRAIT)}
            # The roots orphan list judges without a record, no others.
            trees = orphans.nova_trees(
                listed, {h.uuid: h for h in self.hypervisors}, marked)
            compute = {t.root for t in trees.values() if not t.recorded}
            names = {t.root: t.node for t in trees.values()}
            #: The Ironic listing's verdict; None without Ironic.
            self.verdict: listing_trust.ListingVerdict | None
            ironic_nodes, self.verdict = common.ironic_listing(
                client, self.hypervisors, max_missing_fraction)
            now = datetime.datetime.now(datetime.timezone.utc)
            records = stale.find_stale(self.hypervisors, services, providers,
                                       compute, ironic_nodes, self.servers, now,
                                       names, grace)
            stale_rps = [r.uuid for r in records if r.uuid in providers]
            self.allocations = orphans.read_allocations(
                client.placement, stale_rps, progress)
        self.records = [
            dataclasses.replace(r, allocations=len(
                self.allocations.get(r.uuid, {}))) for r in records]
        #: Compute node records and compute providers: the budget's total.
        self.total = len({h.uuid for h in self.hypervisors} | compute)
        # The node each stale provider stands for: its compute node's name,
        # or for a provider without one, its name, which Nova sets to the
        # node's (nova/compute/resource_tracker.py _update_to_placement:
        # get_provider_tree_and_ensure_root(..., name=hypervisor_hostname)).
        listed_names = {p["uuid"]: p.get("name") for p in listed}
        self.nodes: dict[str, str | None] = {
            r.uuid: r.node or listed_names.get(r.uuid) or None
            for r in self.records}

    @property
    def untrusted(self) -> str | None:
        """Why the Ironic listing is not believed, or None."""
        if self.verdict is None or self.verdict.trusted:
            return None
        return common.untrusted(self.client, self.verdict,
                                self.max_missing_fraction)

    def live_consumers(self) -> dict[str, list[str]]:
        live = orphans.Liveness(self.servers, self.migrations)
        return {rp: [c for c in consumers
                     if live.orphan_reason(c, self.nodes.get(rp)) is None]
                for rp, consumers in self.allocations.items()}


def add_grace_option(parser: argparse.ArgumentParser) -> None:
    """``--grace``: how long a down nova-compute may be rebooting."""
    parser.add_argument(
        "--grace", metavar="<seconds>", type=common.int_arg("--grace", 0),
        default=stale.DEFAULT_GRACE,
        help="leave alone a nova-compute that has been down (not forced "
             "down) for less than this since it was last seen: it may be "
             f"rebooting (default {stale.DEFAULT_GRACE}; 0: none)")


def _row(r: stale.StaleRecord) -> tuple[Any, ...]:
    return (r.uuid, r.kind, r.host, r.node, r.hypervisor_type or "",
            decisions.summarize(r.reasons), ",".join(sorted(r.codes)),
            r.instances, r.allocations)


class ListStale(common.DrainLister):
    """List compute nodes and resource providers no live reporter backs.

    A record is stale when its nova-compute service has been down for
    --grace seconds or more, with the last heartbeat shown (service_down),
    or is forced down (service_forced_down); a host that still has servers
    is shown with them as service_down_with_servers instead, which 'stale
    clear' refuses;
    when its node is missing from Ironic (ironic_node_missing); when
    another record has the same node name (duplicate_node); or when it is
    a provider without a compute node (provider_without_node) or a compute
    node without a provider (node_without_provider). Those codes fill the
    Reason Codes column and are what --reason takes.

    Columns: UUID, Kind, Host, Node, Hypervisor Type, Reasons, Reason Codes,
    Instances, Allocations.

    No node is called missing from Ironic without Ironic in the catalog, or
    when the Ironic listing is not trusted (see --max-missing-fraction); in
    the second case stderr says why.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--host", metavar="<host>",
                            help="only the records of this compute host")
        parser.add_argument("--reason", metavar="<reason>", choices=REASONS,
                            help="only the records with this code in their "
                                 "Reason Codes column")
        add_grace_option(parser)
        common.add_missing_fraction_option(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        facts = Facts(common.drain_client(self.app),
                      parsed_args.max_missing_fraction, parsed_args.grace)
        if facts.untrusted:
            self.app.stderr.write(
                f"not reporting {decisions.ReasonCode.IRONIC_NODE_MISSING.value}"
                f": {facts.untrusted}\n")
        records = facts.records
        if parsed_args.host:
            hosts = {h.host for h in facts.hypervisors}
            if parsed_args.host not in hosts:
                raise exceptions.CommandError(
                    f"unknown compute host {parsed_args.host!r}")
            records = [r for r in records if r.host == parsed_args.host]
        if parsed_args.reason:
            records = [r for r in records if parsed_args.reason in r.codes]
        self.found = len(records)
        return COLUMNS, [_row(r) for r in records]


class ClearStale(planned.PlannedChange[stale.Step]):
    """Remove stale records as completely as possible, never what is in use.

    A down service whose nodes are all stale and that has no instance is
    deleted; Nova then removes its compute nodes, providers and host
    mapping, and any provider Nova leaves behind is reported. A provider
    without a compute node that no live consumer uses is deleted, after the
    allocations of its dead consumers. A single duplicate or Ironic-deleted
    compute node record is removed through Nova's object layer, and only
    with --nova-config on a controller: no API removes one. Everything else
    is skipped, with the reason.

    Name the records by the UUIDs 'stale list' shows, or pass --all.
    """

    columns = ("Step", "Target", "Result")
    budgeted = True
    nothing = "nothing to clear"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("uuids", metavar="<uuid>", nargs="*", default=[],
                           type=common.uuid_arg("stale record"),
                           help="a compute node or provider UUID that "
                                "'stale list' shows")
        which.add_argument("--all", action="store_true",
                           help="every record 'stale list' shows")
        parser.add_argument(
            "--nova-config", metavar="<path>", type=common.nova_config_arg,
            help="nova.conf of a controller; needed to remove a single "
                 "compute node record (there is no API for it)")
        add_grace_option(parser)
        common.add_missing_fraction_option(parser)
        return parser

    def make_plan(self, parsed_args: argparse.Namespace
                  ) -> planned.Plan[stale.Step]:
        facts = Facts(self.client, parsed_args.max_missing_fraction,
                      parsed_args.grace)
        if facts.untrusted:
            raise exceptions.CommandError(
                f"refusing to clear anything: {facts.untrusted}")
        self.facts = facts
        records = facts.records
        if parsed_args.uuids:
            known = {r.uuid for r in records}
            unknown = [u for u in parsed_args.uuids if u not in known]
            if unknown:
                raise exceptions.CommandError(
                    "not a stale record: " + ", ".join(unknown))
            records = [r for r in records if r.uuid in parsed_args.uuids]
        steps = stale.plan_clear(records, facts.hypervisors,
                                 facts.live_consumers())
        # Skips stay in the table, in plan order, but are no step to take.
        todo = [s for s in steps if s.action is not stale.Action.SKIP]
        return planned.Plan(
            steps=steps,
            lines=[f"{s.action.value} {s.target} ({s.detail})" for s in todo],
            budget=planned.Budget(sum(len(s.records) or 1 for s in todo),
                                  facts.total,
                                  "compute node records and providers"))

    def step_row(self, step: stale.Step, result: str) -> planned.Row:
        if step.action is stale.Action.SKIP:
            return (step.action.value, step.target, step.detail)
        return (step.action.value, step.target, result)

    def run_steps(self, steps: list[stale.Step],
                  parsed_args: argparse.Namespace) -> planned.Ran:
        rows, failures = [], []
        for step in steps:
            if step.action is stale.Action.SKIP:
                rows.append(self.step_row(step, ""))
                continue
            try:
                result = results.stale_cleared(
                    self._carry_out(step, self.facts, parsed_args))
            except (http.ApiError, nova_db.Unavailable, StepRefused) as exc:
                failures.append(f"{step.action.value} {step.target}: {exc}")
                result = results.FAILED
            rows.append(self.step_row(step, result))
        return rows, failures

    def _carry_out(self, step: stale.Step, facts: Facts,
                   parsed_args: argparse.Namespace) -> stale.Cleared:
        client = facts.client
        if step.action is stale.Action.DELETE_SERVICE:
            client.nova.delete_service(step.target)
            # Nova deletes the providers too but swallows its failures
            # (nova/api/openstack/compute/services.py delete).
            present = {p["uuid"] for p in client.placement.providers()}
            left = tuple(rp for rp in step.records if rp in present)
            return stale.Cleared(stale.Outcome.DELETED, left=left)
        if step.action is stale.Action.DELETE_COMPUTE_NODE:
            if not parsed_args.nova_config:
                raise nova_db.Unavailable(
                    "no API removes a single compute node record; run on a "
                    "controller with --nova-config /etc/nova/nova.conf")
            # Dead consumers first: if one is live again, nothing is deleted.
            cleared = self._clear_dead(client, step.target, facts)
            where = nova_db.delete_compute_node(step.target,
                                                parsed_args.nova_config)
            dropped = self._delete_provider(client, step.target)
            return stale.Cleared(stale.Outcome.DELETED, dropped, cleared,
                                 where=where)
        cleared = self._clear_dead(client, step.target, facts)
        return stale.Cleared(self._delete_provider(client, step.target),
                             consumers=cleared)

    def _clear_dead(self, client: drain_client.DrainClient, rp: str,
                    facts: Facts) -> int:
        """Clear the allocations of the provider's dead consumers.

        Each consumer is checked again against the node the provider stands
        for: one that is on that node now (it landed there after the plan),
        or has no node yet, keeps its allocation, and the step stops there.
        """
        dead = facts.allocations.get(rp, {})
        node = facts.nodes.get(rp)
        for consumer in sorted(dead):
            outcome = orphan_clear.clear_consumer(client.nova, client.placement,
                                             consumer, {rp: node})
            if outcome.result is orphan_clear.Outcome.SKIPPED:
                why = results.kept(outcome.kept) if outcome.kept else ""
                raise StepRefused(f"kept: consumer {consumer}: {why}")
        return len(dead)

    @staticmethod
    def _delete_provider(client: drain_client.DrainClient,
                         rp: str) -> stale.Outcome:
        try:
            client.placement.delete_provider(rp)
        except http.ApiError as exc:
            if isinstance(exc, http.NotFound):
                return stale.Outcome.PROVIDER_GONE
            raise
        return stale.Outcome.PROVIDER_DELETED
