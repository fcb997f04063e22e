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

"""BaremetalAvailabilityFilter: reject Ironic nodes that Ironic calls unusable."""
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import base


class BaremetalAvailabilityFilter(base.DrainFilter):
    """Reject Ironic nodes that Ironic does not report as available."""

    # RUN_ON_REBUILD = False and run_filter_once_per_request = True are
    # inherited from DrainFilter, which says why.

    def rejections(
        self, hosts: Sequence[Any], spec_obj: Any
    ) -> base.Rejections:
        """Start the Ironic view on the first Ironic host, then judge each.

        Hosts that are not Ironic nodes pass untouched; clouds without
        Ironic never start the refresher.
        """
        if any(decisions.is_ironic(h.hypervisor_type) for h in hosts):
            ironic_view.get_view().ensure_running()
        return super().rejections(hosts, spec_obj)

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        if not decisions.is_ironic(host_state.hypervisor_type):
            return []
        # Nova's Ironic driver reports the node UUID as the hypervisor
        # hostname (nova/virt/ironic/driver.py _node_resource).
        return ironic_view.get_view().availability_reasons(host_state.nodename)
