"""DisabledServiceFilter: reject hosts whose nova-compute service is unusable."""
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.filters import base


class DisabledServiceFilter(base.DrainFilter):
    """Reject hosts whose service is disabled, forced down or down."""

    # RUN_ON_REBUILD = False and run_filter_once_per_request = True are
    # inherited from DrainFilter, which says why.

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        facts = base.service_facts(host_state, self.service_is_up(host_state))
        return decisions.service_reasons(facts, base.now())
