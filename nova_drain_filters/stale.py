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

"""Stale compute nodes and providers: what they are, and what clearing does.

``find_stale`` is a pure function over what Nova, placement and Ironic
report; ``plan_clear`` turns its rows into steps that never touch what is
still in use. The CLI gathers the facts and carries the steps out.
"""
import dataclasses
import datetime
import enum
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import conf
from nova_drain_filters import decisions
from nova_drain_filters import listing_trust
from nova_drain_filters.clients import compute

COMPUTE_NODE = "compute_node"
RESOURCE_PROVIDER = "resource_provider"

_SERVICE_GONE = {decisions.ReasonCode.SERVICE_DOWN.value,
                 decisions.ReasonCode.SERVICE_FORCED_DOWN.value,
                 decisions.ReasonCode.SERVICE_DOWN_WITH_SERVERS.value}
#: ``stale list --grace``'s default: a nova-compute down for less is left
#: alone, as a host that may be rebooting.
DEFAULT_GRACE = 600
# A single record is removed only when nothing will report it again: its
# node is gone from Ironic, or another record owns the node. A record that
# merely lacks its provider is nova-compute's to repair on its periodic.
_RECORD_GONE = {decisions.ReasonCode.DUPLICATE_NODE.value,
                decisions.ReasonCode.IRONIC_NODE_MISSING.value}

#: ``[drain_filters] ironic_missing_max_fraction``'s default, for callers
#: that read no nova.conf (the CLI): one rule, one default.
DEFAULT_MAX_MISSING_FRACTION: float = next(
    opt.default for _group, opts in conf.list_opts() for opt in opts
    if opt.dest == "ironic_missing_max_fraction")


class UntrustedListing(Exception):
    """An Ironic listing lacks too many of the nodes Nova knows to be believed.

    Raised instead of calling those nodes deleted; ``verdict`` has the counts.
    """

    def __init__(self, verdict: listing_trust.ListingVerdict) -> None:
        self.verdict = verdict
        super().__init__(str(verdict))


def judge_listing(nodes: Iterable[decisions.NodeFacts],
                  listed: Collection[str],
                  max_fraction: float) -> listing_trust.ListingVerdict:
    """``listing_trust.listing_verdict`` over the Ironic records among ``nodes``.

    An Ironic compute node is named after its Ironic node's UUID
    (``nova/virt/ironic/driver.py`` ``_node_resource``:
    ``hypervisor_hostname = node.uuid``), so ``listed`` is the listing's UUIDs.
    """
    known = {n.nodename for n in nodes if decisions.is_ironic(n.hypervisor_type)}
    return listing_trust.listing_verdict(known, listed, max_fraction)


@dataclasses.dataclass(frozen=True)
class StaleRecord:
    """A compute node or provider no live reporter stands behind."""

    kind: str
    uuid: str
    host: str
    node: str
    hypervisor_type: str | None
    reasons: tuple[decisions.Reason, ...]
    instances: int = 0
    allocations: int = 0
    service_id: str | None = None

    @property
    def codes(self) -> set[str]:
        return {r.code.value for r in self.reasons}


def find_stale(
    hypervisors: Sequence[compute.Hypervisor],
    services: Iterable[compute.Service],
    providers: Iterable[str],
    compute_providers: Iterable[str],
    ironic_nodes: Mapping[str, object] | None,
    servers: Iterable[compute.Server],
    now: datetime.datetime,
    names: Mapping[str, str] | None = None,
    grace: int = 0,
) -> list[StaleRecord]:
    """Every stale compute node and provider; a pure function.

    :param providers: every resource provider UUID.
    :param compute_providers: root providers Nova made for compute nodes
        (they carry ``COMPUTE_NODE``); ``orphans.nova_trees`` judges them
        the same way for ``orphan list``.
    :param ironic_nodes: Ironic's nodes by UUID, or None without Ironic.
        Listed after Nova's records: Nova learns nodes only from Ironic.
    :param names: provider names; a provider with no compute node is shown
        with its name as the node, the node name Nova gave it, which is
        what its allocations are re-checked against before a clear.
    :param grace: seconds a down (not forced down) service is left alone
        (``decisions.stale_service_reasons``).
    """
    by_host = {s.host: s for s in services}
    providers = set(providers)
    instances: dict[tuple[str | None, str | None], int] = {}
    on_host: dict[str | None, int] = {}
    for server in servers:
        key = (server.host, server.node)
        instances[key] = instances.get(key, 0) + 1
        on_host[server.host] = on_host.get(server.host, 0) + 1
    duplicates = decisions.duplicate_reasons(h.facts for h in hypervisors)
    found = []
    for hv in hypervisors:
        service = by_host.get(hv.host)
        reasons = [] if service is None else decisions.stale_service_reasons(
            service.facts, now, on_host.get(hv.host, 0), grace)
        if ironic_nodes is not None and decisions.is_ironic(
                hv.hypervisor_type) and hv.hypervisor_hostname not in ironic_nodes:
            reasons.append(decisions.missing_from_ironic_reason(
                hv.hypervisor_hostname))
        if hv.facts.key in duplicates:
            reasons.append(duplicates[hv.facts.key])
        if hv.uuid not in providers:
            reasons.append(decisions.Reason(
                decisions.ReasonCode.NODE_WITHOUT_PROVIDER))
        if reasons:
            found.append(StaleRecord(
                COMPUTE_NODE, hv.uuid, hv.host, hv.hypervisor_hostname,
                hv.hypervisor_type, tuple(reasons),
                instances.get((hv.host, hv.hypervisor_hostname), 0),
                service_id=hv.service_id))
    known = {hv.uuid for hv in hypervisors}
    for rp in sorted(set(compute_providers) - known):
        found.append(StaleRecord(
            RESOURCE_PROVIDER, rp, "", (names or {}).get(rp, ""), None,
            (decisions.Reason(decisions.ReasonCode.PROVIDER_WITHOUT_NODE),)))
    return found


class Action(str, enum.Enum):
    """The kind of a ``stale clear`` step; the values are its Step column."""

    DELETE_SERVICE = "delete compute service"
    DELETE_PROVIDER = "delete resource provider"
    DELETE_COMPUTE_NODE = "delete compute node record"
    SKIP = "skip"


@dataclasses.dataclass(frozen=True)
class Step:
    """One thing ``stale clear`` will do, or will not do and why."""

    action: Action
    target: str
    detail: str
    records: tuple[str, ...] = ()


class Outcome(enum.Enum):
    """How a step's target ended; the CLI words it."""

    #: The compute service, or the single compute node record.
    DELETED = "deleted"
    PROVIDER_DELETED = "provider deleted"
    PROVIDER_GONE = "provider already gone"


@dataclasses.dataclass(frozen=True)
class Cleared:
    """What one carried-out step did."""

    outcome: Outcome
    #: A compute node record's provider: how it ended too.
    provider: Outcome | None = None
    #: Dead consumers whose allocations went before the provider.
    consumers: int = 0
    #: A deleted service's providers that Nova left behind.
    left: tuple[str, ...] = ()
    #: The deleted compute node record's host/node.
    where: str = ""


def plan_clear(records: Sequence[StaleRecord],
               hypervisors: Sequence[compute.Hypervisor],
               live_consumers: Mapping[str, Sequence[str]]) -> list[Step]:
    """What clearing the given records takes; never anything in use.

    :param live_consumers: for each stale provider, the consumers on it
        that still exist (instances or migrations in progress).

    * a service that is down or forced down, whose every node is stale and
      that has no instances, is deleted whole (Nova then removes its nodes,
      providers and host mapping);
    * a provider with no compute node is deleted if no live consumer uses
      it (its dead consumers' allocations go first);
    * a single record that nothing will report again (a duplicate, or a
      node gone from Ironic) is removed through Nova's object layer, if it
      has no instances;
    * everything else is skipped, saying why.
    """
    steps: list[Step] = []
    stale_nodes = {r.uuid: r for r in records if r.kind == COMPUTE_NODE}
    nodes_by_service: dict[str, list[compute.Hypervisor]] = {}
    for hv in hypervisors:
        if hv.service_id:
            nodes_by_service.setdefault(hv.service_id, []).append(hv)
    handled: set[str] = set()
    for service_id, nodes in sorted(nodes_by_service.items()):
        if not all(hv.uuid in stale_nodes
                   and stale_nodes[hv.uuid].codes & _SERVICE_GONE
                   for hv in nodes):
            continue
        host = nodes[0].host
        busy = sum(stale_nodes[hv.uuid].instances for hv in nodes)
        live = sorted(c for hv in nodes for c in live_consumers.get(hv.uuid, ()))
        uuids = tuple(hv.uuid for hv in nodes)
        handled.update(uuids)
        if busy:
            steps.append(Step(Action.SKIP, host,
                                  f"service has {busy} instance(s)", uuids))
        elif live:
            steps.append(Step(Action.SKIP, host,
                                  f"in use by {', '.join(live)}", uuids))
        else:
            steps.append(Step(Action.DELETE_SERVICE, service_id,
                                  f"host {host}, {len(nodes)} node(s)", uuids))
    for record in records:
        if record.uuid in handled:
            continue
        live = list(live_consumers.get(record.uuid, ()))
        if record.kind == RESOURCE_PROVIDER:
            if live:
                steps.append(Step(
                    Action.SKIP, record.uuid,
                    f"in use by {', '.join(sorted(live))}", (record.uuid,)))
            else:
                steps.append(Step(Action.DELETE_PROVIDER, record.uuid,
                                      "no compute node", (record.uuid,)))
        elif record.instances or live:
            steps.append(Step(
                Action.SKIP, record.uuid,
                f"node {record.node} has {record.instances} instance(s)"
                f" and {len(live)} live consumer(s)", (record.uuid,)))
        elif record.codes & _SERVICE_GONE:
            steps.append(Step(
                Action.SKIP, record.uuid,
                "its service is down: clear all of the service's nodes "
                "together (or --all) to delete the service",
                (record.uuid,)))
        elif not record.codes & _RECORD_GONE:
            steps.append(Step(
                Action.SKIP, record.uuid,
                "its service is alive and still reports it: "
                + decisions.summarize(record.reasons), (record.uuid,)))
        else:
            steps.append(Step(
                Action.DELETE_COMPUTE_NODE, record.uuid,
                f"host {record.host} node {record.node}: "
                + decisions.summarize(record.reasons), (record.uuid,)))
    return steps
