"""BaremetalAvailabilityFilter: reject Ironic nodes Ironic says are unusable."""
from typing import Any

from oslo_log import log as logging

from nova_drain_filters import decisions
from nova_drain_filters.filters import base

LOG = logging.getLogger(__name__)


class BaremetalAvailabilityFilter(base.DrainFilter):
    """Reject Ironic nodes that Ironic does not report as available."""

    # RUN_ON_REBUILD = False and run_filter_once_per_request = True are
    # inherited from DrainFilter, which says why.

    _announced = False

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        if not BaremetalAvailabilityFilter._announced:
            BaremetalAvailabilityFilter._announced = True
            LOG.info("BaremetalAvailabilityFilter has no Ironic view yet "
                     "and passes every host")
        return []
