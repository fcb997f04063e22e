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

"""Every Nova internal this project uses, per supported release, in one place.

Supported: Nova 31 (2025.1) to Nova 34 (2026.2). The filters run inside
nova-scheduler and use what Nova has no stable API for; each accessor below
names the Nova file it reads, and :data:`INTERNALS` says for each release
which Nova function or attribute is used and why. All four releases were
read (and the functional suite runs on each, ``tox -e functional-novaNN``):

=============================  ===========================================
internal                       Nova 31, 32, 33, 34
=============================  ===========================================
``HostState`` fields           the same six, set by ``HostState.update``
``servicegroup.API``           the same class and ``service_is_up``
``servicegroup`` ``DbDriver``  the same ``is_up`` and ``service_down_time``
``request_is_rebuild``         the same function, same hint
``ALL_REQUEST_FILTERS``        a plain list in all four (34 adds
                               ``owner_nova_filter`` to it; we only append)
report client                  ``report_client_singleton()`` in all four
functional harness             31, 32: the test keeps only
                               ``placement`` (the fixture's API client);
                               33, 34: also ``placement_fixture``.
                               33: stopping a compute sleeps
                               ``manager_shutdown_timeout`` (see
                               ``fixtures.config_fixture``)
=============================  ===========================================

Where an internal is missing (a Nova outside the range, or a backport
that moved it), the accessor degrades instead of raising, and
:func:`log_gaps_once` logs at scheduler start-up what is off and why. This
module is the only place that imports those Nova internals for the
scheduler side; call sites use it and never guard imports themselves. Two
imports of Nova are outside it, on purpose:

* ``nova.scheduler.filters.BaseHostFilter`` (``filters/base.py``), the base
  Nova documents for out-of-tree filters: without it no filter of ours can
  load, so there is nothing to degrade to and nothing left to log;
* Nova's object and database layers in ``clients/nova_db.py``, which only
  the CLI loads, on a controller with ``--nova-config`` (as ``nova-manage``
  does), never the scheduler: a start-up log line here would not reach the
  operator who runs it.
"""
import dataclasses
import functools
import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: The supported Nova majors: 31 (2025.1, SLURP) through 34 (2026.2).
OLDEST = 31
NEWEST = 34
SERIES = {31: "2025.1", 32: "2025.2", 33: "2026.1", 34: "2026.2"}

#: What the filters read from a scheduler ``HostState``
#: (``nova/scheduler/host_manager.py`` ``HostState.__init__`` sets host,
#: nodename, uuid, hypervisor_type; ``HostState.update`` sets service and
#: updated from the Service and ComputeNode records): the same on 31 to 34.
HOST_STATE_FIELDS = ("host", "nodename", "uuid", "service", "updated",
                     "hypervisor_type")


@dataclasses.dataclass(frozen=True)
class Internal:
    """One Nova internal: where it lives and what we use it for."""

    name: str
    module: str
    attribute: str
    nova_file: str
    why: str
    #: What happens without it; the filters keep running either way.
    without: str


#: The same module and attribute on Nova 31, 32, 33 and 34; a release that
#: differed would get its own entry here, keyed by major.
INTERNALS: dict[str, Internal] = {
    internal.name: internal for internal in (
        Internal(
            "servicegroup", "nova.servicegroup", "API",
            "nova/servicegroup/api.py",
            "service_is_up() is Nova's own liveness verdict for a service "
            "record (the DB or memcache driver the cloud configured)",
            "every service counts as up; disabled and forced-down services "
            "are still rejected"),
        Internal(
            "servicegroup_db", "nova.servicegroup.drivers.db", "DbDriver",
            "nova/servicegroup/drivers/db.py",
            "with the db driver the filters work out its up window "
            "(service_down_time around now) once per request instead of "
            "asking Nova once per host (filters/base.py UpCheck)",
            "each host's liveness is asked of nova.servicegroup.API: the "
            "same verdict, more slowly"),
        Internal(
            "request_is_rebuild", "nova.scheduler.utils",
            "request_is_rebuild", "nova/scheduler/utils.py",
            "rebuilds keep the instance on its host, so the filters step "
            "aside for them (RUN_ON_REBUILD = False, like ComputeFilter)",
            "the _nova_check_type scheduler hint is read directly"),
        Internal(
            "request_filters", "nova.scheduler.request_filter",
            "ALL_REQUEST_FILTERS", "nova/scheduler/request_filter.py",
            "Nova has no plugin hook for request filters; the placement "
            "pre-filter is appended to this list (process_reqspec walks it)",
            "the placement pre-filter is off; the host filters still reject "
            "the same hosts, after placement"),
        Internal(
            "report_client", "nova.scheduler.client.report",
            "report_client_singleton", "nova/scheduler/client/report.py",
            "the placement client the scheduler uses and Nova's functional "
            "harness patches",
            "nothing in the filters; only tests use it"),
        Internal(
            "host_state", "nova.scheduler.host_manager", "HostState",
            "nova/scheduler/host_manager.py",
            "the filters read " + ", ".join(HOST_STATE_FIELDS)
            + " from each HostState",
            "a host whose fields are missing passes (the filters never "
            "raise into the scheduler)"),
    )
}


def nova_version() -> str | None:
    """The installed Nova's version string, None if Nova is not installed."""
    try:
        return metadata.version("nova")
    except metadata.PackageNotFoundError:
        return None


def nova_major(version: str | None = None) -> int | None:
    """The major of ``version`` (default: the installed Nova), or None."""
    version = version if version is not None else nova_version()
    try:
        return int((version or "").split(".")[0])
    except ValueError:
        return None


def _lookup(name: str) -> Any:
    """The Nova attribute behind ``INTERNALS[name]``; raises if missing."""
    internal = INTERNALS[name]
    return getattr(importlib.import_module(internal.module),
                   internal.attribute)


def _try(name: str) -> Any:
    """``_lookup(name)``, or None when this Nova does not have it."""
    try:
        return _lookup(name)
    except (ImportError, AttributeError):
        return None


class _AlwaysUp:
    """Stands in for ``servicegroup.API`` when Nova has none (see INTERNALS)."""

    def service_is_up(self, member: Any) -> bool:
        return True


def servicegroup_api_class() -> Any:
    """The ``nova.servicegroup.API`` class, None if this Nova has none."""
    return _try("servicegroup")


def servicegroup_db_driver() -> Any:
    """Nova's ``DbDriver`` class (``nova/servicegroup/drivers/db.py``), or
    None."""
    return _try("servicegroup_db")


def servicegroup_api() -> Any:
    """A ``nova.servicegroup.API()`` (``nova/servicegroup/api.py``)."""
    api_class = _try("servicegroup")
    return api_class() if api_class is not None else _AlwaysUp()


def request_is_rebuild(spec_obj: Any) -> bool:
    """Nova's ``request_is_rebuild`` (``nova/scheduler/utils.py``).

    Without it, the same test Nova makes: the conductor's rebuild sets the
    ``_nova_check_type`` hint to ``["rebuild"]``
    (``nova/conductor/manager.py`` ``rebuild_instance``).
    """
    func = _try("request_is_rebuild")
    if func is not None:
        return bool(func(spec_obj))
    if not spec_obj or "scheduler_hints" not in spec_obj:
        return False
    hints = spec_obj.scheduler_hints or {}
    return bool(hints.get("_nova_check_type") == ["rebuild"])


def request_filters() -> list[Callable[..., Any]] | None:
    """Nova's ``ALL_REQUEST_FILTERS`` list, None if this Nova has none.

    ``nova/scheduler/request_filter.py`` ``process_reqspec`` calls every
    function in it, in order, before asking placement for candidates.
    """
    filters = _try("request_filters")
    return filters if isinstance(filters, list) else None


def report_client() -> Any:
    """The scheduler's placement client (``nova/scheduler/client/report.py``
    ``report_client_singleton``)."""
    return _lookup("report_client")()


def missing_host_state_fields() -> list[str]:
    """HOST_STATE_FIELDS this Nova's HostState does not set, in order.

    ``HostState.__init__`` sets all but ``service``, which ``update``
    sets from the service record (``nova/scheduler/host_manager.py``).
    """
    host_state_class = _try("host_state")
    if host_state_class is None:
        return list(HOST_STATE_FIELDS)
    host_state = host_state_class("host", "node", None)
    host_state.update(service={})
    return [f for f in HOST_STATE_FIELDS if not hasattr(host_state, f)]


@dataclasses.dataclass(frozen=True)
class Gap:
    """Something off on this Nova, and what the filters do about it."""

    what: str
    why: str


def gaps() -> list[Gap]:
    """What is off on the installed Nova; [] on a supported, intact one."""
    found: list[Gap] = []
    version = nova_version()
    major = nova_major(version)
    if major is None:
        found.append(Gap("nova", "Nova is not installed or has no version; "
                                 "the filters cannot run in a scheduler"))
    elif not OLDEST <= major <= NEWEST:
        found.append(Gap("nova", f"Nova {version} is outside the supported "
                                 f"{OLDEST} to {NEWEST}; the internals below "
                                 "were checked on those only"))
    for internal in INTERNALS.values():
        if internal.name == "host_state":
            continue
        if _try(internal.name) is None or (
                internal.name == "request_filters"
                and request_filters() is None):
            found.append(Gap(
                f"{internal.module}.{internal.attribute}",
                f"not found ({internal.nova_file}): {internal.without}"))
    missing = missing_host_state_fields()
    if missing:
        internal = INTERNALS["host_state"]
        found.append(Gap(
            f"HostState.{','.join(missing)}",
            f"not set ({internal.nova_file}): {internal.without}"))
    return found


@functools.cache
def log_gaps_once() -> list[Gap]:
    """Log, once per process, what is off on this Nova; return it.

    Called when the scheduler loads the filters (``all_filters``). A
    warning per gap, because a feature is off until the operator acts; an
    info line naming the Nova release otherwise.
    """
    try:
        found = gaps()
    except Exception:
        LOG.exception("nova-drain-filters could not check this Nova")
        return []
    for gap in found:
        LOG.warning("nova-drain-filters on Nova %(nova)s: %(what)s "
                    "%(why)s", {"nova": nova_version(), "what": gap.what,
                                "why": gap.why})
    if not found:
        major = nova_major()
        LOG.info("nova-drain-filters: Nova %(version)s (%(series)s) is "
                 "supported", {"version": nova_version(),
                               "series": SERIES.get(major or 0, "?")})
    return found
