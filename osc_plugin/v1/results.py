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

"""The Result column: the engines' outcomes in the words operators script.

The engines return enums and counts; this is the one place that turns
them into text. The words are public interface: keep them as they are.
"""
from collections.abc import Sequence

from nova_drain_filters import drain
from nova_drain_filters import fit
from nova_drain_filters import orphan_clear
from nova_drain_filters import stale
from nova_drain_filters.migration import plan

#: The Result of a step not carried out: with --dry-run, and otherwise
#: (the operator said no, or the plan was refused).
PLANNED, NOT_DONE = "planned", "not done"
#: A step whose request failed (its error goes to stderr); one that went
#: through.
FAILED, DONE = "failed", "done"

_KEPT = {
    orphan_clear.Keep.NODE_UNKNOWN:
        "no node known for provider {about} to check the instance against",
    orphan_clear.Keep.NO_NODE_YET: "instance has no node yet",
    orphan_clear.Keep.MOVING: "instance is {about}",
    orphan_clear.Keep.ON_NODE: "instance is on {about} now",
    orphan_clear.Keep.MIGRATION: "consumer is a migration",
    orphan_clear.Keep.CHANGED:
        "its allocations on {about} changed while clearing; run 'orphan "
        "list' again",
    orphan_clear.Keep.KEPT_CHANGING: "its allocations kept changing",
}


def kept(why: orphan_clear.Kept) -> str:
    """Why a consumer keeps its allocations, e.g. ``instance is on n1 now``."""
    return _KEPT[why.why].format(about=why.about)


def cleared(outcome: orphan_clear.ClearOutcome) -> str:
    """A cleared consumer's Result, e.g. ``deleted (after 1 consumer
    generation conflict)``."""
    word = outcome.result.value
    if outcome.result is orphan_clear.Outcome.REWRITTEN:
        word = f"rewritten, kept {outcome.others} provider(s)"
    notes = [kept(outcome.kept)] if outcome.kept else []
    if outcome.conflicts:
        notes.append(f"after {outcome.conflicts} consumer generation "
                     f"conflict{'s' if outcome.conflicts > 1 else ''}")
    return word + (f" ({'; '.join(notes)})" if notes else "")


def drained(outcome: drain.Outcome, left: Sequence[str] = ()) -> str:
    """A drain step's Result; ``left``: what Nova left after a release."""
    if outcome is drain.Outcome.LEFT_DISABLED:
        return f"{outcome.value}: no longer disabled by a drain"
    if outcome is drain.Outcome.RELEASED and left:
        return f"{outcome.value}; left behind: {', '.join(left)}"
    return outcome.value


def _provider(outcome: stale.Outcome, consumers: int) -> str:
    if outcome is stale.Outcome.PROVIDER_DELETED:
        return f"{outcome.value} ({consumers} dead consumer(s) cleared)"
    return outcome.value


def stale_cleared(done: stale.Cleared) -> str:
    """A stale clear step's Result, e.g. ``deleted; provider(s) left
    behind: RP`` or ``provider deleted (1 dead consumer(s) cleared)``."""
    if done.outcome is not stale.Outcome.DELETED:
        return _provider(done.outcome, done.consumers)
    if done.provider is not None:
        return f"deleted {done.where}; {_provider(done.provider, done.consumers)}"
    return done.outcome.value + (
        f"; provider(s) left behind: {', '.join(done.left)}" if done.left
        else "")


def synced(dry_run: bool, error: str | None = None) -> str:
    """A trait sync change's Result: planned, done, or why it failed."""
    if error is not None:
        return f"{FAILED}: {error}"
    return PLANNED if dry_run else DONE


#: ``drain host migrate``: why a server stays.
STAYS = {
    plan.Why.BAREMETAL: "a baremetal (Ironic) server: Nova cannot migrate it",
    plan.Why.SUSPENDED: "SUSPENDED: Nova migrates no suspended server",
    plan.Why.ERROR: "ERROR: fix or rebuild it first",
    plan.Why.RESCUED: "RESCUE: unrescue it first",
    plan.Why.SHELVED: "SHELVED: it is not on a host to move from",
    plan.Why.FOREIGN_RESIZE: "VERIFY_RESIZE from someone else's resize: "
                            "never confirmed for them",
    plan.Why.TASK: "a task is in progress",
    plan.Why.AFFINITY: "in affinity group",
    plan.Why.STATE: "Nova cannot migrate a server in this state",
}
#: ``drain host check``: why a server has nowhere to go.
NOWHERE = {
    fit.Why.UNMOVABLE: "migrate would not move it",
    fit.Why.NO_HOST: "no host is left to take a server",
    fit.Why.TRAIT: "traits",
    fit.Why.AZ: "availability zone pin",
    fit.Why.TOO_BIG: "larger than any host",
    fit.Why.PLACEMENT: "placement has no candidate",
    fit.Why.ANTI_AFFINITY: "anti-affinity group",
    fit.Why.NO_ROOM: "no room left",
}
#: ``drain host migrate``: how the move of a server ended.
MIGRATED = {
    plan.Outcome.MOVED: "moved", plan.Outcome.FAILED: "failed",
    plan.Outcome.TIMED_OUT: "timed out, aborted",
    plan.Outcome.UNMOVABLE: "unmovable", plan.Outcome.PLANNED: "planned",
    plan.Outcome.NOT_STARTED: "not started", plan.Outcome.ABORTED: "aborted",
    plan.Outcome.IN_FLIGHT: "in flight",
}
