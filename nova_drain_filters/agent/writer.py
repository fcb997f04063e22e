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


"""The agent's picture of the cloud and its writes, with their refusals.

One ``Writer`` an agent. A reconcile installs a trusted picture (Nova's
compute nodes, Ironic's nodes, the providers carrying each drain trait).
An event names a node; the writer reads that node (``GET
/v1/nodes/{uuid}``, its traits too) and its provider's traits again, and
plans with the sync's own ``sync.plan`` against what it read, then writes
with its own ``sync.apply_steps``: only a change writes. Reading again,
not trusting the payload or the picture, is what keeps several agents
right: each event goes to one agent, so another agent's write, or a
later event handled by another agent first, is in no agent's picture.

=========================  =================================================
picture                    what an event or a reconcile writes
=========================  =================================================
none (untrusted, failed)   nothing; the events are kept for the next one
trusted                    the steps of ``sync.plan`` less those not needed
=========================  =================================================

Not needed: the baremetal trait of a node in use (an instance or an
allocation on it). Placement offers no free capacity on it anyway, so the
trait is left as it is until the node is free again. Marks (trait
additions) are limited per reconcile interval to ``allowed_count`` of the
Ironic nodes Nova knows (``[drain_agent] max_marked_fraction``), as the
CLI's clears are; clears are never limited.
"""
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping

from nova_drain_filters import decisions
from nova_drain_filters import listing_trust
from nova_drain_filters import sync
from nova_drain_filters import traits
from nova_drain_filters.agent import metrics as metrics_mod
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Picture:
    """What a reconcile read, kept current by events and writes."""

    #: Nova's compute node records.
    nodes: list[decisions.NodeFacts]
    #: Ironic's nodes by UUID, with their traits.
    ironic: dict[str, decisions.IronicNodeFacts]
    #: For each managed trait, the providers that carry it.
    have: dict[str, set[str]]

    @property
    def known(self) -> int:
        """Ironic compute nodes Nova knows: the write budget's total."""
        return sum(1 for n in self.nodes
                   if decisions.is_ironic(n.hypervisor_type))


def in_use(node: decisions.IronicNodeFacts | None) -> bool:
    """Whether placement already offers nothing of ``node``."""
    return bool(node and (node.instance_uuid or node.allocation_uuid))


def needed(steps: Iterable[sync.Step], picture: Picture) -> list[sync.Step]:
    """``steps`` less the baremetal trait's of nodes in use (see module)."""
    node_of = {n.uuid: n.nodename for n in picture.nodes if n.uuid}
    out = []
    for step in steps:
        if step.trait == traits.BAREMETAL_UNAVAILABLE:
            name = (step.uuid if step.target is sync.Target.IRONIC
                    else node_of.get(step.uuid, step.uuid))
            if in_use(picture.ironic.get(name)):
                continue
        out.append(step)
    return out


def plan_for(picture: Picture, uuids: Collection[str] | None = None
             ) -> list[sync.Step]:
    """The needed steps for the Ironic nodes ``uuids`` (None: every node).

    A subset is planned with the records of those nodes only, so that the
    rest of Nova's records are not taken as gone from Ironic.
    """
    if uuids is None:
        return needed(sync.plan(picture.nodes, picture.ironic, picture.have),
                      picture)
    subset = {u: picture.ironic[u] for u in uuids if u in picture.ironic}
    records = [n for n in picture.nodes if n.nodename in subset]
    return needed(sync.plan(records, subset, picture.have), picture)


class Writer:
    """Plans and writes against the picture; thread-safe."""

    def __init__(
        self, ironic_client: ironic.IronicClient,
        placement_client: placement.PlacementClient,
        metrics: metrics_mod.AgentMetrics,
        max_marked_fraction: Callable[[], float],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ironic = ironic_client
        self.placement = placement_client
        self.metrics = metrics
        self.max_marked_fraction = max_marked_fraction
        self.sleep = sleep
        self.clock = clock
        self.picture: Picture | None = None
        self._lock = threading.Lock()
        #: Nodes events named since the last gather began: read again
        #: once the gather's picture is installed.
        self._since_gather: set[str] = set()
        #: Nodes marked in this interval (the budget's use).
        self._marked: set[str] = set()
        #: (uuid, trait) whose write failed, logged once until it lands.
        self._failing: set[tuple[str, str]] = set()

    def begin_gather(self) -> None:
        """A reconcile starts reading: events from now on are newer."""
        with self._lock:
            self._since_gather = set()

    def untrust(self) -> None:
        """The picture can no longer be believed: write nothing."""
        with self._lock:
            self.picture = None
        self.metrics.trusted.set(0)

    def install(self, picture: Picture) -> list[sync.Step]:
        """Take a reconcile's picture (with the events since it began
        reading), renew the budget, and repair every difference."""
        with self._lock:
            self.picture = picture
            self._marked = set()
            self.metrics.trusted.set(1)
            self._read_again(self._since_gather)
            return self._write(plan_for(picture), {})

    def apply_events(self, uuids: Collection[str],
                     stamps: Mapping[str, float]) -> list[sync.Step]:
        """Write the verdicts of a batch's nodes, read again, once each.

        :param stamps: for each node, its last event's stamp (epoch
            seconds), for the lag histogram.
        """
        with self._lock:
            self._since_gather.update(uuids)
            if self.picture is None:
                LOG.debug("No trusted picture: %(count)d node(s) wait for "
                          "the next reconcile", {"count": len(uuids)})
                return []
            wanted = self._read_again(uuids)
            return self._write(plan_for(self.picture, wanted), stamps)

    def _read_again(self, uuids: Collection[str]) -> list[str]:
        """Read ``uuids``' nodes and providers into the picture; return
        the nodes read (a node gone, or not read, is the reconcile's)."""
        assert self.picture is not None
        provider_of: dict[str, list[str]] = {}
        for record in self.picture.nodes:
            if record.uuid:
                provider_of.setdefault(record.nodename, []).append(
                    record.uuid)
        read = []
        for uuid in sorted(uuids):
            try:
                node = self.ironic.get_node(uuid)
                if node is None:
                    continue
                self.picture.ironic[uuid] = node
                if in_use(node):
                    continue  # needs no trait: no provider read either
                for rp in provider_of.get(uuid, []):
                    have, _generation = self.placement.provider_traits(rp)
                    for trait in traits.MANAGED:
                        carriers = self.picture.have.setdefault(trait, set())
                        (carriers.add if trait in have
                         else carriers.discard)(rp)
            except http.ApiError as exc:
                LOG.warning("Could not read node %(uuid)s again; the next "
                            "reconcile will: %(error)s",
                            {"uuid": uuid, "error": exc})
                continue
            read.append(uuid)
        return read

    def _budgeted(self, steps: list[sync.Step]) -> list[sync.Step]:
        assert self.picture is not None
        allowed = listing_trust.allowed_count(self.picture.known,
                                              self.max_marked_fraction())
        marking = sorted({s.uuid for s in steps
                          if s.action is sync.Action.ADD} - self._marked)
        room = max(0, allowed - len(self._marked))
        refused = set(marking[room:])
        self._marked.update(marking[:room])
        if refused:
            self.metrics.budget_refusals.inc(len(refused))
            LOG.warning(
                "Refusing to mark %(count)d more node(s) unschedulable in "
                "this interval: %(marked)d of %(known)d marked already, "
                "[drain_agent] max_marked_fraction allows %(allowed)d; "
                "they are tried again next interval", {
                    "count": len(refused), "marked": len(self._marked),
                    "known": self.picture.known, "allowed": allowed})
        return [s for s in steps if not (
            s.action is sync.Action.ADD and s.uuid in refused)]

    def _write(self, steps: list[sync.Step],
               stamps: Mapping[str, float]) -> list[sync.Step]:
        steps = self._budgeted(steps)
        if not steps:
            return []
        applied, failures = sync.apply_steps(steps, self.ironic,
                                             self.placement, self.sleep)
        self._note(applied)
        now = self.clock()
        done_nodes = {s.uuid for s in applied}
        for uuid in done_nodes & set(stamps):
            self.metrics.events_applied.inc()
            self.metrics.lag.observe(max(0.0, now - stamps[uuid]))
        for step in applied:
            self.metrics.writes.labels(step.target.value).inc()
            if (step.uuid, step.trait) in self._failing:
                self._failing.discard((step.uuid, step.trait))
                LOG.info("%(target)s %(uuid)s: %(trait)s written after "
                         "failures", {"target": step.target.value,
                                      "uuid": step.uuid,
                                      "trait": step.trait})
        for failure in failures:
            step = failure.step
            self.metrics.write_failures.labels(step.target.value).inc()
            if (step.uuid, step.trait) not in self._failing:
                self._failing.add((step.uuid, step.trait))
                LOG.warning(
                    "%(target)s %(uuid)s: %(action)s %(trait)s failed, "
                    "tried again at the next reconcile: %(error)s", {
                        "target": step.target.value, "uuid": step.uuid,
                        "action": step.action.value, "trait": step.trait,
                        "error": failure.error})
        return applied

    def _note(self, applied: Iterable[sync.Step]) -> None:
        """Keep the picture as the writes left the cloud."""
        assert self.picture is not None
        for step in applied:
            add = step.action is sync.Action.ADD
            if step.target is sync.Target.PLACEMENT:
                carriers = self.picture.have.setdefault(step.trait, set())
                (carriers.add if add else carriers.discard)(step.uuid)
                continue
            node = self.picture.ironic.get(step.uuid)
            if node is not None:
                now = (node.traits | {step.trait} if add
                       else node.traits - {step.trait})
                self.picture.ironic[step.uuid] = dataclasses.replace(
                    node, traits=frozenset(now))
