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
import datetime
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import base

CONF = cfg.CONF


class StaleComputeNodeFilter(base.DrainFilter):
    """Reject duplicates, nodes gone from Ironic and, if enabled, old ones."""

    def rejections(
        self, hosts: Sequence[Any], spec_obj: Any
    ) -> base.Rejections:
        """Decide over the whole list: duplicates need to see every record.

        Only candidates of this request are compared. A duplicate whose live
        twin is not a candidate passes here; the trait sync marks it with
        CUSTOM_DRAIN_STALE_NODE so that placement stops offering it.

        Fast path: a host whose node name is unique in the list, that the
        Ironic snapshot lists (or that is no Ironic node) and that is young
        enough costs a few set lookups; only the others get facts and
        reasons.
        """
        names: set[str] = set()
        twins: set[str] = set()
        ironic_nodes = []
        for host_state in hosts:
            name = host_state.nodename
            if name in names:
                twins.add(name)
            names.add(name)
            if host_state.hypervisor_type == decisions.IRONIC_HYPERVISOR_TYPE:
                ironic_nodes.append(name)
        view = snap = None
        if ironic_nodes:
            view = ironic_view.get_view()
            view.wait_until_ready()
            view.observe(ironic_nodes)
            snap = view.trusted()
        listed = snap.nodes if snap is not None else None
        max_age = CONF.drain_filters.stale_node_max_age
        now = base.now()
        oldest = (decisions.as_utc(now) - datetime.timedelta(seconds=max_age)
                  if max_age > 0 else None)
        suspects = []
        for host_state in hosts:
            name = host_state.nodename
            if name in twins or (
                    listed is not None and name not in listed
                    and host_state.hypervisor_type
                    == decisions.IRONIC_HYPERVISOR_TYPE) or (
                    oldest is not None and host_state.updated is not None
                    and decisions.as_utc(host_state.updated) < oldest):
                suspects.append(host_state)
        if not suspects:
            return {}
        return self._judge(hosts, suspects, twins, view, now, max_age)

    def _judge(
        self, hosts: Sequence[Any], suspects: list[Any], twins: set[str],
        view: ironic_view.IronicView | None, now: datetime.datetime,
        max_age: int,
    ) -> base.Rejections:
        """The reasons of the hosts the fast path could not clear."""
        facts = {id(h): base.node_facts(h, self.service_is_up(h))
                 for h in hosts if h.nodename in twins}
        duplicates = decisions.duplicate_reasons(facts.values())
        found: base.Rejections = {}
        for host_state in suspects:
            # service_up only ranks duplicates; others need no servicegroup.
            node = facts.get(id(host_state)) or base.node_facts(
                host_state, True)
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
                found[id(host_state)] = reasons
        return found
