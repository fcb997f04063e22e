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


"""A rolling run, batch by batch, against a :class:`Cloud`.

The cloud is what the run reads and changes: Nova, placement and Ironic
through the drain engine (``drain.plan_start`` and ``plan_cancel``), the
migrate engine, and the check. The ``openstack drain rolling`` command
supplies it; the tests give a fake one.

For each batch: check that its servers fit elsewhere (the later batches'
hosts avoided where possible) and refuse the batch if one has nowhere to
go; drain the batch (all marks, then the disables); move its servers; run
COMMAND on every host of the batch at once; wait for each host to come
back; put back what the run changed. A failure stops the run after the
batch: the failed host stays disabled with its drain reason, the others
of the batch are put back.
"""
import dataclasses
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Protocol

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters.rolling import hook
from nova_drain_filters.rolling import journal as journal_mod
from nova_drain_filters.rolling import schedule
from nova_drain_filters.rolling.schedule import Next
from nova_drain_filters.rolling.schedule import Outcome

#: Seconds between two looks at a running COMMAND or a host coming back.
POLL = 1.0


class Cloud(Protocol):
    """What a rolling run reads and changes."""

    def facts(self, hosts: Sequence[str]) -> dict[str, drain.HostFacts]:
        """Each host's drain facts, read afresh."""

    def has_ironic(self) -> bool:
        """Whether the cloud has Ironic (its nodes carry the mark too)."""

    def carry_out(self, steps: Sequence[drain.Step],
                  all_or_nothing: bool) -> list[str]:
        """Perform drain steps; one line per failure."""

    def check(self, hosts: Sequence[str],
              avoid: Sequence[str]) -> list[str]:
        """If ``hosts`` left now: one line per movable server with nowhere
        to go (``avoid``: hosts to use only when nothing else fits)."""

    def migrate(self, hosts: Sequence[str]) -> dict[str, str]:
        """Move every server off the drained ``hosts``; why each host
        that is not left empty is not."""


@dataclasses.dataclass(frozen=True)
class Options:
    command: str
    reason: str
    hook_timeout: float
    wait_up: float


@dataclasses.dataclass
class HostResult:
    """One host's row of the final table."""

    host: str
    batch: int
    outcome: Outcome
    step: str = ""
    detail: str = ""
    log: str = ""


#: Takes one line of progress (a host's step).
Report = Callable[[str], None]


class Runner:
    """Runs the batches; the journal makes a second run resume the first."""

    def __init__(self, cloud: Cloud, journal: journal_mod.Journal,
                 options: Options, report: Report,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cloud, self.journal, self.options = cloud, journal, options
        self.report = report
        self.clock, self.sleep = clock, sleep
        self.results: dict[str, HostResult] = {}

    def run(self, batches: Sequence[Sequence[str]]) -> list[HostResult]:
        """Every batch in turn until one fails; a row per host."""
        for number, batch in enumerate(batches, 1):
            later = [h for b in batches[number:] for h in b]
            if not self.run_batch(number, list(batch), later):
                for rest, hosts in enumerate(batches[number:], number + 1):
                    for host in hosts:
                        self.results[host] = HostResult(
                            host, rest, Outcome.NOT_REACHED,
                            detail="the run stopped at an earlier batch")
                break
        return [self.results[h] for b in batches for h in b]

    # one batch --------------------------------------------------------------

    def run_batch(self, number: int, batch: list[str],
                  later: list[str]) -> bool:
        """One batch; False if it failed (the run stops)."""
        progress = self.journal.progress()
        facts = self.cloud.facts(batch)
        steps = {h: schedule.next_step(
            progress.get(h, schedule.Progress()), facts[h]) for h in batch}
        ok = True
        for host in batch:
            if steps[host] is Next.FOREIGN:
                service = facts[host].service
                why = service.disabled_reason if service else None
                self._result(host, number, Outcome.SKIPPED, "",
                             f"disabled by someone else "
                             f"({why or 'no reason'}): never touched")
                ok = False
            elif steps[host] is Next.NOTHING:
                self._result(host, number, Outcome.DONE, "",
                             "finished by an earlier run")
        empty = [h for h in batch if steps[h] in (Next.DRAIN, Next.COMMAND)]
        if empty and not self._drain(number, empty, later, facts, progress):
            return False
        ready = [h for h in empty if h not in self.results]
        waiting = {h: hook.Started(**progress[h].started)  # type: ignore
                   for h in batch if steps[h] is Next.WAIT_COMMAND}
        succeeded = self._commands(number, ready, waiting)
        succeeded += [h for h in batch if steps[h] is Next.WAIT_UP]
        came_back = self._wait_up(number, succeeded)
        self._put_back(number, came_back, progress)
        return ok and all(
            self.results[h].outcome in (Outcome.DONE, Outcome.SKIPPED)
            for h in batch)

    def _drain(self, number: int, hosts: list[str], later: list[str],
               facts: dict[str, drain.HostFacts],
               progress: dict[str, schedule.Progress]) -> bool:
        """Check, mark and disable, move the servers; False to stop."""
        self.report(f"batch {number}: check {', '.join(hosts)}")
        nowhere = self.cloud.check(hosts, later)
        if nowhere:
            for host in hosts:
                self._result(host, number, Outcome.REFUSED, "check",
                             "; ".join(nowhere))
            return False
        plan = drain.plan_start([facts[h] for h in hosts],
                                self.options.reason, self.cloud.has_ironic())
        if plan.refusals:
            for refusal in plan.refusals:
                self._result(refusal.host, number, Outcome.FAILED, "start",
                             refusal.why)
            return False
        changing = {s.host for s in plan.steps}
        for host in hosts:
            if progress.get(host, schedule.Progress()).changed is None:
                # Before the change: a run cut off right after it still
                # knows the host is its own to put back.
                self.journal.record(host, journal_mod.CHANGED,
                                    changed=host in changing)
        if plan.steps:
            self.report(f"batch {number}: start {', '.join(sorted(changing))}"
                        f" (mark, then disable)")
            failures = self.cloud.carry_out(plan.steps, all_or_nothing=True)
            if failures:
                for host in hosts:
                    self._result(host, number, Outcome.FAILED, "start",
                                 "; ".join(failures))
                return False
        self.report(f"batch {number}: migrate the servers of "
                    f"{', '.join(hosts)}")
        for host, why in self.cloud.migrate(hosts).items():
            self._result(host, number, Outcome.FAILED, "migrate", why)
        return True

    def _commands(self, number: int, hosts: list[str],
                  waiting: dict[str, hook.Started]) -> list[str]:
        """Run COMMAND on ``hosts`` and wait for those ``waiting`` (started
        by an earlier run); the hosts whose COMMAND succeeded."""
        running = dict(waiting)
        for host in waiting:
            self.report(f"batch {number}: {host}: COMMAND started by an "
                        "earlier run: waiting for it")
        for host in hosts:
            running[host] = self._start(number, host)
        succeeded = []
        while running:
            for host, started in list(running.items()):
                try:
                    status = hook.status(started)
                except hook.Interrupted as exc:
                    self.report(f"batch {number}: {host}: {exc}: running "
                                "COMMAND again")
                    self.journal.record(host, journal_mod.ENDED, status=-1,
                                        interrupted=True)
                    running[host] = self._start(number, host)
                    continue
                if status is None:
                    continue
                del running[host]
                self.journal.record(host, journal_mod.ENDED, status=status)
                if status == 0:
                    self.report(f"batch {number}: {host}: COMMAND succeeded")
                    succeeded.append(host)
                    continue
                why = ("timed out after "
                       f"{self.options.hook_timeout:g} s"
                       if status == hook.TIMED_OUT else
                       f"exited with {status}")
                self.report(f"batch {number}: {host}: COMMAND {why}")
                self._result(host, number, Outcome.FAILED, "command",
                             f"COMMAND {why}: {hook.tail(started.log)}",
                             started.log)
            if running:
                self.sleep(POLL)
        return succeeded

    def _start(self, number: int, host: str) -> hook.Started:
        command = schedule.command_for(self.options.command, host)
        started = hook.start(command, host, self.journal.directory,
                             self.options.hook_timeout)
        self.journal.record(host, journal_mod.STARTED,
                            **dataclasses.asdict(started))
        self.report(f"batch {number}: {host}: COMMAND started "
                    f"(log {started.log})")
        return started

    def _wait_up(self, number: int, hosts: list[str]) -> list[str]:
        """Wait until each host's nova-compute reports up again, after its
        COMMAND ended, and its providers are in placement."""
        if not hosts:
            return []
        self.report(f"batch {number}: wait until {', '.join(hosts)} "
                    f"come back (at most {self.options.wait_up:g} s)")
        before = {h: _seen(f.service)
                  for h, f in self.cloud.facts(hosts).items()}
        deadline = self.clock() + self.options.wait_up
        pending, back = list(hosts), []
        while pending:
            found = self.cloud.facts(pending)
            for host in list(pending):
                if _back(found[host], before[host]):
                    pending.remove(host)
                    back.append(host)
                    self.journal.record(host, journal_mod.UP)
                    self.report(f"batch {number}: {host}: back")
            if not pending:
                break
            if self.clock() >= deadline:
                for host in pending:
                    self._result(host, number, Outcome.FAILED, "wait up",
                                 "its nova-compute did not report up with "
                                 "its providers in placement within "
                                 f"{self.options.wait_up:g} s")
                break
            self.sleep(POLL)
        return back

    def _put_back(self, number: int, hosts: list[str],
                  progress: dict[str, schedule.Progress]) -> None:
        """Enable and unmark what this run drained; leave the rest."""
        latest = self.journal.progress()
        ours = [h for h in hosts if latest.get(h, schedule.Progress()).changed]
        plan = drain.plan_cancel(list(self.cloud.facts(ours).values()),
                                 self.cloud.has_ironic()) if ours else None
        failures = self.cloud.carry_out(plan.steps, all_or_nothing=False
                                        ) if plan and plan.steps else []
        if ours:
            self.report(f"batch {number}: put back {', '.join(ours)}")
        for host in hosts:
            mine = [f for f in failures if f.startswith(f"{host}:")]
            if mine:
                self._result(host, number, Outcome.FAILED, "put back",
                             "; ".join(mine))
                continue
            self.journal.record(host, journal_mod.FINISHED)
            self._result(host, number, Outcome.DONE, "", "" if host in ours
                         else "left draining: it was drained before this "
                              "run")

    def _result(self, host: str, number: int, outcome: Outcome, step: str,
                detail: str, log: str = "") -> None:
        if host in self.results and self.results[host].outcome in (
                Outcome.FAILED, Outcome.REFUSED, Outcome.SKIPPED):
            return  # the first failure is the one to read
        self.results[host] = HostResult(host, number, outcome, step,
                                        drain.tail(detail, 400), log)


def _seen(service: decisions.ServiceFacts | None) -> object:
    return None if service is None else service.last_seen_up


def _back(facts: drain.HostFacts, before: object) -> bool:
    """Up by Nova's rules, a report newer than the one seen when COMMAND
    ended, and a provider in placement for every compute node."""
    service = facts.service
    return (service is not None and service.is_up
            and service.last_seen_up is not None
            and service.last_seen_up != before
            and bool(facts.nodes) and all(n.provider for n in facts.nodes))
