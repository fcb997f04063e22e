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

"""Carry out planned moves within a concurrency cap and deadlines.

The decisions are :mod:`nova_drain_filters.migration.plan`'s; this module posts
the moves, polls Nova's migration records for all of them in one request
per poll (``GET /os-migrations?changes-since=``), and judges each server by
where Nova says it ended up.

When to poll: at each flying move's next look, the earliest first (see
:func:`nova_drain_filters.migration.plan.look_delay`): a backoff until a live
move runs, then when it should arrive, learned from this run's moves.
"""
import collections
import datetime
import time
from collections.abc import Callable
from collections.abc import Iterable

from nova_drain_filters.clients import http
from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import plan
from nova_drain_filters.migration import tracking

#: Nova's instance action of each kind of move (nova/compute/instance_actions.py).
ACTIONS = {plan.Action.LIVE: ("live-migration",), plan.Action.COLD: ("migrate",)}
#: Migration types that are ours to pick up again on a rerun: a ``resize``
#: is someone's flavor change, never confirmed for them.
TYPES = {"live-migration": plan.Action.LIVE, "migration": plan.Action.COLD}



def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(
        epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Runner:
    """Moves servers; ``run`` returns every move with its outcome."""

    def __init__(self, client: server_moves.MoveClient, options: tracking.Options,
                 listen: tracking.Listener,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 wall: Callable[[], float] = time.time) -> None:
        self.client, self.options, self.listen = client, options, listen
        self.clock, self.sleep, self.wall = clock, sleep, wall
        self.queue: collections.deque[tracking.Move] = collections.deque()
        self.flying: list[tracking.Move] = []
        self.done: list[tracking.Move] = []
        #: How long the moves that arrived took (:func:`plan.took`), by kind.
        self.durations: dict[plan.Action, list[float]] = {
            plan.Action.LIVE: [], plan.Action.COLD: []}
        #: When the last two polls read Nova (our clock): they bracket
        #: the changes the last one saw.
        self.looks = (0.0, 0.0)

    def run(self, moves: Iterable[tracking.Move]) -> list[tracking.Move]:
        """Post, poll and judge until every move is over or the deadline.

        A move with a ``record`` (a rerun found it in flight) is tracked,
        never posted again. KeyboardInterrupt aborts the live migrations
        this run started, then goes on up.
        """
        start = self.clock()
        deadline = start + self.options.timeout
        self.looks = (start, start)
        for move in moves:
            move.changed_at = start
            if move.record is not None:
                self.flying.append(move)
                self.listen(tracking.Event.RESUMED, move, move.record.status)
            else:
                self.queue.append(move)
        try:
            while self.queue or self.flying:
                now = self.clock()
                if now >= deadline:
                    self.stop("--timeout reached")
                    break
                self.start_ready(now)
                if not self.queue and not self.flying:
                    break
                self.sleep(self.pause(now, deadline))
                self.poll(self.since())
        except KeyboardInterrupt:
            self.stop("interrupted")
            raise
        return self.done

    def pause(self, now: float, deadline: float) -> float:
        """Until the earliest of: the next look at a flying move, the next
        --server-timeout, a retry's backoff (with a slot free), the
        deadline."""
        due = [deadline]
        due += [m.running_since + self.options.server_timeout
                for m in self.flying
                if m.running_since is not None and not m.aborted]
        if self.busy() < self.options.concurrency:
            due += [m.not_before for m in self.queue]
        due = [d for d in due if d > now] or [now]
        due += [now + self.look_delay(m, now) for m in self.flying]
        return max(0.0, min(due) - now)

    def expected(self, move: tracking.Move) -> tuple[float, float] | None:
        """(due on our clock, mean duration) of a move this run posted;
        None before a live one runs, or once it has arrived."""
        record = move.record
        if (not move.started_here or record is None
                or record.status == plan.ARRIVES[move.step.action]
                or record.status in plan.FINAL
                or (move.step.action is plan.Action.LIVE
                    and move.running_since is None)):
            return None
        took = plan.expected_duration(self.durations[move.step.action])
        return None if took is None else (move.posted_at + took[0], took[1])

    def look_delay(self, move: tracking.Move, now: float) -> float:
        due = self.expected(move)
        return plan.look_delay(now - move.changed_at,
                               due and (now - due[0], due[1]))

    def finish(self, move: tracking.Move, outcome: plan.Outcome, detail: str = "",
               destination: str = "") -> None:
        move.outcome, move.detail = outcome, tracking.tail(detail)
        move.destination = destination
        if move in self.flying:
            self.flying.remove(move)
        self.done.append(move)
        event = {plan.Outcome.MOVED: tracking.Event.COMPLETED,
                 plan.Outcome.TIMED_OUT: tracking.Event.ABORTED,
                 plan.Outcome.ABORTED: tracking.Event.ABORTED}.get(
                     outcome, tracking.Event.FAILED)
        self.listen(event, move, move.detail or destination)

    # posting ---------------------------------------------------------------

    def busy(self) -> int:
        """Moves in flight by Nova's records: posted, and not yet at a
        status in ``plan.FINAL`` (--concurrency counts these)."""
        return sum(m.record is None or m.record.status not in plan.FINAL
                   for m in self.flying)

    def start_ready(self, now: float) -> None:
        for move in list(self.queue):
            if self.busy() >= self.options.concurrency:
                return
            if move.not_before > now:
                continue
            self.queue.remove(move)
            self.post(move, now)

    def post(self, move: tracking.Move, now: float) -> None:
        uuid = move.step.server
        try:
            if move.step.action is plan.Action.LIVE:
                self.client.live_migrate(uuid)
            else:
                self.client.cold_migrate(uuid)
        except http.Conflict as exc:
            # A task is set (nova/compute/api.py check_instance_state): wait.
            self.retry(move, now, f"HTTP 409: {exc.message}")
            return
        except http.ApiError as exc:
            self.finish(move, plan.Outcome.FAILED, str(exc))
            return
        move.attempts += 1
        move.posted_at = move.changed_at = now
        move.started_here = True
        move.record, move.running_since = None, None
        move.confirm_sent = move.aborted = False
        self.flying.append(move)
        self.listen(tracking.Event.STARTED, move, f"attempt {move.attempts}")

    def retry(self, move: tracking.Move, now: float, why: str) -> None:
        """Back to the end of the queue after a backoff, or failed."""
        if move in self.flying:
            self.flying.remove(move)
        if move.attempts > self.options.retries:
            self.finish(move, plan.Outcome.FAILED, why)
            return
        move.not_before = now + plan.retry_delay(move.attempts)
        self.queue.append(move)
        self.listen(tracking.Event.RETRYING, move, tracking.tail(why))

    # polling ---------------------------------------------------------------

    def since(self) -> str:
        """The next poll's ``changes-since`` (:func:`plan.changes_since`):
        a move's record stamp, or its POST (our clock) without one."""
        now, wall = self.clock(), self.wall()
        return _iso(plan.changes_since((
            m.record.updated_at if m.record and m.record.updated_at
            is not None else wall - (now - m.changed_at)
            for m in self.flying), wall))

    def poll(self, since: str) -> None:
        by_server: dict[str, list[server_moves.MigrationRecord]] = {}
        sent = self.clock()
        for record in self.client.migration_records(changes_since=since):
            by_server.setdefault(record.instance_uuid, []).append(record)
        now = self.clock()
        self.looks = (self.looks[1], (sent + now) / 2)
        seen = []
        for move in list(self.flying):
            found = [r for r in by_server.get(move.step.server, ())
                     if r.id not in move.known and (
                         move.record is None or r.id == move.record.id)]
            if found:
                self.see(move, max(found, key=lambda r: r.id), now)
            if move.record is not None:
                seen.append(move)
            elif now - move.posted_at > self.options.server_timeout:
                self.no_record(move, now)
        # A move whose record is over frees its slot now: the next POST
        # goes out before the reads that judge it (server, faults).
        self.start_ready(now)
        for move in seen:
            self.judge(move, now)

    def no_record(self, move: tracking.Move, now: float) -> None:
        """No record seen within --server-timeout: ask the source host's
        list before failing it. ``changes-since`` misses a record Nova has
        not updated since the conductor made it (``nova/db/main/api.py``
        ``_get_query_nova_resource_by_changes_time`` compares
        ``updated_at``, NULL until then),
        and a loaded conductor may take that long to schedule."""
        found = [r for r in self.client.migration_records(host=move.step.host)
                 if r.instance_uuid == move.step.server
                 and r.id not in move.known]
        if found:
            self.update(move, max(found, key=lambda r: r.id), now)
        else:
            self.finish(move, plan.Outcome.FAILED, "Nova made no migration "
                        "record for it within --server-timeout")

    def update(self, move: tracking.Move, record: server_moves.MigrationRecord,
               now: float) -> None:
        self.see(move, record, now)
        self.judge(move, now)

    def see(self, move: tracking.Move, record: server_moves.MigrationRecord,
            now: float) -> None:
        before = move.record.status if move.record else None
        move.record = record
        if record.status != before:
            move.changed_at = now
            self.learn(move, record)
            if record.status == "running" and move.running_since is None:
                move.running_since = now
                self.listen(tracking.Event.RUNNING, move, self.memory(move))

    def learn(self, move: tracking.Move, record: server_moves.MigrationRecord) -> None:
        """The duration of a move this run posted, once it arrives."""
        if (move.started_here
                and record.status == plan.ARRIVES[move.step.action]):
            took = plan.took(move.posted_at, self.looks,
                             (record.created_at, record.updated_at))
            if took is not None:
                self.durations[move.step.action].append(took)

    def memory(self, move: tracking.Move) -> str:
        """Memory remaining, where Nova gives it (libvirt does; the fake
        driver does not)."""
        assert move.record is not None
        try:
            found = self.client.server_migration(move.step.server,
                                                 move.record.id)
        except http.ApiError:
            return ""
        left = (found or {}).get("memory_remaining_bytes")
        return f"memory remaining {left // 2**20} MiB" if left else ""

    def judge(self, move: tracking.Move, now: float) -> None:
        record = move.record
        assert record is not None
        running_for = (None if move.running_since is None
                       else now - move.running_since)
        what = plan.next_step(move.step.action, record.status,
                              running_for=running_for,
                              server_timeout=self.options.server_timeout,
                              aborted=move.aborted)
        if what is plan.Next.WAIT:
            return
        if what is plan.Next.ABORT:
            self.abort(move, f"still running after --server-timeout "
                       f"{self.options.server_timeout:g}s")
        elif what is plan.Next.CONFIRM and not move.confirm_sent:
            self.confirm(move)
        elif what is plan.Next.VERIFY:
            self.verify(move, record)
        elif what is plan.Next.CANCELLED:
            self.finish(move, plan.Outcome.TIMED_OUT, move.detail
                        + "; the server stays on " + move.step.host)
        elif what is plan.Next.RETRY:
            self.failed(move, record, now, retry=True)
        elif what is plan.Next.FAIL:
            self.failed(move, record, now, retry=False)

    def confirm(self, move: tracking.Move) -> None:
        try:
            self.client.confirm_resize(move.step.server)
        except http.Conflict:
            pass  # confirmed by someone meanwhile: the record will say
        except http.ApiError as exc:
            self.finish(move, plan.Outcome.FAILED, f"confirm: {exc}")
            return
        move.confirm_sent = True
        self.listen(tracking.Event.CONFIRMING, move, "")

    def verify(self, move: tracking.Move, record: server_moves.MigrationRecord) -> None:
        """Over by its record: success only if the server really is
        elsewhere and idle (Nova clears the task right after)."""
        server = self.client.server_state(move.step.server)
        if server is None:
            self.finish(move, plan.Outcome.FAILED, "the server was deleted")
        elif plan.succeeded(move.step.action, record.status, move.step.host,
                            server.host, server.task_state):
            self.finish(move, plan.Outcome.MOVED, destination=server.host or "")
        elif server.host == move.step.host and server.task_state is None:
            self.finish(move, plan.Outcome.FAILED, f"migration {record.status}"
                        f" but the server is still on {move.step.host}")

    def failed(self, move: tracking.Move, record: server_moves.MigrationRecord,
               now: float, retry: bool) -> None:
        server = self.client.server_state(move.step.server)
        try:
            faults = self.client.action_faults(
                move.step.server, ACTIONS[move.step.action])
        except http.ApiError as exc:
            faults = [f"no fault: {exc}"]
        why = f"migration {record.status}: " + (
            "; ".join(faults) or "no fault recorded")
        if (retry and server is not None and plan.transient(
                move.step.action, move.step.host, server.host, server.status,
                server.task_state)):
            if move.record is not None:
                move.known.add(move.record.id)
            self.retry(move, now, why)
        else:
            self.finish(move, plan.Outcome.FAILED, why)

    def abort(self, move: tracking.Move, why: str) -> None:
        assert move.record is not None
        try:
            self.client.abort_live_migration(move.step.server, move.record.id)
        except http.ApiError as exc:
            move.detail = f"{why}; abort refused: {exc.message}"
            return
        move.aborted, move.detail = True, why
        self.listen(tracking.Event.ABORTING, move, why)

    def stop(self, why: str) -> None:
        """At the deadline or on Ctrl-C: abort what this run started live,
        leave cold moves (Nova cannot abort them) and post nothing more."""
        for move in list(self.queue):
            self.queue.remove(move)
            self.finish(move, plan.Outcome.NOT_STARTED, why)
        for move in list(self.flying):
            status = move.record.status if move.record else ""
            if (move.started_here and move.step.action is plan.Action.LIVE
                    and status in plan.ABORTABLE and not move.aborted):
                self.abort(move, why)
                self.finish(move, plan.Outcome.ABORTED if move.aborted
                            else plan.Outcome.IN_FLIGHT, move.detail)
            else:
                self.finish(move, plan.Outcome.IN_FLIGHT,
                            f"{why}: migration {status or 'not seen yet'} "
                            "left to Nova")
