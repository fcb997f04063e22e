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


"""The capacity report's picture, as the agent reads it after a reconcile.

The reconcile already holds Nova's compute nodes and Ironic's nodes (with
their resource class); this adds Nova's services, placement's providers
and the providers of each trait the filters forbid, one request each, so
``/metrics`` carries the gauges of ``drain report --prometheus-textfile``
under the same names. Unlike the command it reads no server or migration
pages: a host being drained is counted as ``drain_drained``, not
``drain_draining``; its nodes are unschedulable either way.
"""
import datetime
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import report
from nova_drain_filters import traits
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import placement


def read(hypervisors: Sequence[compute.Hypervisor],
         ironic_nodes: Mapping[str, decisions.IronicNodeFacts],
         nova: compute.ComputeClient,
         placement_client: placement.PlacementClient,
         now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
             datetime.timezone.utc),
         ) -> list[report.NodeVerdict]:
    """The report's verdicts of every compute node; raises ApiError."""
    services = nova.services()
    providers = {p["uuid"] for p in placement_client.providers()}
    known = placement_client.existing_traits(traits.DEFAULT_FORBIDDEN)
    marked = {t: {p["uuid"] for p in placement_client.providers(required=t)}
              for t in traits.DEFAULT_FORBIDDEN if t in known}
    return report.judge(report.Picture(
        hypervisors, services, providers, marked, ironic_nodes, (), (),
        now()))
