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

"""DisabledServiceFilter: reject hosts whose nova-compute service is unusable."""
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.filters import base


class DisabledServiceFilter(base.DrainFilter):
    """Reject hosts whose service is disabled, forced down or down."""

    def rejections(
        self, hosts: Sequence[Any], spec_obj: Any
    ) -> base.Rejections:
        """A healthy host costs three dict reads and two comparisons.

        Only a host that fails the fast check (or whose heartbeat the fast
        check cannot judge) goes through ``decisions.service_reasons``.
        """
        is_up = base.UpCheck(self.servicegroup_api)

        def judge(host_state: Any) -> list[decisions.Reason]:
            service = base.plain(host_state.service)
            if service and not service.get("disabled") and not (
                    service.get("forced_down")) and is_up(service):
                return []
            return self.host_reasons(host_state, spec_obj)

        found: base.Rejections = {}
        for host_state in hosts:
            self.add_reasons(found, host_state, judge)
        return found

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        facts = base.service_facts(host_state, self.service_is_up(host_state))
        return decisions.service_reasons(facts, base.now())
