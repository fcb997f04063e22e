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

"""What the three drain filters share: facts from a HostState, never raising."""
import datetime
import logging as std_logging
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from nova.scheduler import filters
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_drain_filters import decisions
from nova_drain_filters import nova_compat
from nova_drain_filters.filters import summary

LOG = logging.getLogger(__name__)

Rejections = dict[int, list[decisions.Reason]]


def service_facts(host_state: Any, is_up: bool) -> decisions.ServiceFacts:
    """ServiceFacts from ``HostState.service``, a dict of the Service object."""
    service = host_state.service or {}
    # Only a real heartbeat counts; Nova's is_up falls back to created_at
    # (nova/servicegroup/drivers/db.py), which the reason calls never seen.
    last_seen = service.get("last_seen_up")
    if isinstance(last_seen, str):
        last_seen = timeutils.parse_isotime(last_seen)
    return decisions.ServiceFacts(
        host=host_state.host,
        disabled=bool(service.get("disabled")),
        disabled_reason=service.get("disabled_reason"),
        forced_down=bool(service.get("forced_down")),
        is_up=is_up,
        last_seen_up=last_seen,
    )


def node_facts(host_state: Any, service_up: bool) -> decisions.NodeFacts:
    """NodeFacts from a HostState.

    ``HostState.updated`` is ``compute_nodes.updated_at``, except that
    ``consume_from_request`` (``nova/scheduler/host_manager.py``) moves it to
    now inside a request; either way it is a tie-breaker, not liveness.
    """
    return decisions.NodeFacts(
        host=host_state.host,
        nodename=host_state.nodename,
        uuid=host_state.uuid,
        service_up=service_up,
        updated_at=host_state.updated,
        hypervisor_type=host_state.hypervisor_type,
    )


def now() -> datetime.datetime:
    """The current UTC time, timezone-aware (patchable in tests)."""
    return timeutils.utcnow(with_timezone=True)


def plain(mapping: Any) -> Any:
    """The dict under Nova's ``ReadOnlyDict`` (a UserDict), for fast reads.

    ``HostState.service`` is a ``ReadOnlyDict`` (``nova/scheduler/
    host_manager.py``); its ``get`` runs Python code per call.
    """
    return getattr(mapping, "data", mapping)


#: Nova's own classes and methods, as imported (None where this Nova lacks
#: them, see nova_compat.INTERNALS): if a test (or anything) replaced one,
#: UpCheck asks Nova on every call instead of taking its shortcut.
_DB_DRIVER = nova_compat.servicegroup_db_driver()
_NOVA_SERVICE_IS_UP = getattr(nova_compat.servicegroup_api_class(),
                              "service_is_up", None)
_DB_IS_UP = getattr(_DB_DRIVER, "is_up", None)


def _is_nova_db_check(api: Any) -> bool:
    if _DB_DRIVER is None or _NOVA_SERVICE_IS_UP is None or _DB_IS_UP is None:
        return False
    driver: Any = getattr(api, "_driver", None)
    return (getattr(api.service_is_up, "__func__", None) is _NOVA_SERVICE_IS_UP
            and type(driver) is _DB_DRIVER
            and getattr(driver.is_up, "__func__", None) is _DB_IS_UP)


class UpCheck:
    """Nova's service-is-up verdict with the request's clock read once.

    With the ``db`` servicegroup driver, ``DbDriver.is_up``
    (``nova/servicegroup/drivers/db.py``) says up when the last heartbeat
    (``last_seen_up``, else ``created_at``) is within ``service_down_time``
    of now, either way. This works out the window once per request; any
    other driver, or a heartbeat that is not a datetime, asks Nova.
    """

    def __init__(self, api: Any) -> None:
        self.api = api
        self.window: tuple[datetime.datetime, ...] | None = None
        if _is_nova_db_check(api):
            driver = api._driver
            # DbDriver compares naive UTC (timeutils.utcnow()).
            current = timeutils.utcnow()
            down = datetime.timedelta(seconds=driver.service_down_time)
            utc = datetime.timezone.utc
            low, high = current - down, current + down
            self.window = (low, high, low.replace(tzinfo=utc),
                           high.replace(tzinfo=utc))

    def __call__(self, service: Any) -> bool:
        """Up by Nova's rules; ``service`` is the plain dict."""
        window = self.window
        if window is not None:
            beat = service.get("last_seen_up") or service.get("created_at")
            if isinstance(beat, datetime.datetime):
                if beat.tzinfo is None:
                    return window[0] <= beat <= window[1]
                return window[2] <= beat <= window[3]
        return bool(self.api.service_is_up(service))


class DrainFilter(filters.BaseHostFilter):
    """Base of the drain filters: reasons per host, one summary per request.

    A subclass overrides ``host_reasons`` to judge one host at a time, or
    ``rejections`` to judge the whole list at once (duplicates need every
    candidate, and a fast path skips healthy hosts). It inherits
    ``RUN_ON_REBUILD`` and ``run_filter_once_per_request``, explained below.
    A bug or bad data in a subclass never reaches the scheduler: the host,
    or the whole list, passes and the error is logged.
    """

    # Rebuilds keep the instance on its host; a drained or stale host must
    # not block a rebuild there (Nova's own ComputeFilter does the same).
    RUN_ON_REBUILD = False

    # Service, node and Ironic state do not change between the instances of
    # one multi-create request; running once saves work on large clouds.
    run_filter_once_per_request = True

    def __init__(self) -> None:
        self.servicegroup_api = nova_compat.servicegroup_api()

    def service_is_up(self, host_state: Any) -> bool:
        """Nova's own verdict (``nova/servicegroup/api.py`` service_is_up)."""
        return bool(self.servicegroup_api.service_is_up(host_state.service))

    def host_reasons(
        self, host_state: Any, spec_obj: Any
    ) -> list[decisions.Reason]:
        """Why this host is rejected; [] if it passes."""
        return []

    def rejections(self, hosts: Sequence[Any], spec_obj: Any) -> Rejections:
        """The reasons of every rejected host: {id(host): reasons}."""
        found: Rejections = {}
        for host_state in hosts:
            self.add_reasons(found, host_state,
                             lambda h: self.host_reasons(h, spec_obj))
        return found

    def add_reasons(
        self, found: Rejections, host_state: Any,
        judge: Callable[[Any], list[decisions.Reason]],
    ) -> None:
        """Record ``judge(host_state)`` in ``found``; a host it fails on passes.

        The one place a per-host error is caught, logged and turned into a
        pass, so that no filter raises into the scheduler.
        """
        try:
            reasons = judge(host_state)
        except Exception:
            LOG.exception("%(filter)s failed on %(host)s; passing it",
                          {"filter": type(self).__name__, "host": host_state})
            return
        if reasons:
            found[id(host_state)] = reasons

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        """Nova's per-host entry point; ``filter_all`` is what Nova calls."""
        return not self.rejections([host_state], spec_obj)

    def filter_all(
        self, filter_obj_list: Any, spec_obj: Any
    ) -> list[Any]:
        """Return the hosts that pass; never None, never raises.

        Reasons are summarised and logged for rejected hosts only; the
        common case, nothing rejected, hands the list back as it came.
        """
        hosts = list(filter_obj_list)
        name = type(self).__name__
        rejected: dict[Any, list[decisions.Reason]] = {}
        try:
            if not self.RUN_ON_REBUILD and nova_compat.request_is_rebuild(
                spec_obj
            ):
                return hosts
            found = self.rejections(hosts, spec_obj)
            if found:
                debug = LOG.isEnabledFor(std_logging.DEBUG)
                for host_state in hosts:
                    reasons = list(found.get(id(host_state)) or ())
                    if reasons:
                        rejected[host_state] = reasons
                        if debug:
                            LOG.debug("%(host)s rejected by %(filter)s: "
                                      "%(reason)s",
                                      {"host": host_state, "filter": name,
                                       "reason": decisions.summarize(
                                           reasons)})
        except Exception:
            LOG.exception("%s failed; passing every host", name)
            return hosts
        passed = ([h for h in hosts if h not in rejected] if rejected
                  else hosts)
        try:
            summary.record(name, spec_obj, len(hosts), len(passed), rejected)
        except Exception:
            LOG.exception("%s could not log its summary", name)
        return passed


def reasons_by_host(
    rejected: Mapping[Any, Sequence[decisions.Reason]],
) -> dict[str, str]:
    """{host name: reasons} for logs and tests."""
    return {
        f"{h.host}/{h.nodename}": decisions.summarize(r)
        for h, r in rejected.items()
    }
