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

"""Moving a drained host's servers away: how each moves, and when it is done.

Pure functions over plain facts, after Nova's own rules; the runner
(:mod:`nova_drain_filters.migration.runner`) gathers the facts and acts.
Nothing is kept between runs: a rerun reads Nova's migration records and
picks up what is still in flight.
"""
import dataclasses
import enum
import math
import statistics
from collections.abc import Iterable

#: Nova's migration statuses after which a move is over
#: (``nova/objects/migration.py``; ``finished`` still awaits its confirm).
FINAL = frozenset({"completed", "confirmed", "reverted", "error", "failed",
                   "cancelled", "done"})
#: Statuses a live migration can be aborted in from 2.65
#: (``nova/compute/api.py`` ``live_migrate_abort``).
ABORTABLE = frozenset({"queued", "preparing", "running"})
#: Shortest and longest pause between two polls; the share of the time
#: since the last change that the next pause may be.
MIN_POLL, MAX_POLL, POLL_FRACTION = 0.25, 30.0, 0.2
#: Looks at a move once it is due: the shortest pause; the pause's share
#: of the time since it became due (so each pause is 1.5 times the last);
#: the longest, as a share of a move's mean duration, and never under a
#: second (nothing is looked at every second for long).
DUE_POLL, DUE_FRACTION, DUE_CAP, DUE_CAP_FLOOR = 0.1, 0.5, 0.1, 1.0
#: Nova's stamps in its API are whole seconds (rounded down).
STAMP_RESOLUTION = 1.0
#: Backoff before a retry: 2, 4, 8 ... seconds up to this.
MAX_RETRY_DELAY = 60.0
#: How far apart the clocks stamping a migration record may be (Nova's
#: conductor and computes write ``updated_at``), and ours from theirs:
#: the margin of a poll's ``changes-since``.
CLOCK_SKEW = 60.0


class Action(str, enum.Enum):
    """How a server moves."""

    LIVE = "live"
    COLD = "cold"
    NONE = "unmovable"


#: The status after which a move needs us (verify or confirm): what the
#: runner learns each kind of move's duration to.
ARRIVES = {Action.LIVE: "completed", Action.COLD: "finished"}


class Why(str, enum.Enum):
    """Why a server is not moved (rendered by the CLI)."""

    BAREMETAL = "baremetal"
    SUSPENDED = "suspended"
    ERROR = "error"
    RESCUED = "rescued"
    SHELVED = "shelved"
    FOREIGN_RESIZE = "foreign_resize"
    TASK = "task"
    AFFINITY = "affinity"
    STATE = "state"


class Outcome(str, enum.Enum):
    """How the move of one server ended (rendered by the CLI)."""

    MOVED = "moved"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    UNMOVABLE = "unmovable"
    PLANNED = "planned"
    NOT_STARTED = "not_started"
    ABORTED = "aborted"
    IN_FLIGHT = "in_flight"


class Next(str, enum.Enum):
    """What the runner does about a tracked move after a poll."""

    WAIT = "wait"
    CONFIRM = "confirm"
    VERIFY = "verify"
    RETRY = "retry"
    FAIL = "fail"
    ABORT = "abort"
    CANCELLED = "cancelled"


@dataclasses.dataclass(frozen=True)
class ServerFacts:
    """One server on a drained host, as Nova shows it."""

    uuid: str
    name: str
    host: str
    status: str
    task_state: str | None = None
    baremetal: bool = False
    #: An affinity group holding it with other members: (name, count).
    affinity: tuple[str, int] | None = None


@dataclasses.dataclass(frozen=True)
class Step:
    """One planned move; ``why`` and ``detail`` when it is unmovable."""

    host: str
    server: str
    name: str
    action: Action
    why: Why | None = None
    detail: str = ""


#: Server status -> how Nova moves it (``nova/compute/api.py``:
#: ``live_migrate`` takes ACTIVE or PAUSED, ``resize`` ACTIVE or STOPPED;
#: we cold-migrate only SHUTOFF, so a running server is never stopped).
_BY_STATUS = {
    "ACTIVE": (Action.LIVE, None), "PAUSED": (Action.LIVE, None),
    "SHUTOFF": (Action.COLD, None),
    "SUSPENDED": (Action.NONE, Why.SUSPENDED),
    "ERROR": (Action.NONE, Why.ERROR), "RESCUE": (Action.NONE, Why.RESCUED),
    "SHELVED": (Action.NONE, Why.SHELVED),
    "SHELVED_OFFLOADED": (Action.NONE, Why.SHELVED),
    "VERIFY_RESIZE": (Action.NONE, Why.FOREIGN_RESIZE),
}


def plan_move(server: ServerFacts) -> Step:
    """How one server moves, or why it does not.

    ===============  =========  ============  =========================
    baremetal        task set   status        action
    ===============  =========  ============  =========================
    yes              any        any           unmovable (baremetal)
    no               yes        any           unmovable (task)
    no               no         ACTIVE/PAUSED live (affinity: unmovable)
    no               no         SHUTOFF       cold (affinity: unmovable)
    no               no         other         unmovable (its state)
    ===============  =========  ============  =========================

    An affinity group keeps its members on one host and Nova moves one
    server at a time, so the scheduler's ServerGroupAffinityFilter never
    lets a member leave while the others stay.
    """
    def step(action: Action, why: Why | None = None,
             detail: str = "") -> Step:
        return Step(server.host, server.uuid, server.name, action, why,
                    detail)

    if server.baremetal:
        return step(Action.NONE, Why.BAREMETAL)
    if server.task_state:
        return step(Action.NONE, Why.TASK, server.task_state)
    action, why = _BY_STATUS.get(server.status, (Action.NONE, Why.STATE))
    if why is not None:
        return step(action, why, server.status)
    if server.affinity is not None:
        name, others = server.affinity
        return step(Action.NONE, Why.AFFINITY, f"{name} ({others} other "
                    "member(s))")
    return step(action)


def plan_moves(servers: Iterable[ServerFacts]) -> list[Step]:
    """Every server's step, live moves first (they run while the others
    wait), then cold, then the unmovable."""
    order = {Action.LIVE: 0, Action.COLD: 1, Action.NONE: 2}
    return sorted((plan_move(s) for s in servers),
                  key=lambda st: (order[st.action], st.host, st.name))


def next_step(action: Action, status: str, *, running_for: float | None,
              server_timeout: float, aborted: bool) -> Next:
    """What to do about a move whose migration record has ``status``.

    ``running_for``: seconds since the migration was first seen
    ``running`` (the per-server clock), None before. Nova's statuses come
    from ``nova/conductor/manager.py`` ``_live_migrate`` (``accepted``,
    then ``error`` if a pre-check or the scheduler fails) and
    ``nova/compute/manager.py`` (``queued``, ``preparing``, ``running``,
    ``completed``; a rollback writes ``failed``, an abort ``cancelled``;
    a cold migration goes ``pre-migrating`` ... ``finished``, then
    ``confirming``, ``confirmed``).
    """
    if status == "error":
        return Next.RETRY  # the caller checks the server is back as it was
    if status in ("failed", "reverted", "done"):
        return Next.FAIL
    if status == "cancelled":
        return Next.CANCELLED if aborted else Next.FAIL
    if action is Action.LIVE:
        if status == "completed":
            return Next.VERIFY
        if (status == "running" and not aborted and running_for is not None
                and running_for >= server_timeout):
            return Next.ABORT
        return Next.WAIT
    if status == "confirmed":
        return Next.VERIFY
    if status == "finished":
        return Next.CONFIRM
    return Next.WAIT


def succeeded(action: Action, status: str, source: str,
              host: str | None, task_state: str | None) -> bool:
    """A move succeeded: its migration is over (``completed`` live,
    ``confirmed`` cold), the server is elsewhere and idle. A 202 never is."""
    done = "completed" if action is Action.LIVE else "confirmed"
    return (status == done and host is not None and host != source
            and task_state is None)


def transient(action: Action, source: str, host: str | None,
              status: str, task_state: str | None) -> bool:
    """A failed move that may be retried: the server is back on the
    source, in a state it moves from, with no task (a failed pre-check or
    NoValidHost; ``nova/conductor/manager.py`` ``_live_migrate`` keeps the
    vm_state and clears the task, as ``_cold_migrate`` does)."""
    again = plan_move(ServerFacts("", "", source, status, task_state))
    return host == source and again.action is action


def retry_delay(attempt: int) -> float:
    """Backoff before the ``attempt``-th retry (1, 2 ...)."""
    return min(float(2 ** max(attempt, 1)), MAX_RETRY_DELAY)


def poll_delay(since_change: float, remaining: float) -> float:
    """The pause before the next poll: a fifth of the time since anything
    last changed, from MIN_POLL to MAX_POLL and never past ``remaining``.

    A change is seen at most 20 % of its wait late, and a wait of T
    seconds costs about log(T / MIN_POLL) / log(1.2) polls, whatever the
    number of servers: the runner polls every migration in one request.
    """
    wanted = min(max(POLL_FRACTION * since_change, MIN_POLL), MAX_POLL)
    return max(0.0, min(wanted, remaining))


def took(posted: float, looks: tuple[float, float],
         stamps: tuple[float | None, float | None]) -> float | None:
    """How long a move took from its POST to its ``ARRIVES`` status.

    ``looks``: when the last poll that did not see it arrived and the
    first that did read Nova (our clock). Nova's stamps (``created_at``,
    ``updated_at``) are whole seconds, so a duration from them is up to a
    second off (and starts at the record, not the POST); two looks closer
    than STAMP_RESOLUTION bracket the arrival better, and their middle is
    used. None with neither.
    """
    before, seen = max(looks[0], posted), looks[1]
    if seen - before < STAMP_RESOLUTION:
        return max(0.0, (before + seen) / 2 - posted)
    created, updated = stamps
    if created is None or updated is None:
        return None
    return max(0.0, updated - created)


def expected_duration(durations: Iterable[float]
                      ) -> tuple[float, float] | None:
    """When a move should reach its ``ARRIVES`` status, from the moves of
    this run that got there (:func:`took`): ``(due, mean)``.

    The mean, since a stamp's or a look's error averages out; a move is
    due one standard deviation before it (never before the quickest
    seen), so the half of the moves that are quicker than the mean is not
    seen only at the mean.
    """
    found = list(durations)
    if not found:
        return None
    mean = statistics.fmean(found)
    return max(min(found), mean - statistics.pstdev(found)), mean


def look_delay(since_change: float,
               due: tuple[float, float] | None) -> float:
    """The pause before the next look at one move.

    ``due``: seconds since the move became due (negative before) and the
    mean duration of its kind; None without an estimate (no move of its
    kind has arrived yet, or it has not started running): then
    :func:`poll_delay`. Before it is due: until then, at most MAX_POLL.
    Once due: half the time since it became due, from DUE_POLL up to
    DUE_CAP of the mean duration (DUE_CAP_FLOOR to MAX_POLL). A move that
    arrives ``x`` seconds after it was due is seen at most ``x / 2`` late
    (a tenth of a move, for a long overrun), at a cost of about
    ``log(x / DUE_POLL) / log(1.5)`` looks while ``x`` is short, shared
    by every move in flight: one request polls them all.
    """
    if due is None:
        return poll_delay(since_change, math.inf)
    since_due, mean = due
    if since_due < 0:
        return min(-since_due, MAX_POLL)
    cap = min(MAX_POLL, max(DUE_CAP_FLOOR, DUE_CAP * mean))
    return min(max(DUE_FRACTION * since_due, DUE_POLL), cap)


def changes_since(marks: Iterable[float], now: float) -> float:
    """The ``changes-since`` of a poll (epoch seconds): CLOCK_SKEW before
    the oldest of ``marks``, each a flying move's last change as Nova
    stamped it (its record's ``updated_at``) or, with no record seen yet,
    its POST on our clock; ``now`` (ours) without any.

    ``nova/db/main/api.py`` ``_get_query_nova_resource_by_changes_time``
    (from ``migration_get_all_by_filters``) keeps the records with
    ``updated_at >= changes-since``, so each move's next change is in the
    window, and the answer holds the moves in flight and the few that
    changed within the margin, not every record of a long run. The API's
    stamps are whole seconds, rounded down (``nova/api/openstack/compute/
    migrations.py`` ``_output``, oslo.versionedobjects' ``isotime``): a
    mark is never later than the change. A record Nova has not updated
    since the conductor made it (``updated_at`` NULL) is in no window:
    the runner's ``no_record`` asks the host's list for it.
    """
    return min(marks, default=now) - CLOCK_SKEW


@dataclasses.dataclass(frozen=True)
class HostLoad:
    """What is left on a drained host."""

    host: str
    servers: tuple[str, ...]
    #: Migrations from or to it that are not over; a ``finished`` cold
    #: migration waits for its confirm and counts.
    unfinished: tuple[str, ...]


def host_done(load: HostLoad) -> bool:
    """No server left and no migration unfinished: ``finish`` may go on
    (``nova/compute/api.py`` refuses to delete a service with migrations
    in progress with a 409)."""
    return not load.servers and not load.unfinished


def unfinished(statuses: Iterable[str]) -> bool:
    return any(s not in FINAL for s in statuses)
