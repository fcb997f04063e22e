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


"""The ``[drain_filters]`` options, documented where they are declared.

The filters run inside ``nova-scheduler``, so these options live in
``nova.conf``. Placement and Ironic are reached with the ``[placement]`` and
``[ironic]`` sections Nova already has; nothing is configured twice.

Declared in one module per part, as ``nova/conf`` does: ``filters``,
``baremetal`` and ``notifications``; ``validation`` checks them all.
"""
from collections.abc import Iterable

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters.conf import agent
from nova_drain_filters.conf import validation
from nova_drain_filters.conf.baremetal import FAIL_PASS
from nova_drain_filters.conf.baremetal import FAIL_REJECT
from nova_drain_filters.conf.baremetal import baremetal_opts
from nova_drain_filters.conf.baremetal import derived_snapshot_age
from nova_drain_filters.conf.baremetal import max_snapshot_age
from nova_drain_filters.conf.filters import filter_opts
from nova_drain_filters.conf.notifications import notification_opts
from nova_drain_filters.conf.validation import NUMBER_CEILING
from nova_drain_filters.conf.validation import ConfigError

__all__ = ["FAIL_PASS", "FAIL_REJECT", "GROUP", "NUMBER_CEILING",
           "ConfigError", "derived_snapshot_age", "drain_group", "list_opts",
           "max_snapshot_age", "register_opts", "validate"]

GROUP = "drain_filters"

drain_group = cfg.OptGroup(
    GROUP,
    title="nova-drain-filters options",
    help="""
Options for the nova-drain-filters scheduler filters and placement pre-filter.

Enable the filters in ``[filter_scheduler]``::

    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_drain_filters.filters.all_filters
    enabled_filters = ...,DisabledServiceFilter,StaleComputeNodeFilter,
                      BaremetalAvailabilityFilter
""",
)

ALL_OPTS = filter_opts + baremetal_opts + notification_opts


LOG = logging.getLogger(__name__)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[drain_filters]`` options on ``conf`` (idempotent)."""
    conf.register_group(drain_group)
    conf.register_opts(ALL_OPTS, group=drain_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """Return the options for ``oslo-config-generator``: ``[drain_filters]``
    and ``nova-drain-agent``'s ``[drain_agent]``."""
    return [(drain_group, list(ALL_OPTS)),
            (agent.agent_group, list(agent.agent_opts))]


def _all_opts() -> Iterable[cfg.Opt]:
    return iter(ALL_OPTS)


def validate(conf: cfg.ConfigOpts) -> None:
    """Raise ConfigError naming the first bad option (``validation``);
    warn of each name in ``[drain_filters]`` that is no option."""
    validation.validate(conf, GROUP, _all_opts())
    group = getattr(conf, GROUP)
    # Unset, the age is derived from the interval (baremetal.py
    # max_snapshot_age) and cannot be smaller; an explicit one is checked.
    age, interval = (group.baremetal_max_snapshot_age,
                     group.baremetal_refresh_interval)
    if age is not None and age < interval:
        raise validation.ConfigError(
            f"[{GROUP}] baremetal_max_snapshot_age: {age} is smaller than "
            f"baremetal_refresh_interval ({interval})")
    for name, close in validation.unknown_options(
            conf, GROUP, _all_opts()).items():
        LOG.warning(
            "[%(group)s] %(name)s is not an option of nova-drain-filters "
            "and is ignored%(hint)s", {
                "group": GROUP, "name": name,
                "hint": f"; did you mean {close}?" if close else ""})
