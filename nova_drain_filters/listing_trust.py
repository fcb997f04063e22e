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

"""Whether a listing can be believed about what it lacks: plain functions.

A listing made with credentials that see only some nodes, or a conductor
group that is down, looks complete and is not. The filters, the trait sync,
``stale`` and ``orphan`` ask these before they call anything missing gone;
``[drain_filters] ironic_missing_max_fraction`` is the budget. No I/O here.
"""
import dataclasses
from collections.abc import Collection


def allowed_count(total: int, max_fraction: float) -> int:
    """How many of ``total`` records one step may lose or touch.

    ``max_fraction`` of them, rounded down, but never fewer than one: with a
    handful of nodes, one deletion must still be believed. A disruption
    budget for the clears and the blast-radius limit for Ironic listings.
    """
    return max(1, int(total * max_fraction))


@dataclasses.dataclass(frozen=True)
class ListingVerdict:
    """Whether an Ironic listing can be believed about missing nodes."""

    #: Ironic compute nodes Nova knows (by node UUID).
    known: int
    #: How many of those the listing lacks.
    missing: int
    #: How many may be missing before the listing is not trusted.
    allowed: int
    #: How many nodes the listing has, known to Nova or not.
    listed: int = 0
    #: What was listed, and what it was checked against, for the message.
    listing: str = "the Ironic listing"
    things: str = "Ironic compute nodes Nova knows"

    @property
    def trusted(self) -> bool:
        """False for an empty listing while Nova knows nodes, or too many gone.

        =====  ======  ===========  =======
        known  listed  missing      trusted
        =====  ======  ===========  =======
        0      any     0            yes
        n > 0  0       n            no
        n      > 0     <= allowed   yes
        n      > 0     > allowed    no
        =====  ======  ===========  =======
        """
        if self.known and not self.listed:
            return False
        return self.missing <= self.allowed

    def __str__(self) -> str:
        return (f"{self.listing} lacks {self.missing} of the "
                f"{self.known} {self.things} (at most "
                f"{self.allowed} may be missing)")


def listing_verdict(
    known: Collection[str], listed: Collection[str], max_fraction: float,
    *, listing: str = ListingVerdict.listing,
    things: str = ListingVerdict.things,
) -> ListingVerdict:
    """Judge a listing: of the node UUIDs Nova ``known``, how many are unlisted.

    Credentials that see only some nodes (Ironic filters by owner or lessee
    for project scopes) or a missing conductor group give a listing that is
    complete-looking but partial. Believing it would call every unlisted node
    deleted: the filters would reject it, the sync would mark it stale and
    ``stale clear`` would delete its record. ``[drain_filters]
    ironic_missing_max_fraction`` bounds how much a listing may lack.
    ``orphans.gather`` judges Nova's compute node records against
    placement's ``COMPUTE_NODE`` roots the same way (``listing``, ``things``
    name them in the verdict's message).
    """
    listed_set = set(listed)
    known_set = set(known)
    missing = len(known_set - listed_set)
    return ListingVerdict(len(known_set), missing,
                          allowed_count(len(known_set), max_fraction),
                          len(listed_set), listing, things)
