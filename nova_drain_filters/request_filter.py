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

"""Placement pre-filter: forbid the drain traits in allocation candidate queries.

Nova has no plugin point for request filters: ``process_reqspec`` in
``nova/scheduler/request_filter.py`` walks the module-level list
``ALL_REQUEST_FILTERS`` at call time, and ``select_destinations`` in
``nova/scheduler/manager.py`` skips it for rebuilds. So ``install()`` appends
``drain_traits_filter`` to that list, once, when Nova loads
``nova_drain_filters.filters.all_filters``; ``uninstall()`` takes it out.

Limits: the list is per process (each scheduler worker installs its own);
a rebuild is never pre-filtered; and if a future Nova copies the list
instead of reading it at call time, the pre-filter silently stops applying,
which ``tests/functional`` would catch.

Placement answers ``400 No such trait(s)`` to a query that forbids a custom
trait it has never seen, and Nova turns that into ``NoValidHost`` for every
boot. So the filter forbids only traits it has made sure exist: it creates
them (idempotent ``PUT /traits/{name}``) on first use in a process and
re-checks every ``RECHECK_SECONDS``, never once per boot.
"""
import threading
import time
from collections.abc import Callable
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import nova_compat
from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How long a successful trait check is trusted (someone may delete an
#: unused custom trait from placement).
RECHECK_SECONDS = 300.0
#: How long to wait before trying placement again after a failure.
RETRY_SECONDS = 30.0


def _default_client() -> placement.PlacementClient:
    return placement.PlacementClient(
        http.adapter_from_conf(CONF, "placement", "placement")
    )


class TraitGuard:
    """Remembers which forbidden traits are known to exist in placement.

    Single-flight: one caller checks placement while concurrent callers go
    on with what is already known, so a slow placement never piles up.
    """

    def __init__(
        self,
        client_factory: Callable[[], placement.PlacementClient] = (
            _default_client
        ),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client_factory = client_factory
        self._client: placement.PlacementClient | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._known: frozenset[str] = frozenset()
        self._wanted: frozenset[str] = frozenset()
        self._next_check = 0.0

    def usable(self, wanted: list[str]) -> frozenset[str]:
        """Return the traits of ``wanted`` that are safe to forbid now."""
        wanted_set = frozenset(wanted)
        due = wanted_set != self._wanted or self._clock() >= self._next_check
        if due and self._lock.acquire(blocking=False):
            try:
                self._check(wanted_set)
            finally:
                self._lock.release()
        return self._known & wanted_set

    def _check(self, wanted: frozenset[str]) -> None:
        try:
            if self._client is None:
                self._client = self._client_factory()
            created = [t for t in sorted(wanted) if self._client.ensure_trait(t)]
        except Exception as exc:  # never raise into the scheduler
            # Remember what was tried, or every request would retry at once.
            self._wanted = wanted
            self._next_check = self._clock() + RETRY_SECONDS
            LOG.warning(
                "Could not make sure the forbidden traits %(traits)s exist "
                "in placement, forbidding only %(known)s until it works: "
                "%(error)s",
                {"traits": sorted(wanted), "known": sorted(self._known),
                 "error": exc},
            )
            return
        if created:
            LOG.info("Created the forbidden traits %s in placement", created)
        self._known = wanted
        self._wanted = wanted
        self._next_check = self._clock() + RECHECK_SECONDS


_guard = TraitGuard()


def reset() -> None:
    """Forget what is known about placement (for tests)."""
    global _guard
    _guard = TraitGuard()


def drain_traits_filter(ctxt: Any, request_spec: Any) -> bool:
    """Forbid the drain traits on the root provider of every candidate.

    Nova's request filter signature (``nova/scheduler/request_filter.py``):
    returns True if it changed the request. Never raises: a failure here
    would turn into NoValidHost (``select_destinations`` maps
    ``RequestFilterFailed``), so on any error it leaves the request alone.
    """
    try:
        opts = CONF.drain_filters
        if not opts.placement_prefilter:
            return False
        forbidden = _guard.usable(list(opts.forbidden_traits))
        if not forbidden:
            return False
        request_spec.root_forbidden.update(forbidden)
    except Exception:
        LOG.exception("drain_traits_filter failed; request left unchanged")
        return False
    LOG.debug("drain_traits_filter forbade traits %(traits)s",
              {"traits": sorted(forbidden)})
    return True


def _nova_filters() -> list[Callable[..., Any]]:
    return nova_compat.request_filters() or []


def install() -> bool:
    """Append the pre-filter to Nova's list; True if it was not there yet."""
    filters = _nova_filters()
    if drain_traits_filter in filters:
        return False
    filters.append(drain_traits_filter)
    LOG.info("Installed the nova-drain-filters placement pre-filter")
    return True


def uninstall() -> bool:
    """Take the pre-filter out of Nova's list; True if it was there."""
    filters = _nova_filters()
    if drain_traits_filter not in filters:
        return False
    filters.remove(drain_traits_filter)
    return True


def install_if_enabled(conf: cfg.ConfigOpts = CONF) -> bool:
    """Install the pre-filter when ``[drain_filters] placement_prefilter``."""
    drain_conf.register_opts(conf)
    if conf.drain_filters.placement_prefilter:
        return install()
    return False
