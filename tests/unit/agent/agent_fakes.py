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


"""A writer on stateful fakes of Ironic and placement, and its facts."""
import dataclasses
from collections.abc import Iterable
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.agent import metrics
from nova_drain_filters.agent import writer
from tests.unit import ironic_fakes

#: Calls that read; ``AgentWriter.writes`` leaves them out.
READS = ("placement.ensure_trait", "placement.get", "placement.traits",
         "ironic.get_node")


def record(nodename: str, host: str = "c1") -> decisions.NodeFacts:
    """Nova's record of an Ironic node; its uuid is the node's."""
    return decisions.NodeFacts(host=host, nodename=nodename, uuid=nodename,
                               service_up=True, hypervisor_type="ironic")


class StatefulIronic(ironic_fakes.FakeSyncIronic):
    """Its nodes' traits follow the writes; ``get_node`` reads them."""

    def get_node(self, uuid: str) -> decisions.IronicNodeFacts | None:
        self.requests += 1
        self.log.append(("ironic.get_node", uuid))
        return next((n for n in self.nodes if n.uuid == uuid), None)

    def set(self, node: decisions.IronicNodeFacts) -> None:
        """Change a node as Ironic would, keeping its traits."""
        old = next((n for n in self.nodes if n.uuid == node.uuid), None)
        if old is not None:
            node = dataclasses.replace(node, traits=old.traits)
        self.nodes = [n for n in self.nodes if n.uuid != node.uuid] + [node]

    def _call(self, name: str, uuid: str, trait: str) -> None:
        super()._call(name, uuid, trait)
        self.nodes = [dataclasses.replace(n, traits=frozenset(
            n.traits | {trait} if name.endswith("add_trait")
            else n.traits - {trait})) if n.uuid == uuid else n
            for n in self.nodes]


class StatefulPlacement(ironic_fakes.FakeSyncPlacement):
    """Its ``carriers`` follow the writes; ``provider_traits`` reads them."""

    def provider_traits(self, rp_uuid: str) -> tuple[set[str], int]:
        self.log.append(("placement.traits", rp_uuid))
        return {t for t, rps in self.carriers.items() if rp_uuid in rps}, 1

    def update_provider_traits(self, rp_uuid: str, add: Iterable[str] = (),
                               remove: Iterable[str] = ()) -> bool:
        super().update_provider_traits(rp_uuid, add, remove)
        for trait in add:
            self.carriers.setdefault(trait, set()).add(rp_uuid)
        for trait in remove:
            self.carriers.setdefault(trait, set()).discard(rp_uuid)
        return True


class AgentWriter:
    """A ``Writer`` on the stateful fakes, sharing one ``log`` of calls,
    with no sleeps."""

    def __init__(self, fraction: float = 1.0) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.ironic = StatefulIronic(self.log)
        self.placement = StatefulPlacement(self.log)
        self.metrics = metrics.AgentMetrics()
        self.sleeps: list[float] = []
        self.fraction = fraction
        self.writer = writer.Writer(
            self.ironic, self.placement, self.metrics,  # type: ignore
            lambda: self.fraction, sleep=self.sleeps.append,
            clock=lambda: 1000.0)

    def install(self, *nodes: decisions.IronicNodeFacts) -> list[Any]:
        """A reconcile's picture of ``nodes`` (the cloud's as it is)."""
        for node in nodes:
            self.ironic.set(node)
        picture = writer.Picture(
            [record(n.uuid) for n in self.ironic.nodes],
            {n.uuid: n for n in self.ironic.nodes},
            {t: set(rps) for t, rps in self.placement.carriers.items()})
        return self.writer.install(picture)

    def event(self, *nodes: decisions.IronicNodeFacts,
              stamps: dict[str, float] | None = None) -> list[Any]:
        """Ironic changes ``nodes``; their events come in one batch."""
        for node in nodes:
            self.ironic.set(node)
        return self.writer.apply_events([n.uuid for n in nodes],
                                        stamps or {})

    def writes(self) -> list[tuple[Any, ...]]:
        return [c for c in self.log if c[0] not in READS]

    def value(self, name: str, **labels: str) -> float:
        found = self.metrics.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else found
