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

"""StaleComputeNodeFilter: reject compute nodes no live reporter stands behind."""
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import base

CONF = cfg.CONF


class StaleComputeNodeFilter(base.DrainFilter):
    """Reject duplicates, nodes gone from Ironic and, if enabled, old ones."""

    # RUN_ON_REBUILD = False and run_filter_once_per_request = True are
    # inherited from DrainFilter, which says why.

    def rejections(
        self, hosts: Sequence[Any], spec_obj: Any
    ) -> base.Rejections:
        """Decide over the whole list: duplicates need to see every record.

        Only candidates of this request are compared. A duplicate whose live
        twin is not a candidate passes here; the trait sync marks it with
        CUSTOM_DRAIN_STALE_NODE so that placement stops offering it.
        """
        facts = {id(h): base.node_facts(h, self.service_is_up(h))
                 for h in hosts}
        duplicates = decisions.duplicate_reasons(facts.values())
        max_age = CONF.drain_filters.stale_node_max_age
        now = base.now()
        view = None
        if any(decisions.is_ironic(n.hypervisor_type) for n in facts.values()):
            view = ironic_view.get_view()
            view.ensure_running()
        found: base.Rejections = {}
        for key, node in facts.items():
            reasons = []
            if node.key in duplicates:
                reasons.append(duplicates[node.key])
            if view is not None and decisions.is_ironic(node.hypervisor_type):
                missing = view.missing_reason(node.nodename, node.updated_at)
                if missing:
                    reasons.append(missing)
            too_old = decisions.age_reason(node, now, max_age)
            if too_old:
                reasons.append(too_old)
            if reasons:
                found[key] = reasons
        return found
