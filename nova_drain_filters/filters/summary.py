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

"""One log line per scheduling request: what this project's filters rejected.

Nova logs per-host debug lines and "Filter X returned 0 hosts"; an operator
wants one line saying how many hosts each drain filter removed and why. Each
of our filters records its rejections against the request; the line is
written when the last of our enabled filters has run, or at once when a
filter left no host (Nova stops filtering then,
``nova/filters.py`` ``get_filtered_objects``). If a Nova filter between ours
empties the list, the line is written when the request spec is freed.
"""
import collections
import threading
import weakref
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import decisions

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Class names of this project's filters, in no particular order.
OUR_FILTERS: set[str] = set()


class PrefilterNote(Protocol):
    """What the pre-filter reports (``request_filter.Verdict``)."""

    @property
    def notable(self) -> bool:
        """True when it forbade fewer traits than configured, or when
        Nova's COMPUTE_STATUS_DISABLED hid nodes."""

    @property
    def hides(self) -> bool:
        """True when Nova's own COMPUTE_STATUS_DISABLED hid nodes."""

    @property
    def degraded(self) -> bool:
        """True when a failure, not the configuration, is why."""


class _Pending:
    def __init__(self, instance_uuid: str | None, start: int | None) -> None:
        self.instance_uuid = instance_uuid
        #: Hosts the first drain filter got; None if none of them ran.
        self.start = start
        self.end = start
        self.per_filter: dict[str, collections.Counter[str]] = {}
        self.prefilter: PrefilterNote | None = None
        self.finalizer: weakref.finalize | None = None


_lock = threading.Lock()
_pending: dict[int, _Pending] = {}
#: Bound on requests waiting for their line, should specs never be freed.
MAX_PENDING = 256


def _last_enabled_filter() -> str | None:
    enabled = [
        name for name in CONF.filter_scheduler.enabled_filters
        if name in OUR_FILTERS
    ]
    return enabled[-1] if enabled else None


def format_line(pending: _Pending, early: bool = False) -> str:
    """Build the summary line (exposed for tests)."""
    parts = []
    for name, counts in pending.per_filter.items():
        total = sum(counts.values())
        why = ", ".join(f"{n} x {reason}" for reason, n in counts.most_common())
        parts.append(f"{name} rejected {total}" + (f" ({why})" if why else ""))
    if pending.prefilter is not None:
        parts.append(str(pending.prefilter))
    head = f"nova-drain-filters: request for instance {pending.instance_uuid}: "
    if pending.start is None:
        # Only the pre-filter spoke: no host reached the drain filters.
        return head + "; ".join(parts)
    tail = "; filtering stopped early" if early else ""
    return (
        head + f"{pending.start} hosts in, {pending.end} left: "
        + "; ".join(parts) + tail
    )


def _emit(pending: _Pending, early: bool = False) -> None:
    rejected = any(sum(c.values()) for c in pending.per_filter.values())
    degraded = pending.prefilter is not None and pending.prefilter.degraded
    # Nodes hidden before any filter saw them: an operator looking for one
    # in the log must find why at the default level.
    hides = pending.prefilter is not None and pending.prefilter.hides
    if rejected or degraded or hides:
        LOG.info(format_line(pending, early))
    else:
        LOG.debug(format_line(pending, early))


def _flush(key: int) -> None:
    # A weakref finalizer: it may run inside record()'s locked section when
    # the garbage collector frees a spec there, so it must not take _lock.
    # dict.pop is atomic.
    pending = _pending.pop(key, None)
    if pending is not None:
        _emit(pending, early=pending.start is not None)


def _pending_for(key: int, spec_obj: Any, start: int | None) -> _Pending:
    """The request's entry, made if needed; call with _lock held."""
    pending = _pending.get(key)
    if pending is not None:
        return pending
    while len(_pending) >= MAX_PENDING:
        _oldest = _pending.pop(next(iter(_pending)))
        if _oldest.finalizer is not None:
            _oldest.finalizer.detach()
        _emit(_oldest, early=_oldest.start is not None)
    pending = _Pending(getattr(spec_obj, "instance_uuid", None), start)
    _pending[key] = pending
    try:
        pending.finalizer = weakref.finalize(spec_obj, _flush, key)
    except TypeError:  # not weak-referenceable: flushed below only
        pending.finalizer = None
    return pending


def record_prefilter(spec_obj: Any, note: PrefilterNote) -> None:
    """Note what the pre-filter did to a request; never raises.

    Only a note that forbade fewer traits than configured is kept. It is
    written with the request's line, or alone when the spec is freed if no
    drain host filter runs after it.
    """
    try:
        if not note.notable:
            return
        if _last_enabled_filter() is None:
            _emit_alone(spec_obj, note)
            return
        with _lock:
            _pending_for(id(spec_obj), spec_obj, None).prefilter = note
    except Exception:  # a log line must never fail a request
        LOG.exception("Could not record the pre-filter outcome")


def _emit_alone(spec_obj: Any, note: PrefilterNote) -> None:
    pending = _Pending(getattr(spec_obj, "instance_uuid", None), None)
    pending.prefilter = note
    _emit(pending)


def record(
    filter_name: str,
    spec_obj: Any,
    start: int,
    end: int,
    rejected: Mapping[Any, Sequence[decisions.Reason]],
) -> None:
    """Add one filter's outcome for one request; log when the request is done.

    ``rejected`` maps each rejected host to its reasons; only the first
    reason of a host is counted, so the counts add up to hosts.
    """
    key = id(spec_obj)
    with _lock:
        pending = _pending_for(key, spec_obj, start)
        if pending.start is None:
            pending.start = start
        counts = pending.per_filter.setdefault(
            filter_name, collections.Counter()
        )
        for reasons in rejected.values():
            if reasons:
                counts[str(reasons[0])] += 1
        pending.end = end
        done = end == 0 or filter_name == _last_enabled_filter()
        if done:
            _pending.pop(key, None)
    if done:
        if pending.finalizer is not None:
            pending.finalizer.detach()
        _emit(pending)


def reset() -> None:
    """Drop whatever is pending (for tests)."""
    with _lock:
        for pending in _pending.values():
            if pending.finalizer is not None:
                pending.finalizer.detach()
        _pending.clear()
