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

"""Draining a host or a baremetal node: its phase, and what each command does.

Pure functions over facts the CLI gathers from Nova, placement and Ironic
every time: no state file, so any run on any machine resumes where the last
one stopped. The drain mark is ``CUSTOM_DRAIN_HOST`` on the providers (and on
an Ironic node, because Nova's Ironic driver copies node traits over its
provider); our own disable is a ``disabled_reason`` starting ``drain:``.
"""
import dataclasses
import enum
from collections.abc import Iterable
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import traits

MARK = traits.DRAIN_HOST
#: Our disabled_reason starts with this; any other is someone else's.
REASON_PREFIX = "drain:"
#: Nova's services.disabled_reason column is a String(255).
MAX_REASON = 255
#: The longest ``--reason`` text: what fits in MAX_REASON after
#: disable_reason's "drain: " (the prefix and one space).
MAX_REASON_TEXT = MAX_REASON - len(REASON_PREFIX + " ")
#: Blockers ``show`` names before "(+N more)"; characters of an API error
#: a one-line message quotes; the longest pause between two polls.
MAX_BLOCKERS, MAX_TAIL, MAX_DELAY = 3, 200, 30.0


class Phase(str, enum.Enum):
    ACTIVE = "Active"
    DISABLED = "Disabled"
    DRAINING = "Draining"
    DRAINED = "Drained"
    RELEASED = "Released"


@dataclasses.dataclass(frozen=True)
class NodeMark:
    """Where one compute node (one root provider) carries the mark."""

    uuid: str
    name: str
    #: An Ironic node: the mark must also be a node trait to survive.
    ironic: bool = False
    #: Placement has a provider for it.
    provider: bool = True
    in_placement: bool = False
    in_ironic: bool = False

    @property
    def marked(self) -> bool:
        return self.in_placement or self.in_ironic


def ours(service: decisions.ServiceFacts) -> bool:
    """Disabled by a drain (ours), not by someone else."""
    return service.disabled and (service.disabled_reason or "").startswith(
        REASON_PREFIX)


@dataclasses.dataclass(frozen=True)
class HostFacts:
    """What Nova, placement and Ironic say about one compute host."""

    host: str
    #: Its nova-compute service; ``is_up``: it would register the host
    #: again. None: released (or unknown).
    service: decisions.ServiceFacts | None
    nodes: tuple[NodeMark, ...] = ()
    servers: tuple[str, ...] = ()
    migrations: tuple[str, ...] = ()
    #: Consumers holding allocations on any provider of the host's trees.
    consumers: tuple[str, ...] = ()

    @property
    def marked(self) -> bool:
        """A host drain is on: our disable, or the mark on every node (a
        few marked nodes of an Ironic host are node drains)."""
        if self.service is not None and ours(self.service):
            return True
        return bool(self.nodes) and all(n.marked for n in self.nodes)

    @property
    def ironic_nodes(self) -> int:
        return sum(n.ironic for n in self.nodes)


def host_blockers(facts: HostFacts) -> list[str]:
    """What keeps a host from Drained: servers, migrations, other
    consumers."""
    known = set(facts.servers) | set(facts.migrations)
    return ([f"server {s}" for s in facts.servers]
            + [f"migration {m}" for m in facts.migrations]
            + [f"consumer {c}" for c in facts.consumers if c not in known])


def summarize_blockers(found: Sequence[str], limit: int = MAX_BLOCKERS) -> str:
    """Up to ``limit`` blockers, then how many more."""
    text = ", ".join(found[:limit])
    if len(found) > limit:
        text += f" (+{len(found) - limit} more)"
    return text


def host_phase(facts: HostFacts) -> Phase:
    """The phase of a host; a pure function.

    =================  ==============================  ==========  =========
    compute service    drain marked (our ``drain:``    anything    phase
                       reason, or mark on every node)  left [1]_
    =================  ==============================  ==========  =========
    none [2]_          any                             any         Released
    enabled            no                              any         Active
    disabled           no                              any         Disabled
    any                yes                             yes         Draining
    any                yes                             no          Drained
    =================  ==============================  ==========  =========

    .. [1] a server on the host, a migration in progress to or from it, or
       a consumer with allocations on one of its providers.
    .. [2] with compute node records left under the host's name; a name
       with neither is refused (``unknown``), not called Released.
    """
    if facts.service is None:
        return Phase.RELEASED
    if facts.marked:
        return Phase.DRAINING if host_blockers(facts) else Phase.DRAINED
    return Phase.DISABLED if facts.service.disabled else Phase.ACTIVE


class Action(str, enum.Enum):
    MARK_NODE = "mark Ironic node"
    MARK_PROVIDER = "mark provider"
    DISABLE = "disable service"
    UNMARK_NODE = "unmark Ironic node"
    UNMARK_PROVIDER = "unmark provider"
    ENABLE = "enable service"
    DELETE_SERVICE = "delete compute service"


class Outcome(enum.Enum):
    """How a step ended; the CLI words it (``osc_plugin/v1/results.py``)."""

    DONE = "done"
    FAILED = "failed"
    ROLLED_BACK = "rolled back"
    ROLLBACK_FAILED = "rollback failed"
    #: An ENABLE found the service no longer disabled by a drain.
    LEFT_DISABLED = "left disabled"
    #: A DELETE_SERVICE went through (Nova may have left things behind).
    RELEASED = "released"


_UNDO = {Action.MARK_NODE: Action.UNMARK_NODE,
         Action.MARK_PROVIDER: Action.UNMARK_PROVIDER,
         Action.DISABLE: Action.ENABLE}


@dataclasses.dataclass(frozen=True)
class Step:
    """One change; ``target`` is a provider, Ironic node or service UUID."""

    action: Action
    host: str
    target: str
    detail: str = ""
    #: The disabled_reason a DISABLE step writes.
    reason: str | None = None

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.host}: {self.action.value} {self.target}{detail}"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A host (or node) a command will not act on, and why; ``wait``:
    waiting may clear it (``finish --wait``)."""

    host: str
    why: str
    wait: bool = False

    def __str__(self) -> str:
        return f"{self.host}: {self.why}"


@dataclasses.dataclass(frozen=True)
class Settled:
    """A host (or node) already where a command would take it: nothing to
    do, and nothing refused."""

    host: str
    why: str

    def __str__(self) -> str:
        return f"{self.host}: {self.why}"


@dataclasses.dataclass
class Plan:
    """Steps, refusals, notes the operator must read before saying yes,
    and hosts (in ``done``) already where the command would take them."""

    steps: list[Step] = dataclasses.field(default_factory=list)
    refusals: list[Refusal] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    done: list[Settled] = dataclasses.field(default_factory=list)


def undo(step: Step) -> Step:
    """The step that reverses a ``start`` step (for a rollback)."""
    return dataclasses.replace(step, action=_UNDO[step.action],
                               detail="rollback", reason=None)


def disable_reason(text: str) -> str:
    """The disabled_reason a drain writes for the operator's ``--reason``."""
    return f"{REASON_PREFIX} {' '.join(text.split())}"


def mark_steps(host: str, nodes: Iterable[NodeMark],
               on: bool = True) -> list[Step]:
    """Mark (or unmark) every node, on the Ironic node first: Nova's Ironic
    driver copies node traits over the provider, so Ironic leads."""
    steps = []
    for n in nodes:
        if (n.ironic and not n.in_ironic) if on else n.in_ironic:
            steps.append(Step(Action.MARK_NODE if on else Action.UNMARK_NODE,
                              host, n.uuid, n.name))
        if (n.provider and not n.in_placement) if on else n.in_placement:
            steps.append(Step(Action.MARK_PROVIDER if on
                              else Action.UNMARK_PROVIDER, host, n.uuid,
                              n.name))
    return steps


#: Why a host without a compute service is refused: Nova keeps no record
#: of a released host, so nothing tells it from a typo.
NO_SERVICE = "no compute service (unknown host, or released)"


def unknown(facts: HostFacts) -> Refusal | None:
    """A host ``show`` cannot vouch for: no service and no compute node.

    ``finish`` deletes the service, and Nova deletes its compute nodes,
    providers and host mapping with it (``nova/api/openstack/compute/
    services.py`` ``delete``): a cleanly released host leaves nothing a
    typo would not. Such a name is refused as ``start`` refuses it, never
    shown as Released; Released is shown only while compute node records
    remain under the name (what Nova left behind).
    """
    if facts.service is None and not facts.nodes:
        return Refusal(facts.host, NO_SERVICE)
    return None


def _refusal(facts: HostFacts, has_ironic: bool) -> Refusal | None:
    """Why start or cancel cannot act on a host at all."""
    if facts.service is None:
        return Refusal(facts.host, NO_SERVICE)
    if facts.ironic_nodes and not has_ironic:
        return Refusal(facts.host, "its nodes are Ironic nodes but there is "
                       "no baremetal endpoint: Nova's Ironic driver puts "
                       "back the node traits over placement's")
    return None


def plan_start(hosts: Sequence[HostFacts], reason: str,
               has_ironic: bool = True) -> Plan:
    """Mark every node of every host, then disable each enabled service once.

    All marks come before any disable (cordon everything first). A service
    someone else disabled keeps its reason and gets only the mark. A host
    with nothing to do is left alone; any refusal means no step at all.
    """
    plan = Plan()
    disables = []
    for facts in hosts:
        service, refusal = facts.service, _refusal(facts, has_ironic)
        if refusal or service is None:
            plan.refusals += [refusal] if refusal else []
            continue
        marks = mark_steps(facts.host, facts.nodes)
        plan.steps.extend(marks)
        if not service.disabled:
            disables.append(Step(Action.DISABLE, facts.host, service.uuid,
                                 reason=disable_reason(reason)))
        elif not ours(service) and marks:
            plan.notes.append(
                f"{facts.host} was disabled by someone else "
                f"({service.disabled_reason or 'no reason'}): it keeps that "
                f"and gets only the mark")
        if facts.ironic_nodes and (marks or not service.disabled):
            plan.notes.append(
                f"{facts.host} is an Ironic nova-compute service fronting "
                f"{facts.ironic_nodes} node(s): this keeps new boots off "
                f"all of them (use 'openstack drain node start' for one)")
        if not marks and service.disabled:
            plan.done.append(Settled(facts.host, "already draining"))
    plan.steps.extend(disables)
    if plan.refusals:
        plan.steps = []
    return plan


def plan_cancel(hosts: Sequence[HostFacts], has_ironic: bool = True) -> Plan:
    """Remove the mark; enable the service only if our reason is still on it."""
    plan = Plan()
    enables = []
    for facts in hosts:
        service, refusal = facts.service, _refusal(facts, has_ironic)
        if refusal or service is None:
            plan.refusals += [refusal] if refusal else []
            continue
        unmarks = mark_steps(facts.host, facts.nodes, on=False)
        plan.steps.extend(unmarks)
        if ours(service):
            enables.append(Step(Action.ENABLE, facts.host, service.uuid))
        elif service.disabled and unmarks:
            plan.notes.append(
                f"{facts.host} stays disabled: someone else disabled it "
                f"({service.disabled_reason or 'no reason'})")
        if not unmarks and not ours(service):
            plan.done.append(Settled(facts.host, "not drained by us"))
    plan.steps.extend(enables)
    return plan


def finish_refusal(facts: HostFacts) -> Refusal | None:
    """Why ``finish`` may not release this host yet, or None if it may."""
    phase = host_phase(facts)
    if phase in (Phase.ACTIVE, Phase.DISABLED):
        return Refusal(facts.host, f"not draining ({phase.value}): run "
                       "'openstack drain host start' first")
    found = host_blockers(facts)
    if found:
        return Refusal(facts.host, "still Draining, blocked by "
                       + summarize_blockers(found), wait=True)
    if facts.service is not None and facts.service.is_up:
        return Refusal(
            facts.host, "Drained, but its nova-compute still reports and "
            "would register the host again: stop it, then 'openstack "
            f"compute service set --down {facts.host} nova-compute'",
            wait=True)
    return None


def plan_finish(hosts: Sequence[HostFacts]) -> Plan:
    """Delete the compute service of each Drained host nobody runs any more."""
    plan = Plan()
    for facts in hosts:
        refusal = finish_refusal(facts) if facts.service else None
        if facts.service is None:
            plan.done.append(Settled(facts.host, "already released"))
        elif refusal:
            plan.refusals.append(refusal)
        else:
            plan.steps.append(Step(
                Action.DELETE_SERVICE, facts.host, facts.service.uuid,
                f"{len(facts.nodes)} node(s); Nova removes the host mapping, "
                "providers and aggregate membership: no undo"))
            if facts.ironic_nodes:
                plan.notes.append(
                    f"{facts.host}'s Ironic nodes keep the mark in Ironic: "
                    "a nova-compute that takes them over keeps them out of "
                    "scheduling until 'openstack drain node cancel'")
    return plan


def leftovers(host: str, providers: Iterable[str], service_left: bool,
              mapped: bool, aggregates: Iterable[str]) -> list[str]:
    """What Nova left behind after deleting a host's compute service.

    :param providers: the host's providers still in placement.
    :param aggregates: names of aggregates still listing the host.
    """
    left = ([f"compute service of {host}"] * service_left
            + [f"host mapping of {host}"] * mapped)
    left += [f"provider {rp}" for rp in sorted(providers)]
    left += [f"membership of aggregate {a}" for a in sorted(aggregates)]
    return left


def tail(text: str, limit: int = MAX_TAIL) -> str:
    """The end of an error message, on one line (the API's own words)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else "..." + line[-limit:]


def next_delay(attempt: int, remaining: float) -> float:
    """Backoff for polling: 1, 2, 4 ... up to MAX_DELAY s, never past the
    deadline."""
    return max(0.0, min(float(2 ** min(attempt, 5)), MAX_DELAY, remaining))
