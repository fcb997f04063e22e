"""BaremetalAvailabilityFilter: reject Ironic nodes that Ironic calls unusable."""
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import baremetal
from nova_drain_filters import decisions
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
            baremetal.get_view().ensure_running()
        return super().rejections(hosts, spec_obj)

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        if not decisions.is_ironic(host_state.hypervisor_type):
            return []
        # Nova's Ironic driver reports the node UUID as the hypervisor
        # hostname (nova/virt/ironic/driver.py _node_resource).
        return baremetal.get_view().availability_reasons(host_state.nodename)
