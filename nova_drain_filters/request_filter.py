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
re-checks every ``RECHECK_SECONDS``, never once per boot. Should one be
deleted in between, the first query that fails makes it check at once,
re-create the trait and send the query again (``TraitGuard.repair``).

Inside nova-scheduler it reaches placement through Nova's own report client
(``clients/nova_report.py``); only where Nova is not installed does it build
its own adapter from ``[placement]`` (``trait_store.py``).
"""
import dataclasses
import enum
import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import nova_compat
from nova_drain_filters import status_hidden
from nova_drain_filters import trait_store
from nova_drain_filters import traits

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How long a successful trait check is trusted. A deleted trait is noticed
#: at once anyway (``TraitGuard.repair``); this bounds how long a trait
#: deleted while no boot ran is forbidden before the check re-creates it.
RECHECK_SECONDS = 300.0
#: How long to wait before trying placement again after a failure.
RETRY_SECONDS = 30.0
#: After a failed candidate query whose forbidden traits all still existed,
#: do not ask placement again for this long: other failures (placement
#: overloaded, a flavor asking for an unknown trait) must not double the
#: requests.
QUIET_SECONDS = 1.0
#: How long a repair waits for a trait check under way in another thread.
REPAIR_WAIT_SECONDS = 5.0


class Skip(enum.Enum):
    """Why the pre-filter forbade fewer traits than configured."""

    OFF = "placement_prefilter is off"
    NO_TRAITS = "forbidden_traits is empty"
    UNCONFIRMED = "not yet confirmed to exist in placement"
    PLACEMENT_FAILED = "placement did not confirm or create them"
    ERROR = "the pre-filter failed, see the log"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the pre-filter did to one request, for the summary line."""

    forbidden: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    why: Skip | None = None
    detail: str | None = None
    #: The disabled nodes Nova's own COMPUTE_STATUS_DISABLED hid.
    hidden: status_hidden.Hidden | None = None

    @property
    def notable(self) -> bool:
        """True when it forbade less than configured, or when Nova's
        COMPUTE_STATUS_DISABLED hid nodes."""
        return self.why is not None or bool(self.hidden)

    @property
    def hides(self) -> bool:
        """True when Nova's COMPUTE_STATUS_DISABLED hid nodes."""
        return bool(self.hidden)

    @property
    def degraded(self) -> bool:
        """True when a failure, not the configuration, left traits out."""
        return self.why in (Skip.UNCONFIRMED, Skip.PLACEMENT_FAILED,
                            Skip.ERROR)

    def __str__(self) -> str:
        hidden = f"; {self.hidden}" if self.hidden else ""
        return self._ours() + hidden

    def _ours(self) -> str:
        why = self.why.value if self.why else ""
        if self.detail:
            why += f": {self.detail}"
        if not self.forbidden:
            return f"pre-filter forbade nothing ({why})"
        if not self.skipped:
            return f"pre-filter forbade {', '.join(sorted(self.forbidden))}"
        return (f"pre-filter forbade {', '.join(sorted(self.forbidden))} "
                f"but not {', '.join(sorted(self.skipped))} ({why})")


class TraitGuard:
    """Remembers which forbidden traits are known to exist in placement.

    Single-flight: one caller checks placement while concurrent callers go
    on with what is already known, so a slow placement never piles up.
    """

    def __init__(
        self,
        store_factory: Callable[[], trait_store.TraitStore] = (
            trait_store.default_store),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store_factory = store_factory
        self._store: trait_store.TraitStore | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._known: frozenset[str] = frozenset()
        self._wanted: frozenset[str] = frozenset()
        self._next_check = 0.0
        self._quiet_until = 0.0
        #: The last failure to reach placement, None after a success.
        self.last_error: str | None = None
        #: How many times a trait placement had lost was re-created.
        self.repairs = 0

    def usable(
        self, wanted: Sequence[str], global_request_id: str | None = None,
    ) -> frozenset[str]:
        """Return the traits of ``wanted`` that are safe to forbid now."""
        wanted_set = frozenset(wanted)
        due = wanted_set != self._wanted or self._clock() >= self._next_check
        if due and self._lock.acquire(blocking=False):
            try:
                self._check(wanted_set, global_request_id)
            finally:
                self._lock.release()
        usable = self._known & wanted_set
        if usable and self._store is not None:
            self._store.watch(self)
        return usable

    def verdict(self, wanted: Sequence[str], usable: frozenset[str]) -> Verdict:
        """Describe a request that forbade ``usable`` of ``wanted``."""
        skipped = frozenset(wanted) - usable
        if not wanted:
            return Verdict(why=Skip.NO_TRAITS)
        if not skipped:
            return Verdict(forbidden=usable)
        why = Skip.PLACEMENT_FAILED if self.last_error else Skip.UNCONFIRMED
        return Verdict(usable, skipped, why, self.last_error)

    def repair(self, global_request_id: str | None = None) -> None:
        """A candidate query failed: make sure the forbidden traits exist.

        Placement may have lost one (an operator deleted an unused custom
        trait) while this process still forbids it: then every query gets
        ``400 No such trait(s)``. The check forgets what it knew, re-creates
        the trait and counts a repair, which tells the caller to send its
        query again. If placement cannot even be asked, nothing is forbidden
        until it can: a query that forbids no trait beats no boot at all.
        """
        if not self._known or self._clock() < self._quiet_until:
            return
        if not self._lock.acquire(timeout=REPAIR_WAIT_SECONDS):
            return
        try:
            before = self.repairs
            self._check(self._wanted, global_request_id, forget=True)
            if self.repairs == before:
                self._quiet_until = self._clock() + QUIET_SECONDS
        finally:
            self._lock.release()

    def _check(self, wanted: frozenset[str], global_request_id: str | None,
               forget: bool = False) -> None:
        """Ask placement, create what is missing, remember what exists.

        Call with ``_lock`` held. Never raises into the scheduler.
        """
        # Remember what was tried, or every request would retry at once.
        self._wanted = wanted
        self._next_check = self._clock() + RETRY_SECONDS
        try:
            if self._store is None:
                self._store = self._store_factory()
            store = self._store
            present = store.existing_traits(sorted(wanted), global_request_id)
        except Exception as exc:
            if forget:
                self._known = frozenset()
            self._failed(wanted, exc)
            return
        confirmed = set(present) & wanted
        missing = wanted - confirmed
        lost = missing & self._known
        error: Exception | None = None
        for name in sorted(missing):
            try:
                store.create_trait(name, global_request_id)
            except Exception as exc:
                error = exc
                break
            confirmed.add(name)
        self._known = frozenset(confirmed)
        if lost & confirmed:
            self.repairs += 1
            LOG.warning("Placement no longer had the forbidden traits "
                        "%(lost)s (deleted?); re-created them",
                        {"lost": sorted(lost & confirmed)})
        if (missing - lost) & confirmed:
            LOG.info("Created the forbidden traits %s in placement",
                     sorted((missing - lost) & confirmed))
        if error is not None:
            self._failed(wanted, error)
            return
        self._next_check = self._clock() + RECHECK_SECONDS
        self.last_error = None

    def _failed(self, wanted: frozenset[str], exc: Exception) -> None:
        self.last_error = str(exc)
        LOG.warning(
            "Could not make sure the forbidden traits %(traits)s exist "
            "in placement, forbidding only %(known)s until it works: "
            "%(error)s",
            {"traits": sorted(wanted), "known": sorted(self._known),
             "error": exc},
        )


_guard = TraitGuard()
_hidden = status_hidden.HiddenNodes(trait_store.default_store)

#: Takes each request's verdict: ``filters/summary.py`` ``record_prefilter``,
#: wired by ``nova_drain_filters.filters`` when Nova loads it, so that this
#: engine does not import the filters above it. None: nothing is recorded.
Recorder = Callable[[Any, Verdict], None]
_recorder: Recorder | None = None


def set_recorder(recorder: Recorder | None) -> None:
    """Send each request's verdict to ``recorder`` (None: to nothing)."""
    global _recorder
    _recorder = recorder


def reset() -> None:
    """Forget what is known about placement (for tests)."""
    global _guard, _hidden
    _guard = TraitGuard()
    _hidden = status_hidden.HiddenNodes(trait_store.default_store)


def drain_traits_filter(ctxt: Any, request_spec: Any) -> bool:
    """Forbid the drain traits on the root provider of every candidate.

    Nova's request filter signature (``nova/scheduler/request_filter.py``):
    returns True if it changed the request. Never raises: a failure here
    would turn into NoValidHost (``select_destinations`` maps
    ``RequestFilterFailed``), so on any error it leaves the request alone.
    What it forbade, or why it forbade nothing, goes to the request's
    summary line (``filters/summary.py``, through ``set_recorder``).
    """
    forbidden: frozenset[str] = frozenset()
    try:
        opts = CONF.drain_filters
        if not opts.placement_prefilter:
            verdict = Verdict(why=Skip.OFF)
        else:
            wanted = list(opts.forbidden_traits)
            guard = _guard
            forbidden = guard.usable(wanted, getattr(ctxt, "global_id", None))
            if forbidden:
                request_spec.root_forbidden.update(forbidden)
            verdict = guard.verdict(wanted, forbidden)
    except Exception:
        LOG.exception("drain_traits_filter failed; request left unchanged")
        forbidden = frozenset()
        verdict = Verdict(why=Skip.ERROR)
    try:
        # Nova's compute_status_filter ran before us (we are appended last).
        hidden = _hidden.hidden(request_spec, getattr(ctxt, "global_id", None))
        if hidden:
            verdict = dataclasses.replace(verdict, hidden=hidden)
    except Exception:  # an unloadable spec field: no note, never a failure
        LOG.debug("Could not tell what COMPUTE_STATUS_DISABLED hid",
                  exc_info=True)
    recorder = _recorder
    if recorder is not None:
        recorder(request_spec, verdict)
    if not forbidden:
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
    """Install the pre-filter when ``[drain_filters] placement_prefilter``.

    Warns when the configuration leaves one of the drain traits on offer
    (``traits.unhonoured``): a typo in ``forbidden_traits`` must not read
    as a drain that works.
    """
    drain_conf.register_opts(conf)
    opts = conf.drain_filters
    left = traits.unhonoured(opts.placement_prefilter, opts.forbidden_traits)
    if left:
        LOG.warning(
            "Placement still offers providers marked %(left)s: "
            "[drain_filters] %(why)s. A node drained with 'openstack drain "
            "node start' carries only %(mark)s. Add them back unless that "
            "is meant.",
            {"left": ", ".join(left), "mark": traits.DRAIN_HOST,
             "why": ("placement_prefilter is off" if not
                     opts.placement_prefilter else
                     "forbidden_traits leaves them out")})
    if opts.placement_prefilter:
        return install()
    return False
