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

"""The scheduler's select_destinations during an event burst, against quiet.

The scheduler of ``select_destinations`` (Nova's harness, ``--nodes``
Ironic-like compute nodes, the drain filters, Nova's default filters and
the pre-filter), on native threads as Nova 34's nova-scheduler runs, with
its Ironic view in event mode: the real listener (our consumer of its
pool's queue) on a private RabbitMQ, over a snapshot of
``--snapshot-nodes`` nodes (Nova's nodes first, then nodes no request
can land on, which the events name, so that every call's filter work is
the same). ``--workers`` - 1 more
listener processes (``ironic_storm``'s) share the broker and the machine,
as the other scheduler workers of one host would.

In ``--repeat`` rounds, the order alternating, it times ``--quiet``
calls with the listener idle, and calls for as long as a burst of
``--burst`` events (``notifier``'s, built ahead in a separate process,
then published as fast as it goes) is still being applied. It prints the
median and the mean call of each, their ratios (issue 22's goal: at most
1.10), the garbage collection per call (Nova's full collections fall in
about every other call, so medians of a few calls compare chances), and
each call's time split into its thread's CPU, its wait for a CPU
(schedstat: the machine's share) and the rest (the GIL, or threads it
handed work to). With ``--control``, each round also times a quiet
run's calls beside ``busy_core``, a stand-in that keeps the other core
busy with the publisher's kind of work and applies no event: the ratios
of quiet to it and of it to a burst tell the busy core's share of a
burst's slowdown from the events'. It prints
each burst's drain time (goal: 10,000 events within 10 s), then where
the CPU went during the bursts: the calls' own thread, the scheduler
process's other threads (the busiest, by name and what they run), its
reader, the other
listener processes, the host's reader when one of them runs it (with
``--host-reader``), the broker and the publisher (from /proc and the
publisher's rusage). The broker and the publisher run at the lowest
priority, nice 19 in an autogroup at nice 19 (``priority``), as if on
other machines; ``--listener own`` keeps the consumer in the
listening processes, and ``--reader-nice`` sets the readers'.

Run from the repository root::

    tools/bench.sh select_burst [--nodes 1000] [--snapshot-nodes 50000] \\
        [--burst 10000] [--workers 1] [--repeat 3] [--listener reader|own] \\
        [--control]

It prints figures and asserts nothing about time; exit 1 if the harness
failed, a burst was not applied within ``--drain-timeout`` or a call found
no host. Every process it starts is stopped by its PID at the end.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import priority as view_priority
from nova_drain_filters.ironic_view import reader as reader_module
from tests.functional import harness_run
from tests.functional.bench import busy_core
from tests.functional.bench import events_common
from tests.functional.bench import filters as bench_filters
from tests.functional.bench import ironic_storm
from tests.functional.bench import notifier
from tests.functional.bench import select_destinations as sd
from tests.functional.services import priority
from tests.functional.services import rabbitmq_server

#: Native threads, as Nova 34's nova/cmd/scheduler.py starts the scheduler
#: (tools/bench.sh sets OS_NOVA_DISABLE_EVENTLET_PATCHING=true).
EVENTLET = False


@dataclasses.dataclass
class Calls:
    """One phase's calls, per call: its seconds, those its thread waited
    for a CPU (run queue), its own thread's CPU, and the process's garbage
    collection meanwhile (seconds in any thread, in the calls' own, and
    full collections; every thread waits while one collects)."""

    name: str
    times: list[float] = dataclasses.field(default_factory=list)
    waits: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)
    gc: list[tuple[float, float, int]] = dataclasses.field(
        default_factory=list)


@dataclasses.dataclass
class BurstRun(sd.Run):
    snapshot_nodes: int = 50000
    burst: int = 10000
    quiet_calls: int = 5
    drain_timeout: float = 300.0
    transport_url: str = ""
    quiet: Calls = dataclasses.field(default_factory=lambda: Calls("quiet"))
    during: Calls = dataclasses.field(
        default_factory=lambda: Calls("during burst"))
    #: ``--control``: calls beside a busy core (``busy_core``), no events,
    #: and that process's CPUs in each such phase.
    control: bool = False
    #: ``--host-reader``: the listening processes share one reader, which
    #: needs one lock directory for all of them.
    host_reader: bool = False
    lock_path: str = ""
    #: How the scheduler's own listener reads (its pool, its reader).
    listening: str = ""
    busy: Calls = dataclasses.field(
        default_factory=lambda: Calls("beside busy"))
    busy_load: list[float] = dataclasses.field(default_factory=list)
    #: Per burst: seconds from the first event received to the last
    #: applied (or to the drain timeout), the calls made meanwhile and the
    #: events applied.
    drains: list[tuple[float, int, int]] = dataclasses.field(
        default_factory=list)
    #: After the warm-up call: the objects the collector tracks in its
    #: oldest generation, how many of them are nodes' facts, and the
    #: seconds one full collection then took (``heap``).
    heap: tuple[int, int, float] = (0, 0, 0.0)
    #: Per burst, CPU seconds by part (``CPU_PARTS``), and its wall time.
    cpu: list[tuple[dict[str, float], float]] = dataclasses.field(
        default_factory=list)
    #: Per burst, the CPU seconds of the scheduler's threads by name.
    threads: list[dict[str, float]] = dataclasses.field(default_factory=list)
    #: The other listener processes and the broker.
    other_pids: list[int] = dataclasses.field(default_factory=list)
    broker_pid: int = 0
    #: What priority.lowest did for the broker.
    broker_priority: str = ""


#: Where a burst's CPU went, in the order they are printed.
CPU_PARTS = ("calls' thread", "scheduler's other threads",
             "scheduler's reader", "other listeners", "their reader",
             "broker", "publisher")


class Collections:
    """The process's garbage collections so far: seconds, those in the
    calls' (main) thread, and full ones (``gc.callbacks``, which run in
    the collecting thread, under the GIL)."""

    def __init__(self) -> None:
        self.seconds = self.in_main = 0.0
        self.full = 0
        self._started = 0.0
        self._main = threading.main_thread().ident
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.seconds += took
        if threading.get_ident() == self._main:
            self.in_main += took
        self.full += info["generation"] == 2

    def now(self) -> tuple[float, float, int]:
        return self.seconds, self.in_main, self.full


def heap() -> tuple[int, int, float]:
    """What a full collection walks now: the objects tracked in the oldest
    generation after one, how many are ``IronicNodeFacts``, and its
    seconds."""
    started = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - started
    oldest = gc.get_objects(generation=2)
    facts = sum(1 for o in oldest if type(o) is decisions.IronicNodeFacts)
    return len(oldest), facts, took


def label(thread: threading.Thread) -> str:
    """A thread's name and what it runs: its target, or its class."""
    target = getattr(thread, "_target", None)
    runs = target if target is not None else type(thread)
    where = getattr(runs, "__module__", None) or ""
    what = getattr(runs, "__qualname__", None) or repr(runs)
    if runs is threading.Thread:
        return thread.name
    return f"{thread.name} ({where}.{what})"


def threads_cpu() -> dict[str, float]:
    """CPU so far of each of this process's threads but the main one, by
    name and what it runs (``label``; a label several share is summed)."""
    main = threading.main_thread()
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread is not main and thread.native_id is not None:
            name = label(thread)
            found[name] = found.get(name, 0.0) + (
                events_common.cpu_of(
                    f"/proc/self/task/{thread.native_id}/stat"))
    return found


def cpu_now(run: BurstRun, reader: int | None) -> dict[str, float]:
    """CPU so far of each part but the publisher (``CPU_PARTS``)."""
    main = threading.main_thread().native_id
    calls = events_common.cpu_of(f"/proc/self/task/{main}/stat")
    their_reader = events_common.group_cpu(
        *run.other_pids, command=reader_module.ENTRY)
    return {CPU_PARTS[0]: calls,
            CPU_PARTS[1]: events_common.cpu_of("/proc/self/stat") - calls,
            CPU_PARTS[2]: (events_common.cpu_of(f"/proc/{reader}/stat")
                           if reader else 0.0),
            # Each in a session of its own, with its reader: the host's
            # reader, when one of them runs it, apart.
            CPU_PARTS[3]: (events_common.group_cpu(*run.other_pids)
                           - their_reader),
            CPU_PARTS[4]: their_reader,
            CPU_PARTS[5]: events_common.group_cpu(run.broker_pid)}


class BenchSelectBurst(sd.BenchSelectDestinations):
    results: BurstRun
    collections: Collections

    def listed(self, facts: list[decisions.IronicNodeFacts]
               ) -> list[decisions.IronicNodeFacts]:
        more = bench_filters.make_nodes(self.results.snapshot_nodes, 0.0)
        return facts + more[len(facts):]

    def start_view(self, view: ironic_view.IronicView) -> None:
        run = self.results
        for key, value in (
                ("baremetal_notifications", True),
                ("baremetal_notifications_url", run.transport_url),
                ("baremetal_refresh_interval", events_common.RECONCILE),
                ("baremetal_max_snapshot_age", 2 * events_common.RECONCILE),
                ("baremetal_notifications_host_reader", run.host_reader)):
            self.flags(**{key: value}, group="drain_filters")
        if run.lock_path:
            # The other listeners' (their NDF_STORM_LOCK_PATH): one host.
            self.flags(lock_path=run.lock_path, group="oslo_concurrency")
        view.ensure_running()
        events_common.wait(lambda: events_common.ready(view), 300,
                           "listening")
        self.view = view
        server = getattr(view._events, "_server", None)
        run.listening = (f"pool {getattr(server, 'pool', '?')}, "
                         + ("following the host's reader"
                            if getattr(server, "following", False)
                            else "its own reader"))

    def timed(self, ctxt: Any, spec: Any, calls: Calls) -> None:
        """One call: its seconds, those it waited for a CPU, its own
        thread's CPU and the process's garbage collection meanwhile.

        Nova's own objects fill the collector's oldest generation within a
        call or two, and a full collection over this harness's heap takes
        about 0.3 s: some calls pay one and some do not, in both phases.
        The medians then compare chances, so the means are printed too,
        and the collections apart.
        """
        tid = threading.get_native_id()
        waited, used = events_common.run_queue_wait(tid), time.thread_time()
        collected, mine, full = self.collections.now()
        calls.times.append(self.call(ctxt, spec, "drain"))
        calls.cpu.append(time.thread_time() - used)
        calls.waits.append(events_common.run_queue_wait(tid) - waited)
        seconds, in_main, fulls = self.collections.now()
        calls.gc.append((seconds - collected, in_main - mine, fulls - full))

    def quiet(self, ctxt: Any, spec: Any) -> None:
        for _ in range(self.results.quiet_calls):
            self.timed(ctxt, spec, self.results.quiet)

    def beside_busy(self, ctxt: Any, spec: Any) -> None:
        """As many calls as a quiet run, beside ``busy_core``; no events."""
        run = self.results
        busy = subprocess.Popen(
            [sys.executable, "-m", busy_core.__name__],
            start_new_session=True, stdout=subprocess.DEVNULL)
        stat = f"/proc/{busy.pid}/stat"
        try:
            # Past its imports, and niced: it is spinning.
            events_common.wait(lambda: events_common.cpu_of(stat) > 0.3,
                               60, "the busy core's stand-in")
            cpu_before, wall_before = (events_common.cpu_of(stat),
                                       time.monotonic())
            for _ in range(run.quiet_calls):
                self.timed(ctxt, spec, run.busy)
            run.busy_load.append((events_common.cpu_of(stat) - cpu_before)
                                 / (time.monotonic() - wall_before))
        finally:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait(10)

    def burst(self, ctxt: Any, spec: Any, start: int) -> None:
        run = self.results
        events = self.view._events
        assert events is not None
        before_received, target = events.received, events.applied + run.burst
        reader = events_common.reader_pid(self.view)
        threads_before = threads_cpu()
        cpu_before, wall_before = cpu_now(run, reader), time.monotonic()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        publisher = subprocess.Popen(
            [sys.executable, "-m", notifier.__name__, run.transport_url,
             str(run.nodes), str(run.snapshot_nodes), str(start),
             str(run.burst)], start_new_session=True,
            stdout=subprocess.DEVNULL)
        try:
            events_common.wait(lambda: events.received > before_received,
                               120, "the burst's first event")
            first = time.monotonic()
            deadline = first + run.drain_timeout
            calls = 0
            while events.applied < target:
                if time.monotonic() > deadline:
                    run.problems.append(
                        f"burst: {target - events.applied} events not "
                        f"applied within {run.drain_timeout:.0f} s")
                    break
                self.timed(ctxt, spec, run.during)
                calls += 1
            run.drains.append((time.monotonic() - first, calls,
                               run.burst - max(0, target - events.applied)))
            cpu_after = cpu_now(run, reader)
            run.threads.append({
                name: seconds - threads_before.get(name, 0.0)
                for name, seconds in threads_cpu().items()})
            wall = time.monotonic() - wall_before
            publisher.wait(60)
            # The only child reaped meanwhile: the publisher.
            reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = {part: cpu_after[part] - cpu_before[part]
                    for part in cpu_after}
            used[CPU_PARTS[6]] = (reaped.ru_utime + reaped.ru_stime
                                  - children.ru_utime - children.ru_stime)
            run.cpu.append((used, wall))
        finally:
            if publisher.poll() is None:
                os.killpg(publisher.pid, signal.SIGKILL)
                publisher.wait(10)

    def test_measure(self) -> None:
        run = self.results
        ctxt, spec = self.prepare()
        self.collections = Collections()
        self.call(ctxt, spec, "drain")  # warms caches up
        run.heap = heap()
        for round_ in range(run.repeat):
            start = round_ * run.burst
            phases = ["quiet", "busy", "burst"] if run.control else [
                "quiet", "burst"]
            for phase in (reversed(phases) if round_ % 2 else phases):
                if phase == "quiet":
                    self.quiet(ctxt, spec)
                elif phase == "busy":
                    self.beside_busy(ctxt, spec)
                else:
                    self.burst(ctxt, spec, start)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add = parser.add_argument
    add("--nodes", type=int, default=1000)
    add("--snapshot-nodes", type=int, default=50000)
    add("--burst", type=int, default=10000)
    add("--workers", type=int, default=1,
        help="listener processes on the broker, the scheduler's included")
    add("--repeat", type=int, default=3, help="bursts (and quiet runs)")
    add("--quiet", type=int, default=5, help="calls per quiet run")
    add("--drain-timeout", type=float, default=300.0)
    add("--listener", choices=("reader", "own"), default="reader",
        help="our consumer in a reader process (the default) or in the "
             "listening process itself, in every listener process")
    add("--reader-nice", type=int, default=view_priority.READER_NICE,
        help="the readers' niceness (priority.READER_NICE)")
    add("--thread-nice", type=int, default=view_priority.THREAD_NICE,
        help="the listening processes' event threads' niceness above "
             "their others' (priority.THREAD_NICE); 0 leaves them")
    add("--host-reader", action=argparse.BooleanOptionalAction,
        default=True,
        help="one reader for all the listening processes, the "
             "scheduler's a follower: the others start first ([drain_filters] "
             "baremetal_notifications_host_reader = true; the option is "
             "off by default); --no-host-reader, one reader for each")
    add("--control", action="store_true",
        help="also time quiet runs' calls beside a busy core "
             "(busy_core), to tell its share from the events'")
    args = parser.parse_args(argv)
    if args.snapshot_nodes < 2 * args.nodes or args.burst < 1 or (
            args.workers < 1 or args.repeat < 1 or args.quiet < 1):
        parser.error("--snapshot-nodes must be at least twice --nodes; "
                     "--burst, --workers, --repeat, --quiet positive")
    signal.signal(signal.SIGTERM, events_common.terminate)
    os.environ.setdefault("OS_TEST_TIMEOUT", "7200")
    listening.READER_PROCESS = args.listener == "reader"
    view_priority.READER_NICE = args.reader_nice
    view_priority.THREAD_NICE = args.thread_nice
    # The other listener processes (storm_process.tune_transport).
    os.environ["NDF_STORM_LISTENER"] = args.listener
    os.environ["NDF_STORM_READER_NICE"] = str(args.reader_nice)
    os.environ["NDF_STORM_THREAD_NICE"] = str(args.thread_nice)
    os.environ["NDF_STORM_HOST_READER"] = "1" if args.host_reader else "0"
    lock_path = tempfile.mkdtemp(prefix="ndf-select-burst-")
    # One host's processes: the harness's [DEFAULT] host is its last
    # compute's (Nova's _start_compute sets it), and its lock_path is set
    # to this one (start_view).
    os.environ["NDF_STORM_LOCK_PATH"] = lock_path
    os.environ["NDF_STORM_HOST"] = BenchSelectBurst.HOSTS[-1]
    broker = rabbitmq_server.RabbitMQServer()
    others: list[ironic_storm.Worker] = []
    run = BurstRun(args.nodes, 0, snapshot_nodes=args.snapshot_nodes,
                   burst=args.burst, quiet_calls=args.quiet,
                   drain_timeout=args.drain_timeout)
    run.repeat = args.repeat
    run.control = args.control
    run.host_reader = args.host_reader
    run.lock_path = lock_path
    try:
        broker.start()
        run.transport_url = broker.transport_url
        run.broker_pid = broker.pid
        # Its session: the wrapper and beam.smp with all threads.
        run.broker_priority = priority.lowest(broker.pid)
        others = [ironic_storm.Worker(broker.transport_url,
                                      args.snapshot_nodes, False)
                  for _ in range(args.workers - 1)]
        for worker in others:
            worker.ask(None)  # listening, listed
        run.other_pids = [worker.proc.pid for worker in others]
        case = BenchSelectBurst("test_measure")
        case.results = run
        error = harness_run.run_quietly(
            case, lambda: run.stdlog.logger.output if run.stdlog else "")
    finally:
        for worker in others:
            worker.stop()
        broker.stop()
        shutil.rmtree(lock_path, ignore_errors=True)
    if error:
        print(f"harness failed: {error}", file=sys.stderr)
        return 1
    print(f"select_destinations at {args.nodes:,} compute nodes, drain "
          f"filters + Nova's + pre-filter, native threads; view in event "
          f"mode over {args.snapshot_nodes:,} nodes; W={args.workers} "
          f"listener processes; {args.repeat} bursts of {args.burst:,}, "
          f"interleaved with quiet runs of {args.quiet} calls; consumer "
          + ("in a reader process at nice "
             f"+{args.reader_nice}" + (", one for the host"
                                        if args.host_reader else "")
             if args.listener == "reader"
             else "in the listening process") + "; event threads at nice "
          f"+{args.thread_nice} over their process's; broker and publisher "
          f"at the lowest priority (the broker: {run.broker_priority}); "
          f"the scheduler's listener: {run.listening}")
    tracked, facts, took = run.heap
    print(f"Heap after the first call: {tracked:,} objects tracked in the "
          f"oldest generation, {facts:,} of them nodes' facts; one full "
          f"collection took {took * 1000:.0f} ms")
    phases = [run.quiet] + ([run.busy] if run.busy.times else []) + [
        run.during]
    quiet = statistics.median(run.quiet.times)
    quiet_mean = statistics.mean(run.quiet.times)
    print(f"{'':<14} {'calls':>5} {'median':>9} {'p90':>9} {'ratio':>6} "
          f"{'mean':>9} {'ratio':>6}")
    for phase in phases:
        values = phase.times
        med = statistics.median(values) if values else float("nan")
        p90 = events_common.percentile(values, .9) if values else 0.0
        mean = statistics.mean(values) if values else float("nan")
        print(f"{phase.name:<14} {len(values):>5} {med * 1000:>7.0f}ms "
              f"{p90 * 1000:>7.0f}ms {med / quiet:>6.3f} "
              f"{mean * 1000:>7.0f}ms {mean / quiet_mean:>6.3f}")
    print("goal: ratio <= 1.10")
    # The calls come in two sizes (a full collection or not), so a few
    # calls' ratio moves by chance alone: by how much, here.
    compared = [("burst / quiet", run.quiet, run.during)]
    if run.busy.times:
        compared += [("beside busy / quiet", run.quiet, run.busy),
                     ("burst / beside busy", run.busy, run.during)]
    print("95% bootstrap intervals of the ratios, median and mean:")
    for name, base, other in compared:
        if len(base.times) > 1 and len(other.times) > 1:
            low, high = events_common.ratio_interval(base.times, other.times)
            mlow, mhigh = events_common.ratio_interval(
                base.times, other.times, statistics.mean)
            median = (statistics.median(other.times)
                      / statistics.median(base.times))
            mean = statistics.mean(other.times) / statistics.mean(base.times)
            print(f"  {name:<20} {median:.3f} ({low:.3f} to {high:.3f}), "
                  f"{mean:.3f} ({mlow:.3f} to {mhigh:.3f})")
    if run.busy_load:
        print(f"  the busy core's stand-in took "
              f"{statistics.median(run.busy_load):.2f} CPUs (median)")
    print("Garbage collection per call (mean), all threads / the calls' own,"
          " and full collections per call:")
    for phase in phases:
        collected = phase.gc
        if collected:
            print(f"  {phase.name:<14} "
                  f"{statistics.mean(c for c, _, _ in collected) * 1000:5.0f}ms"
                  f" / {statistics.mean(m for _, m, _ in collected) * 1000:4.0f}"
                  f"ms  {sum(f for _, _, f in collected) / len(collected):.2f}")
    # Like with like: the calls during which no thread ran a full
    # collection, the larger of the two sizes calls come in.
    calm = {phase.name: [t for t, (_, _, full) in zip(
        phase.times, phase.gc, strict=True) if not full]
        for phase in phases}
    if all(calm.values()):
        base = statistics.median(calm[run.quiet.name])
        print("  calls with no full collection: " + ", ".join(
            f"{len(times)} {name}" for name, times in calm.items())
            + "; median " + " / ".join(
                f"{statistics.median(times) * 1000:.0f}"
                for times in calm.values()) + " ms, ratio to quiet "
            + " / ".join(f"{statistics.median(times) / base:.3f}"
                         for times in calm.values()))
    # A call's time: its own thread's CPU, the time that thread waited
    # for a CPU (the machine's share: a host with cores to spare has none)
    # and the rest, waiting for the GIL (or for threads it handed work to).
    # Garbage collection is in the first (in the calls' thread) or the last.
    print("Where a call's time went (medians):")
    print(f"{'':<14} {'own CPU':>8} {'CPU wait':>9} {'the rest':>9} "
          f"{'less CPU wait':>14} {'ratio':>6}")
    less_quiet = statistics.median(t - w for t, w in zip(
        run.quiet.times, run.quiet.waits, strict=True))
    for phase in phases:
        if not phase.times:
            continue
        less = statistics.median(
            t - w for t, w in zip(phase.times, phase.waits, strict=True))
        rest = statistics.median(t - w - c for t, w, c in zip(
            phase.times, phase.waits, phase.cpu, strict=True))
        print(f"{phase.name:<14} {statistics.median(phase.cpu) * 1000:>6.0f}ms "
              f"{statistics.median(phase.waits) * 1000:>7.0f}ms "
              f"{rest * 1000:>7.0f}ms {less * 1000:>12.0f}ms "
              f"{less / less_quiet:>6.3f}")
    for n, (seconds, calls, applied) in enumerate(run.drains):
        print(f"burst {n}: {applied:,} of {args.burst:,} events applied in "
              f"{seconds:.1f} s ({applied / seconds:.0f}/s), {calls} calls "
              "meanwhile")
    if run.cpu:
        wall = statistics.median(w for _, w in run.cpu)
        print(f"CPU during a burst (median of {len(run.cpu)}; the publisher "
              f"includes its start-up), over {wall:.1f} s of wall time on "
              f"{os.cpu_count()} CPUs:")
        total = 0.0
        for part in CPU_PARTS:
            seconds = statistics.median(used[part] for used, _ in run.cpu)
            total += seconds
            print(f"  {part:<26} {seconds:6.2f} s  {seconds / wall:5.2f} CPUs")
        print(f"  {'all':<26} {total:6.2f} s  {total / wall:5.2f} CPUs")
        names = {name for used in run.threads for name in used}
        busiest = sorted(((statistics.median(
            used.get(name, 0.0) for used in run.threads), name)
            for name in names), reverse=True)[:5]
        print("The scheduler's other threads, the busiest (median seconds):")
        for seconds, name in busiest:
            print(f"  {seconds:5.2f} s  {name}")
    for problem in sorted(set(run.problems)):
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
