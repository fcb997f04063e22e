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

"""Take one consumer's orphaned allocations away, safe against other writers.

``orphan clear`` and ``stale clear`` judge a consumer from a listing, then
write. In between, Nova, another clear or any other writer may write the
same consumer. So the consumer is judged again right before the write, and
the write carries the consumer generation of that read: placement answers
409 if anyone wrote the consumer since (``placement/handlers/util.py``
``ensure_consumer``). On a 409 the consumer is read and judged again, up to
``MAX_ATTEMPTS`` times.

=============================================  ===========================
right before the write                         outcome
=============================================  ===========================
an instance on that node, without a node yet,  skipped, with why
or moving; a provider whose node is unknown
while the instance exists
the consumer is a migration                    skipped
nothing left on the providers to drop          already gone
what is on them differs from the first read    skipped: changed while
(another writer wrote them after a 409)        clearing
allocations left on other providers            rewritten without the
                                               dropped ones
nothing left on other providers                deleted
a 409 on each of ``MAX_ATTEMPTS`` writes       skipped: kept changing
a 409 that left the generation as it was       raised (not a generation
                                               conflict)
=============================================  ===========================

``deleted`` means this write left the consumer with no allocations.
Placement checks the generation, then reads the allocations to zero in a
second step (``placement/handlers/allocation.py``
``_set_allocations_for_consumer``): if another clear removed them in
between, the write succeeds, removes nothing, and both report ``deleted``.
"""
import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement

#: Reads and writes of one consumer before giving up, as the trait sync
#: retries a provider's traits (``PlacementClient.update_provider_traits``).
MAX_ATTEMPTS = placement.MAX_CONFLICT_RETRIES

#: Server statuses while allocations are in transit between two nodes.
MOVING = frozenset({"MIGRATING", "RESIZE", "VERIFY_RESIZE", "REVERT_RESIZE",
                    "REBUILD"})


def reason_for(server: compute.Server | None,
               node: str | None) -> decisions.Reason | None:
    """Why an allocation of ``server`` on ``node`` is orphaned, or None."""
    if server is None:
        return decisions.Reason(decisions.ReasonCode.CONSUMER_MISSING)
    if not server.node or server.node == node or server.status in MOVING:
        return None
    return decisions.Reason(decisions.ReasonCode.INSTANCE_ELSEWHERE,
                            f"on host {server.host} node {server.node}")


class Outcome(enum.Enum):
    """How clearing one consumer ended (the module's table)."""

    DELETED = "deleted"
    REWRITTEN = "rewritten"
    ALREADY_GONE = "already gone"
    SKIPPED = "skipped"
    WOULD_DELETE = "would delete"
    WOULD_REWRITE = "would rewrite"


class Keep(enum.Enum):
    """Why a consumer keeps its allocations (``Outcome.SKIPPED``)."""

    #: A provider whose node is unknown, while the instance exists.
    NODE_UNKNOWN = "node_unknown"
    #: The instance has no node yet (it is being scheduled or built).
    NO_NODE_YET = "no_node_yet"
    #: The instance is moving between two nodes.
    MOVING = "moving"
    #: The instance is on the provider's node now.
    ON_NODE = "on_node"
    MIGRATION = "migration"
    #: The allocations to drop differ from those first judged.
    CHANGED = "changed"
    #: A 409 on each of ``MAX_ATTEMPTS`` writes.
    KEPT_CHANGING = "kept_changing"


@dataclasses.dataclass(frozen=True)
class Kept:
    """A ``Keep`` reason and what it names: a provider, a status, a node,
    or the providers that changed (comma-separated)."""

    why: Keep
    about: str = ""


@dataclasses.dataclass(frozen=True)
class ClearOutcome:
    """What became of one consumer; the CLI renders it as its Result cell.

    ``kept`` says why (for ``SKIPPED``); ``conflicts`` counts the 409s met
    on the way; ``others`` is how many providers a rewrite left in place.
    """

    consumer: str
    providers: tuple[str, ...]
    result: Outcome
    kept: Kept | None = None
    conflicts: int = 0
    others: int = 0


def instance_keeps(server: compute.Server | None,
                   drop: Mapping[str, str | None]) -> Kept | None:
    """Why ``server`` keeps its allocations on ``drop``; None if it does not.

    A provider whose node is unknown (None) is never taken from an existing
    instance: nothing could tell whether the instance is on it.
    """
    if server is None:
        return None
    for rp, node in sorted(drop.items()):
        if node is None:
            return Kept(Keep.NODE_UNKNOWN, rp)
        if reason_for(server, node) is None:
            return (Kept(Keep.NO_NODE_YET) if not server.node else
                    Kept(Keep.MOVING, server.status)
                    if server.status in MOVING else Kept(Keep.ON_NODE, node))
    return None


def _on(allocations: Mapping[str, Any],
        providers: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """{provider: resources} of ``allocations`` on ``providers``."""
    return {rp: dict(allocations[rp].get("resources") or {})
            for rp in providers if rp in allocations}


def clear_consumer(
    compute: compute.ComputeClient, client: placement.PlacementClient,
    consumer: str, drop: Mapping[str, str | None], dry_run: bool = False,
) -> ClearOutcome:
    """Remove only the orphaned part of one consumer's allocations.

    :param drop: {provider: the node it stands for} to take the consumer's
        allocations off (None: the node is unknown).

    Each attempt reads the instance and the consumer's allocations and
    judges them (see the module's table). A consumer that keeps allocations
    on other providers is rewritten without the dropped ones; otherwise its
    allocations are deleted (``PlacementClient.delete_consumer_allocations``,
    an empty write). Both writes carry the consumer generation just read,
    so neither removes what another writer added since.
    """
    providers = tuple(sorted(drop))
    judged: dict[str, dict[str, int]] | None = None
    conflicts = 0
    refused: tuple[http.Conflict, Any] | None = None

    def outcome(result: Outcome, kept: Kept | None = None,
                others: int = 0) -> ClearOutcome:
        return ClearOutcome(consumer, providers, result, kept, conflicts,
                            others)

    for _attempt in range(MAX_ATTEMPTS):
        why = instance_keeps(compute.server(consumer), drop)
        if why:
            return outcome(Outcome.SKIPPED, why)
        current = client.consumer_allocations(consumer)
        allocations = current.get("allocations") or {}
        if current.get("consumer_type") == "MIGRATION":
            return outcome(Outcome.SKIPPED, Kept(Keep.MIGRATION))
        dropping = _on(allocations, providers)
        if not dropping:
            return outcome(Outcome.ALREADY_GONE)
        if judged is None:
            judged = dropping
        changed = sorted(rp for rp in dropping
                         if dropping[rp] != judged.get(rp))
        if changed:
            return outcome(Outcome.SKIPPED,
                           Kept(Keep.CHANGED, ", ".join(changed)))
        generation = current.get("consumer_generation")
        if refused is not None and refused[1] == generation:
            # Nobody wrote the consumer: the 409 was about something else
            # (inventory, a provider generation placement gave up on).
            raise refused[0]
        keep = {rp: a for rp, a in allocations.items() if rp not in drop}
        if dry_run:
            return outcome(Outcome.WOULD_REWRITE if keep
                           else Outcome.WOULD_DELETE)
        try:
            if keep:
                client.replace_consumer_allocations(consumer, keep, current)
            else:
                client.delete_consumer_allocations(consumer, current)
        except http.Conflict as exc:
            conflicts += 1
            refused = (exc, generation)
            continue
        if keep:
            return outcome(Outcome.REWRITTEN, others=len(keep))
        return outcome(Outcome.DELETED)
    return outcome(Outcome.SKIPPED, Kept(Keep.KEPT_CHANGING))
