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

"""Is this node schedulable, and if not, why: pure functions over plain facts.

The host filters, the trait sync and the CLI gather facts their own way (a
``HostState``, the Nova and Ironic APIs) and ask the same functions, so the
three cannot disagree. Nothing here does I/O or reads configuration.
"""
import dataclasses
import datetime
import enum
from collections.abc import Iterable
from collections.abc import Sequence

from nova_drain_filters import traits


class ReasonCode(str, enum.Enum):
    """Why a node is not schedulable; the values are stable for scripts."""

    SERVICE_DISABLED = "service_disabled"
    SERVICE_FORCED_DOWN = "service_forced_down"
    SERVICE_DOWN = "service_down"
    SERVICE_DOWN_WITH_SERVERS = "service_down_with_servers"
    DUPLICATE_NODE = "duplicate_node"
    NODE_TOO_OLD = "node_too_old"
    IRONIC_NODE_MISSING = "ironic_node_missing"
    BAREMETAL_UNAVAILABLE = "baremetal_unavailable"
    BAREMETAL_UNKNOWN = "baremetal_unknown"
    PROVIDER_WITHOUT_NODE = "provider_without_node"
    NODE_WITHOUT_PROVIDER = "node_without_provider"
    CONSUMER_MISSING = "consumer_missing"
    INSTANCE_ELSEWHERE = "instance_elsewhere"


_LABELS = {
    ReasonCode.SERVICE_DISABLED: "service disabled",
    ReasonCode.SERVICE_FORCED_DOWN: "service forced down",
    ReasonCode.SERVICE_DOWN: "service down",
    ReasonCode.SERVICE_DOWN_WITH_SERVERS: "service down with servers",
    ReasonCode.DUPLICATE_NODE: "duplicate compute node",
    ReasonCode.NODE_TOO_OLD: "compute node not updated",
    ReasonCode.IRONIC_NODE_MISSING: "node missing from Ironic",
    ReasonCode.BAREMETAL_UNAVAILABLE: "baremetal",
    ReasonCode.BAREMETAL_UNKNOWN: "baremetal state unknown",
    ReasonCode.PROVIDER_WITHOUT_NODE: "resource provider with no compute node",
    ReasonCode.NODE_WITHOUT_PROVIDER: "compute node with no resource provider",
    ReasonCode.CONSUMER_MISSING: "consumer does not exist",
    ReasonCode.INSTANCE_ELSEWHERE: "instance lives elsewhere",
}

# Which trait the sync sets for a reason. Service reasons have none: Nova
# itself keeps COMPUTE_STATUS_DISABLED, and a down service is judged live.
_TRAITS = {
    ReasonCode.DUPLICATE_NODE: traits.STALE_NODE,
    ReasonCode.NODE_TOO_OLD: traits.STALE_NODE,
    ReasonCode.IRONIC_NODE_MISSING: traits.STALE_NODE,
    ReasonCode.BAREMETAL_UNAVAILABLE: traits.BAREMETAL_UNAVAILABLE,
}


@dataclasses.dataclass(frozen=True)
class Reason:
    """One reason a node is rejected: a stable code and a human detail."""

    code: ReasonCode
    detail: str = ""
    #: For a baremetal reason, the Ironic condition without free text
    #: (``provision_state=clean wait``, ``maintenance``): what the capacity
    #: report groups nodes by. Not compared: the detail says it all.
    state: str = dataclasses.field(default="", compare=False)

    @property
    def label(self) -> str:
        """The short human name of the code, e.g. ``service down``."""
        return _LABELS[self.code]

    @property
    def trait(self) -> str | None:
        """The trait the trait sync sets for this reason, if any."""
        return _TRAITS.get(self.code)

    def __str__(self) -> str:
        return f"{self.label}: {self.detail}" if self.detail else self.label


@dataclasses.dataclass(frozen=True)
class ServiceFacts:
    """What the decisions need to know about a nova-compute service."""

    host: str
    disabled: bool
    forced_down: bool
    #: Up by Nova's servicegroup rules (``nova/servicegroup/api.py``
    #: ``service_is_up``), which already count ``forced_down`` as down.
    is_up: bool
    disabled_reason: str | None = None
    last_seen_up: datetime.datetime | None = None
    #: The service's UUID; empty where the facts do not say (a HostState).
    uuid: str = ""


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What the decisions need to know about one compute node record."""

    host: str
    nodename: str
    uuid: str | None
    service_up: bool
    updated_at: datetime.datetime | None = None
    hypervisor_type: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(host, nodename): how Nova's HostManager tells host states apart."""
        return (self.host, self.nodename)


@dataclasses.dataclass(frozen=True)
class IronicNodeFacts:
    """The fields of an Ironic node that say whether it can take an instance."""

    uuid: str
    provision_state: str | None
    power_state: str | None = None
    maintenance: bool = False
    maintenance_reason: str | None = None
    retired: bool = False
    retired_reason: str | None = None
    fault: str | None = None
    instance_uuid: str | None = None
    allocation_uuid: str | None = None
    name: str | None = None
    traits: frozenset[str] = frozenset()
    #: Only when asked for (the capacity report): Nova's Ironic driver
    #: makes it the node's one inventory class.
    resource_class: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.traits, frozenset):
            shared = shared_traits(self.traits)
            if shared is not self.traits:
                object.__setattr__(self, "traits", shared)


#: One frozenset for each set of traits nodes have (``shared_traits``).
_TRAIT_SETS: dict[frozenset[str], frozenset[str]] = {}
#: More distinct sets than this are kept apart, each node its own.
TRAIT_SETS_MAX = 4096


def shared_traits(found: frozenset[str]) -> frozenset[str]:
    """The one frozenset of nodes whose traits are ``found``.

    A frozenset, even an empty one, is an object the garbage collector
    tracks, and a scheduler holds facts for every node it knows: 50,000
    sets for a snapshot of 50,000 nodes, and one more set kept for every
    event. Nodes of one hardware class share their traits, so a cloud has
    few distinct sets; each is kept once. Past ``TRAIT_SETS_MAX`` of them
    (no cloud's hardware, but nothing is unbounded), sets are not shared.
    """
    shared = _TRAIT_SETS.get(found)
    if shared is not None:
        return shared
    if len(_TRAIT_SETS) >= TRAIT_SETS_MAX:
        return found
    return _TRAIT_SETS.setdefault(found, found)


#: The hypervisor_type Nova's Ironic driver reports
#: (``nova/virt/ironic/driver.py`` ``_get_hypervisor_type``).
IRONIC_HYPERVISOR_TYPE = "ironic"

#: Power states Nova's Ironic driver itself counts as unusable
#: (``_node_resources_unavailable``: ERROR and NOSTATE).
_BAD_POWER_STATES = (None, "error")


def is_ironic(hypervisor_type: str | None) -> bool:
    """True for a compute node that Nova's Ironic driver reports."""
    return hypervisor_type == IRONIC_HYPERVISOR_TYPE


def as_utc(value: datetime.datetime) -> datetime.datetime:
    """The same time, timezone-aware; naive times are UTC in Nova's DB."""
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def _ago(then: datetime.datetime, now: datetime.datetime) -> str:
    seconds = int((as_utc(now) - as_utc(then)).total_seconds())
    return f"{as_utc(then).strftime('%Y-%m-%dT%H:%M:%SZ')}, {seconds}s ago"


def service_reasons(
    svc: ServiceFacts, now: datetime.datetime
) -> list[Reason]:
    """Why the service's hosts cannot take instances; [] if they can.

    Same outcome as Nova's ``ComputeFilter`` (disabled, or not up by the
    servicegroup rules) but with a reason each:

    ========  ===========  =====  ===================
    disabled  forced_down  is_up  reasons
    ========  ===========  =====  ===================
    no        no           yes    none
    yes       any          any    disabled (+ others)
    any       yes          any    forced down
    any       no           no     down, last seen ...
    ========  ===========  =====  ===================
    """
    reasons = []
    if svc.disabled:
        reasons.append(
            Reason(ReasonCode.SERVICE_DISABLED, svc.disabled_reason or "")
        )
    if svc.forced_down:
        reasons.append(Reason(ReasonCode.SERVICE_FORCED_DOWN))
    elif not svc.is_up:
        detail = (
            f"last seen {_ago(svc.last_seen_up, now)}"
            if svc.last_seen_up
            else "never seen"
        )
        reasons.append(Reason(ReasonCode.SERVICE_DOWN, detail))
    return reasons


def stale_service_reasons(
    svc: ServiceFacts, now: datetime.datetime, servers: int, grace: int
) -> list[Reason]:
    """Why a service's records may be stale; [] while it may come back.

    ``stale list`` and ``stale clear`` ask this, not the scheduler: a host
    the filters reject at once (``service_reasons``) is not yet stale.
    Disabled is never stale. A service down (not forced) for less than
    ``grace`` seconds since it was last seen may be rebooting and is left
    alone. A host that still has ``servers`` is not stale however long it
    has been down: its code says so, and ``stale clear`` refuses it.

    ===========  ======================  =======  =================
    forced_down  down since last seen    servers  reasons
    ===========  ======================  =======  =================
    no           up                      any      none
    no           < grace                 any      none
    no           >= grace (or never)     0        down
    yes          any                     0        forced down
    any          >= grace (or forced)    > 0      down with servers
    ===========  ======================  =======  =================
    """
    if svc.is_up and not svc.forced_down:
        return []
    if not svc.forced_down and svc.last_seen_up is not None and (
            as_utc(now) - as_utc(svc.last_seen_up)).total_seconds() < grace:
        return []
    found = service_reasons(dataclasses.replace(svc, disabled=False), now)
    if not servers:
        return found
    why = "; ".join(str(r) for r in found)
    return [Reason(ReasonCode.SERVICE_DOWN_WITH_SERVERS,
                   f"{servers} server(s) on the host; {why}")]


def _keeper_rank(node: NodeFacts) -> tuple[bool, datetime.datetime, str, str]:
    oldest = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    updated = as_utc(node.updated_at) if node.updated_at else oldest
    # Highest rank wins: a live service first, then the newest record; host
    # and uuid only make the choice deterministic.
    return (node.service_up, updated, node.host, node.uuid or "")


def duplicate_reasons(
    nodes: Iterable[NodeFacts],
) -> dict[tuple[str, str], Reason]:
    """Find compute node records that duplicate another for one node name.

    An Ironic hash-ring rebalance can leave two records for one node (Nova
    bugs 1853009 and 1841481). The record to keep is the one whose service is
    up and that was updated last; every other record of that name gets a
    DUPLICATE_NODE reason naming the keeper. Returns {(host, nodename): reason}.
    """
    by_name: dict[str, list[NodeFacts]] = {}
    for node in nodes:
        by_name.setdefault(node.nodename, []).append(node)
    found = {}
    for group in by_name.values():
        if len(group) < 2:
            continue
        keeper = max(group, key=_keeper_rank)
        for node in group:
            if node is not keeper:
                found[node.key] = Reason(
                    ReasonCode.DUPLICATE_NODE,
                    f"{node.nodename} is also on host {keeper.host}"
                    f" ({keeper.uuid})",
                )
    return found


def age_reason(
    node: NodeFacts, now: datetime.datetime, max_age: int
) -> Reason | None:
    """The opt-in age rule: a reason if the record is older than max_age.

    ``max_age`` 0 turns the rule off. A record never updated has no age and
    is left alone: the rule must not reject what it cannot judge.
    """
    if max_age <= 0 or node.updated_at is None:
        return None
    age = (as_utc(now) - as_utc(node.updated_at)).total_seconds()
    if age <= max_age:
        return None
    return Reason(
        ReasonCode.NODE_TOO_OLD,
        f"last updated {_ago(node.updated_at, now)} (limit {max_age}s)",
    )


def baremetal_reasons(node: IronicNodeFacts) -> list[Reason]:
    """Why Ironic says this node cannot take a new instance; [] if it can.

    A node can take one when it is ``available``, not in maintenance, not
    retired, without a fault, with a known power state that is not
    ``error``, and with neither an instance nor an allocation on it. Each
    failed condition is one reason, e.g. ``baremetal: provision_state=clean
    wait``.
    """
    found = []

    def add(state: str, detail: str = "") -> None:
        found.append(Reason(ReasonCode.BAREMETAL_UNAVAILABLE,
                            state + detail, state))

    if node.provision_state != "available":
        add(f"provision_state={node.provision_state}")
    if node.maintenance:
        add("maintenance", f" ({node.maintenance_reason})"
            if node.maintenance_reason else "")
    if node.power_state in _BAD_POWER_STATES:
        add(f"power_state={node.power_state or 'unknown'}")
    if node.retired:
        add("retired", f" ({node.retired_reason})"
            if node.retired_reason else "")
    if node.fault:
        add(f"fault={node.fault}")
    if node.instance_uuid:
        add("instance_uuid", f"={node.instance_uuid}")
    if node.allocation_uuid:
        add("allocation_uuid", f"={node.allocation_uuid}")
    return found


def missing_from_ironic_reason(node_uuid: str) -> Reason:
    """The reason for a compute node whose Ironic node no longer exists."""
    return Reason(ReasonCode.IRONIC_NODE_MISSING, node_uuid)


def summarize(reasons: Sequence[Reason]) -> str:
    """Join reasons into one line for a log or a table cell."""
    return "; ".join(str(r) for r in reasons)
