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


"""A writer on the sync's fakes, and the facts the agent's tests build."""
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.agent import metrics
from nova_drain_filters.agent import writer
from tests.unit import ironic_fakes


def record(nodename: str, host: str = "c1") -> decisions.NodeFacts:
    """Nova's record of an Ironic node; its uuid is the node's."""
    return decisions.NodeFacts(host=host, nodename=nodename, uuid=nodename,
                               service_up=True, hypervisor_type="ironic")


class AgentWriter:
    """A ``Writer`` on ``FakeSyncIronic`` and ``FakeSyncPlacement``,
    sharing one ``log`` of calls, with no sleeps."""

    def __init__(self, fraction: float = 1.0) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.ironic = ironic_fakes.FakeSyncIronic(self.log)
        self.placement = ironic_fakes.FakeSyncPlacement(self.log)
        self.metrics = metrics.AgentMetrics()
        self.sleeps: list[float] = []
        self.fraction = fraction
        self.writer = writer.Writer(
            self.ironic, self.placement, self.metrics,  # type: ignore
            lambda: self.fraction, sleep=self.sleeps.append,
            clock=lambda: 1000.0)

    def install(self, *nodes: decisions.IronicNodeFacts,
                have: dict[str, set[str]] | None = None) -> list[Any]:
        picture = writer.Picture([record(n.uuid) for n in nodes],
                                 {n.uuid: n for n in nodes}, have or {})
        return self.writer.install(picture)

    def writes(self) -> list[tuple[Any, ...]]:
        return [c for c in self.log if c[0] not in (
            "placement.ensure_trait", "placement.get")]

    def value(self, name: str, **labels: str) -> float:
        found = self.metrics.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else found
