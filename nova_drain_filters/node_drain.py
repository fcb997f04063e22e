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

"""Draining one baremetal node (``openstack drain node``): its phase and plan.

The node's mark is the same ``CUSTOM_DRAIN_HOST``, set on the Ironic node
and on its provider (``drain.mark_steps``); Nova's Ironic driver copies the
node's traits over the provider, so both carry it. Pure functions.
"""
import dataclasses
from collections.abc import Sequence

from nova_drain_filters import drain


@dataclasses.dataclass(frozen=True)
class BaremetalFacts:
    """One Ironic node for ``drain node``: its mark and what it runs."""

    label: str
    node: drain.NodeMark
    host: str | None
    instance: str | None
    consumers: tuple[str, ...] = ()


def node_phase(facts: BaremetalFacts) -> drain.Phase:
    """Active without the mark; Draining while an instance or allocation
    remains; Drained after."""
    if not facts.node.marked:
        return drain.Phase.ACTIVE
    if facts.instance or facts.consumers:
        return drain.Phase.DRAINING
    return drain.Phase.DRAINED


def plan_node(nodes: Sequence[BaremetalFacts], start: bool) -> drain.Plan:
    """Mark (``start``) or unmark each node, on Ironic and its provider."""
    plan = drain.Plan()
    for facts in nodes:
        steps = drain.mark_steps(facts.label, [facts.node], on=start)
        plan.steps.extend(steps)
        if not steps:
            plan.done.append(drain.Settled(
                facts.label, "already marked" if start else "not marked"))
    return plan
