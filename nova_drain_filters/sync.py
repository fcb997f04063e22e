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

"""The trait sync: mark unusable providers so placement never offers them.

From Nova's compute node records and Ironic's nodes it computes which
providers must carry ``CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE`` and
``CUSTOM_DRAIN_STALE_NODE`` (with the same decision functions the filters
use) and sets or removes exactly those two traits, leaving every other one.

* Placement writes go through ``PlacementClient.update_provider_traits``:
  provider generation, re-read and retry on 409, so nova-compute's own trait
  updates (``COMPUTE_STATUS_DISABLED``...) are never lost.
* ``CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE`` is also set on the Ironic node:
  Nova's Ironic driver replaces a node provider's traits with the node's on
  its periodic (``nova/virt/ironic/driver.py`` ``update_provider_tree`` ->
  ``provider_tree.update_traits(nodename, node.traits)``), so a trait only
  in placement would vanish. Ironic is written first, so the periodic never
  brings back a trait just removed from placement.
* ``CUSTOM_DRAIN_STALE_NODE`` goes to placement only: its node is gone from
  Ironic, or is live under another compute record (a duplicate), whose
  provider must not inherit the trait.
* Idempotent: current traits are read in bulk first (Ironic's node list
  carries them; placement answers ``required=`` queries), so a run with
  nothing to change writes nothing.
* Blast radius: a listing that lacks more of the Ironic nodes Nova knows
  than ``[drain_filters] ironic_missing_max_fraction`` allows is not
  believed (``stale.judge_listing``); the pass raises ``UntrustedListing``
  before any write.
* Without Ironic (no ``ironic_client``), the sync does what needs no
  Ironic: duplicate records get ``CUSTOM_DRAIN_STALE_NODE``.
"""
import dataclasses
import enum
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import stale as stale_mod
from nova_drain_filters import traits
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement

#: Ironic answers 409 while a conductor holds the node lock (cleaning...),
#: and 500 or 503 while its database or API is briefly unavailable (e.g.
#: "database is locked"). A trait PUT or DELETE is idempotent, so these are
#: retried a few times, with a growing wait, before they count as failed.
IRONIC_TRANSIENT_STATUSES = (409, 500, 503)
IRONIC_LOCK_RETRIES = 3
IRONIC_LOCK_WAIT = 0.5

#: The longest wait between passes after failed ones, unless the interval
#: itself is longer.
MAX_BACKOFF = 900.0


class Target(str, enum.Enum):
    PLACEMENT = "placement"
    IRONIC = "ironic"


class Action(str, enum.Enum):
    ADD = "add"
    REMOVE = "remove"


@dataclasses.dataclass(frozen=True)
class Step:
    """One trait to add to or remove from a provider or an Ironic node."""

    target: Target
    uuid: str
    trait: str
    action: Action
    why: str


@dataclasses.dataclass(frozen=True)
class Failure:
    step: Step
    error: str


@dataclasses.dataclass
class SyncResult:
    """What a run changed (or, in a dry run, would change) and what failed."""

    changes: list[Step] = dataclasses.field(default_factory=list)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    nodes: int = 0
    #: None when the cloud has no Ironic.
    ironic_nodes: int | None = 0
    requests: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def _diff(target: Target, uuid: str, trait: str, want: bool, have: bool,
          why: str) -> list[Step]:
    if want and not have:
        return [Step(target, uuid, trait, Action.ADD, why)]
    if have and not want:
        return [Step(target, uuid, trait, Action.REMOVE, "usable again")]
    return []


def backoff(interval: float, failures: int) -> float:
    """Seconds to wait before the next pass after ``failures`` failed ones.

    The interval after a good pass; then twice as long per failure in a
    row, up to ``MAX_BACKOFF`` (or the interval, if that is longer), so a
    Nova outage is not hammered and recovery is still seen within minutes.
    """
    if failures <= 0:
        return float(interval)
    return float(min(interval * 2 ** min(failures, 32),
                     max(interval, MAX_BACKOFF)))


def plan(
    nodes: Sequence[decisions.NodeFacts],
    ironic_nodes: Mapping[str, decisions.IronicNodeFacts] | None,
    placement_traits: Mapping[str, set[str]],
) -> list[Step]:
    """Compute the changes; a pure function of the three inputs.

    :param nodes: Nova's compute node records, listed *before* Ironic's
        nodes: Nova learns of nodes only from Ironic, so a record whose node
        is then missing from Ironic's complete list was deleted there.
    :param ironic_nodes: every Ironic node, by UUID, with its traits; None
        on a cloud without Ironic (only duplicates are then marked).
    :param placement_traits: for each managed trait, the providers that
        carry it now.
    """
    changes: list[Step] = []
    bm = traits.BAREMETAL_UNAVAILABLE
    unavailable = {}
    for uuid, bm_node in sorted((ironic_nodes or {}).items()):
        reasons = decisions.baremetal_reasons(bm_node)
        unavailable[uuid] = reasons
        changes += _diff(Target.IRONIC, uuid, bm, bool(reasons),
                         bm in bm_node.traits, decisions.summarize(reasons))

    duplicates = decisions.duplicate_reasons(nodes)
    for node in sorted(nodes, key=lambda n: (n.nodename, n.host)):
        if not node.uuid:
            continue
        stale = []
        if node.key in duplicates:
            stale.append(duplicates[node.key])
        is_ironic = decisions.is_ironic(node.hypervisor_type)
        listed = ironic_nodes is not None and node.nodename in ironic_nodes
        if is_ironic and ironic_nodes is not None and not listed:
            stale.append(decisions.missing_from_ironic_reason(node.nodename))
        carried = node.uuid in placement_traits.get(traits.STALE_NODE, set())
        # Without Ironic, whether an Ironic record's node is gone is unknown:
        # a trait set by an earlier run stays.
        if stale or not (is_ironic and ironic_nodes is None):
            changes += _diff(Target.PLACEMENT, node.uuid, traits.STALE_NODE,
                             bool(stale), carried, decisions.summarize(stale))
        if is_ironic and listed:
            reasons = unavailable[node.nodename]
            changes += _diff(Target.PLACEMENT, node.uuid, bm, bool(reasons),
                             node.uuid in placement_traits.get(bm, set()),
                             decisions.summarize(reasons))
    return changes


class TraitSync:
    """Gathers the facts, plans, and applies; one ``run()`` per pass."""

    def __init__(
        self,
        list_compute_nodes: Callable[[], Iterable[decisions.NodeFacts]],
        ironic_client: ironic.IronicClient | None,
        placement_client: placement.PlacementClient,
        page_size: int = 1000,
        sleep: Callable[[float], None] = time.sleep,
        max_missing_fraction: float = stale_mod.DEFAULT_MAX_MISSING_FRACTION,
        extra_fields: Sequence[str] = (),
    ) -> None:
        """:param ironic_client: None on a cloud without Ironic.
        :param extra_fields: Ironic node fields to list besides the
            decisions' (the agent's capacity gauges want
            ``ironic.REPORT_FIELDS``)."""
        self.list_compute_nodes = list_compute_nodes
        self.ironic = ironic_client
        self.placement = placement_client
        self.page_size = page_size
        self.sleep = sleep
        self.max_missing_fraction = max_missing_fraction
        self.extra_fields = tuple(extra_fields)

    def providers_with(self, trait: str) -> set[str]:
        """UUIDs of the providers that carry ``trait`` (one request)."""
        return {rp["uuid"] for rp in self.placement.providers(required=trait)}

    def gather(self, dry_run: bool = False) -> tuple[
            list[decisions.NodeFacts],
            dict[str, decisions.IronicNodeFacts] | None, dict[str, set[str]]]:
        """Nova first, then Ironic, then placement (see ``plan``).

        Placement answers 400 to a query naming an unknown trait, so the
        managed traits are created first; a dry run creates nothing and
        takes an unknown trait as carried by no provider. Raises
        ``stale.UntrustedListing`` (before touching placement) for an Ironic
        listing that lacks too many of the nodes Nova knows.
        """
        nodes = list(self.list_compute_nodes())
        ironic_nodes = None
        if self.ironic is not None:
            ironic_nodes = {n.uuid: n for n in self.ironic.list_nodes(
                self.page_size, self.extra_fields)}
            verdict = stale_mod.judge_listing(nodes, ironic_nodes,
                                              self.max_missing_fraction)
            if not verdict.trusted:
                raise stale_mod.UntrustedListing(verdict)
        if dry_run:
            known = self.placement.existing_traits(traits.MANAGED)
        else:
            for trait in traits.MANAGED:
                self.placement.ensure_trait(trait)
            known = set(traits.MANAGED)
        have = {t: self.providers_with(t) if t in known else set()
                for t in traits.MANAGED}
        return nodes, ironic_nodes, have

    def run(self, dry_run: bool = False) -> SyncResult:
        """One pass. Failures of single changes are collected, not raised;
        a failure to gather the facts raises ApiError, an untrusted Ironic
        listing ``stale.UntrustedListing`` (nothing was changed).
        """
        before = self._requests()
        nodes, ironic_nodes, have = self.gather(dry_run)
        result = SyncResult(nodes=len(nodes), ironic_nodes=(
            None if ironic_nodes is None else len(ironic_nodes)))
        changes = plan(nodes, ironic_nodes, have)
        if dry_run:
            result.changes = changes
            result.requests = self._requests_since(before)
            return result
        applied, failures = apply_steps(changes, self.ironic,
                                        self.placement, self.sleep)
        result.changes += applied
        result.failures += failures
        result.requests = self._requests_since(before)
        return result

    def _requests(self) -> int:
        return self.placement.requests + (self.ironic.requests
                                          if self.ironic is not None else 0)

    def _requests_since(self, before: int) -> int:
        return self._requests() - before


def apply_steps(
    changes: Sequence[Step], ironic_client: ironic.IronicClient | None,
    placement_client: placement.PlacementClient,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Step], list[Failure]]:
    """Write ``changes``; the one write path of ``drain sync`` and
    ``nova-drain-agent``. Returns (applied, failed); an ApiError of one
    change is a failure of that change, never raised.

    The order follows what each write does:

    1. Placement, for every provider that gains a trait: that is what
       keeps the node out (the pre-filter forbids it), so it goes first,
       with the provider's removals that need no Ironic write.
    2. Ironic's node traits, added and removed (409 NodeLocked retried):
       the driver's periodic copies them to placement
       (``nova/virt/ironic/driver.py`` ``update_provider_tree``), so an
       added trait must be there too to last.
    3. Placement's removals of a trait the node also carries, once Ironic
       dropped it: removed from placement first, the driver's next
       periodic would copy it back. Where Ironic refused, the removal is
       left for the next pass (neither applied nor failed).

    Each provider is written once, generation-safe
    (``update_provider_traits``: a 409 re-read and retried).
    """
    applied: list[Step] = []
    failures: list[Failure] = []
    ironic_steps = [c for c in changes if c.target is Target.IRONIC]
    on_node = {(c.uuid, c.trait) for c in ironic_steps
               if c.action is Action.REMOVE}
    first: dict[str, list[Step]] = {}
    last: dict[str, list[Step]] = {}
    for change in changes:
        if change.target is not Target.PLACEMENT:
            continue
        waits = (change.action is Action.REMOVE
                 and (change.uuid, change.trait) in on_node)
        (last if waits else first).setdefault(change.uuid, []).append(change)
    for uuid in [u for u, g in first.items()
                 if any(c.action is Action.ADD for c in g)]:
        _apply_placement(placement_client, uuid, first.pop(uuid), applied,
                         failures)
    for change in ironic_steps:
        try:
            apply_ironic_step(ironic_client, change, sleep)
            applied.append(change)
        except http.ApiError as exc:
            failures.append(Failure(change, str(exc)))
    ironic_failed = {(f.step.uuid, f.step.trait) for f in failures
                     if f.step.target is Target.IRONIC}
    for uuid, group in last.items():
        kept = [c for c in group if (c.uuid, c.trait) not in ironic_failed]
        first.setdefault(uuid, []).extend(kept)
    for uuid, group in first.items():
        if group:
            _apply_placement(placement_client, uuid, group, applied,
                             failures)
    return applied, failures


def _apply_placement(placement_client: placement.PlacementClient,
                     uuid: str, group: list[Step], applied: list[Step],
                     failures: list[Failure]) -> None:
    """One provider's changes in one generation-safe write."""
    add = {c.trait for c in group if c.action is Action.ADD}
    remove = {c.trait for c in group if c.action is Action.REMOVE}
    try:
        placement_client.update_provider_traits(uuid, add, remove)
        applied.extend(group)
    except http.ApiError as exc:
        failures.extend(Failure(c, str(exc)) for c in group)


def apply_ironic_step(ironic_client: ironic.IronicClient | None, step: Step,
                      sleep: Callable[[float], None] = time.sleep) -> None:
    """Set or remove one trait on an Ironic node; a 409 NodeLocked (or a
    brief 500/503) is retried ``IRONIC_LOCK_RETRIES`` times with a growing
    wait before its ApiError is raised."""
    assert ironic_client is not None  # plan() makes no Ironic change then
    for attempt in range(IRONIC_LOCK_RETRIES + 1):
        try:
            if step.action is Action.ADD:
                ironic_client.add_trait(step.uuid, step.trait)
            else:
                ironic_client.remove_trait(step.uuid, step.trait)
            return
        except http.ApiError as exc:
            if (exc.status not in IRONIC_TRANSIENT_STATUSES
                    or attempt == IRONIC_LOCK_RETRIES):
                raise
            sleep(IRONIC_LOCK_WAIT * (attempt + 1))
