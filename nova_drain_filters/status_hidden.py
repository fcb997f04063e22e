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

"""The compute nodes Nova's own ``COMPUTE_STATUS_DISABLED`` hides from a boot.

Nova's mandatory ``compute_status_filter`` (``nova/scheduler/
request_filter.py``) adds ``COMPUTE_STATUS_DISABLED`` to every request's
``root_forbidden``, and nova-compute puts that trait on the providers of a
disabled service it runs (``nova/compute/manager.py``
``_update_compute_provider_status``). Placement then never offers those
nodes, no host filter sees them, and the summary line would say nothing
of them. So the pre-filter, which runs after Nova's, notes how many it
hid and names a few.

Cost: the providers carrying the trait are read with one ``GET
/resource_providers?required=COMPUTE_STATUS_DISABLED`` per process at
most every ``REFRESH_SECONDS``, by one caller while the others use what
is known (never one read per request); the names are at most that old.
"""
import dataclasses
import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

TRAIT = "COMPUTE_STATUS_DISABLED"
#: How long a read of the providers with the trait is used.
REFRESH_SECONDS = 60.0
#: Node names the summary line gives before "+N more".
MAX_NAMES = 3


class StatusStore(Protocol):
    """Where the providers are read: Nova's report client, or our own."""

    def roots_with_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> list[str]:
        """Names of the root providers carrying trait ``name``."""


def forbidden_by(request_spec: Any) -> str | None:
    """Who forbade ``COMPUTE_STATUS_DISABLED`` in this request, or None.

    ``root_forbidden`` is where Nova's ``compute_status_filter`` puts it
    (``RequestLevelParams.root_forbidden``, ``nova/objects/
    request_spec.py``); a flavor's ``trait:COMPUTE_STATUS_DISABLED=
    forbidden`` lands in a ``RequestGroup.forbidden_traits``.
    """
    if TRAIT in (getattr(request_spec, "root_forbidden", None) or ()):
        return "compute_status_filter"
    try:
        groups = request_spec.requested_resources or ()
    except (AttributeError, NotImplementedError):  # an unset o.vo field
        groups = ()
    for group in groups:
        if TRAIT in (getattr(group, "forbidden_traits", None) or ()):
            return "flavor"
    return None


@dataclasses.dataclass(frozen=True)
class Hidden:
    """The nodes placement hid from one request for the trait."""

    by: str
    names: tuple[str, ...]
    #: Seconds since placement was read (at most ``REFRESH_SECONDS``).
    age: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.names)

    def __str__(self) -> str:
        shown = ", ".join(self.names[:MAX_NAMES])
        more = len(self.names) - MAX_NAMES
        if more > 0:
            shown += f" (+{more} more)"
        return (f"Nova's {self.by} forbade {TRAIT}, hiding "
                f"{len(self.names)} disabled compute node(s): {shown} "
                f"(placement read {self.age:.0f}s ago)")


class HiddenNodes:
    """The names of the nodes carrying the trait, re-read now and then."""

    def __init__(self, store_factory: Callable[[], StatusStore],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store_factory = store_factory
        self._clock = clock
        self._lock = threading.Lock()
        self._names: tuple[str, ...] | None = None
        self._next_read = 0.0
        self._read_at = 0.0

    def names(self, global_request_id: str | None = None
              ) -> tuple[str, ...] | None:
        """The nodes known to carry the trait; None before a first read.

        Never raises: a failed read keeps what was known and is tried
        again after ``REFRESH_SECONDS``.
        """
        if self._clock() >= self._next_read and self._lock.acquire(
                blocking=False):
            try:
                self._next_read = self._clock() + REFRESH_SECONDS
                found: Sequence[str] = self._store_factory().roots_with_trait(
                    TRAIT, global_request_id)
                self._names = tuple(sorted(found))
                self._read_at = self._clock()
            except Exception as exc:  # a log line must never fail a boot
                LOG.debug("Could not read the providers with %(trait)s: "
                          "%(error)s", {"trait": TRAIT, "error": exc})
            finally:
                self._lock.release()
        return self._names

    def hidden(self, request_spec: Any,
               global_request_id: str | None = None) -> Hidden | None:
        """What the trait hid from this request, or None (nothing, or not
        forbidden)."""
        by = forbidden_by(request_spec)
        if by is None:
            return None
        names = self.names(global_request_id)
        if not names:
            return None
        return Hidden(by, names, max(0.0, self._clock() - self._read_at))
