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

"""The Ironic nodes Nova knows, as this scheduler process has seen them.

"The Ironic compute nodes Nova knows" is, on the scheduler side, what
placement offered this process's requests over the last one to two
``KNOWN_WINDOW``. Placement offers free nodes only, so this is a lower
bound: enough to see that a listing lacks most of them
(``listing_trust.listing_verdict``). No I/O here.
"""
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable

from nova_drain_filters import listing_trust

#: A node counts as known to Nova for this long after a request last
#: offered it (two windows are kept, so between one and two hours).
KNOWN_WINDOW = 3600.0


class KnownNodes:
    """Node UUIDs requests offered (this window and the last), and when
    each was first seen."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._first_seen: dict[str, float] = {}
        self._known: set[str] = set()
        self._known_before: set[str] = set()
        self._known_since = clock()
        self._verdict: tuple[object, int, listing_trust.ListingVerdict] | None = (
            None)

    def observe(self, node_uuids: Iterable[str]) -> None:
        """Note the Ironic nodes one request offered: Nova knows them."""
        now = self._clock()
        if now - self._known_since > KNOWN_WINDOW:
            self._known_before, self._known = self._known, set()
            self._known_since = now
        first_seen, known = self._first_seen, self._known
        for uuid in node_uuids:
            if uuid not in known:
                known.add(uuid)
                first_seen.setdefault(uuid, now)

    def first_seen(self, node_uuid: str) -> float:
        """Observe this node; return when this process first saw it."""
        self.observe((node_uuid,))
        return self._first_seen[node_uuid]

    def verdict(self, listing: object, listed: Collection[str],
                max_fraction: float) -> listing_trust.ListingVerdict:
        """``listing_trust.listing_verdict`` over the known nodes, cached per
        listing (by identity) and number of known nodes."""
        size = len(self._known) + len(self._known_before)
        cached = self._verdict
        if cached is not None and cached[0] is listing and cached[1] == size:
            return cached[2]
        verdict = listing_trust.listing_verdict(
            self._known | self._known_before, listed, max_fraction)
        self._verdict = (listing, size, verdict)
        return verdict
