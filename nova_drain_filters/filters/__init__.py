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

"""The drain host filters, loadable from ``[filter_scheduler]``.

``available_filters = nova_drain_filters.filters.all_filters`` makes Nova's
loader (``nova/loadables.py`` ``get_matching_classes``) call ``all_filters``
when the scheduler's HostManager starts. That is the one moment this code
runs at scheduler start-up, so it also registers and validates the
``[drain_filters]`` options (a bad value stops the scheduler with a message
naming the option) and installs the placement pre-filter.

It also starts the Ironic view's refresher when BaremetalAvailabilityFilter
is enabled and ``[ironic]`` is configured, so that the first request after
a start finds a listing (or waits for it, ``[drain_filters]
baremetal_startup_wait``); forked workers
restart it themselves (``nova_drain_filters/ironic_view/refresher.py``).
Otherwise the cloud may have no Ironic: the refresher then starts with the
first request that offers an Ironic node, which waits for its listing.
"""
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from nova_drain_filters import nova_compat
from nova_drain_filters import request_filter
from nova_drain_filters.filters import summary
from nova_drain_filters.filters.baremetal_availability_filter import (
    BaremetalAvailabilityFilter,
)
from nova_drain_filters.filters.disabled_service_filter import DisabledServiceFilter
from nova_drain_filters.filters.stale_compute_node_filter import StaleComputeNodeFilter

CONF = cfg.CONF
drain_conf.register_opts(CONF)

FILTER_CLASSES = (
    DisabledServiceFilter,
    StaleComputeNodeFilter,
    BaremetalAvailabilityFilter,
)
summary.OUR_FILTERS.update(cls.__name__ for cls in FILTER_CLASSES)
request_filter.set_recorder(summary.record_prefilter)

__all__ = [cls.__name__ for cls in FILTER_CLASSES] + ["all_filters"]


def all_filters() -> list[type]:
    """Return the filter classes; validate options; install the pre-filter;
    start the Ironic view if BaremetalAvailabilityFilter is enabled."""
    drain_conf.validate(CONF)
    nova_compat.log_gaps_once()
    request_filter.install_if_enabled(CONF)
    enabled = CONF.filter_scheduler.enabled_filters
    if BaremetalAvailabilityFilter.__name__ in enabled and _ironic_configured():
        ironic_view.get_view().start()
    return list(FILTER_CLASSES)


def _ironic_configured() -> bool:
    """True if nova.conf says how to reach Ironic (``nova/conf/ironic.py``).

    A cloud without Ironic that enables every drain filter must not log a
    failed refresh every interval; its refresher starts only if a request
    ever offers an Ironic node.
    """
    try:
        group = CONF.ironic
        return bool(group.auth_type or group.endpoint_override)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return False
