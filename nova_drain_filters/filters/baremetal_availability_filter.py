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

    def rejections(
        self, hosts: Sequence[Any], spec_obj: Any
    ) -> base.Rejections:
        """Judge each Ironic host from the snapshot; others pass untouched.

        A request with Ironic hosts first waits for this process's first
        listing (``baremetal_startup_wait``). A listed node costs one dict
        lookup: the snapshot worked out every unusable node's reasons when
        it was built. Nova's Ironic driver reports the node UUID as the
        hypervisor hostname (``nova/virt/ironic/driver.py``
        ``_node_resource``).
        """
        ironic = [h for h in hosts
                  if h.hypervisor_type == decisions.IRONIC_HYPERVISOR_TYPE]
        if not ironic:
            return {}
        view = ironic_view.get_view()
        view.wait_until_ready()
        snap = view.trusted()
        unusable = snap.unusable if snap is not None else {}
        listed = snap.nodes if snap is not None else {}
        found: base.Rejections = {}
        observed = False
        for host_state in ironic:
            node = host_state.nodename
            if node in listed:
                reasons = unusable.get(node)
                if reasons:
                    found[id(host_state)] = list(reasons)
                continue
            if not observed:
                # Whether a listing that lacks this node is believed depends
                # on how many of the nodes Nova offers it lacks.
                view.observe(h.nodename for h in ironic)
                observed = True
            self.add_reasons(found, host_state,
                             lambda h: view.availability_reasons(h.nodename))
        return found
