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

"""Event storms: W listener processes under bursts and steady rates.

Starts a private RabbitMQ broker and ``--workers`` scheduler-like
processes (``storm_process``: the real view and listener, each on its own
pool, over ``--nodes`` nodes), then publishes Ironic-shaped versioned
notifications (``NodePayload`` 1.17 with every field the view reads, by
oslo.messaging's ``messagingv2`` driver, to exchange ``ironic``, topic
``ironic_versioned_notifications``, as Ironic does: ``notifier``)
straight into the broker: a quiet phase, bursts (``--bursts``, as fast as one publisher
goes) and steady rates (``--rates`` events a second for ``--seconds``).
Each event names a different node (none of the scheduler's candidates),
so nothing coalesces while there are nodes enough. Per phase and
process it prints events applied a second, the lag from publish to
applied (median, p99, max), CPU, peak memory and the Ironic requests made;
the first process also runs the drain filters as requests would, and the
filters' time in each phase is printed beside the quiet phase's.

Run from the repository root::

    tools/bench.sh ironic_storm --nodes 50000 --workers 8

It prints figures; it asserts nothing about time. Every process it starts
is stopped by its PID at the end, also on an error or Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

from nova_drain_filters.ironic_view import priority
from tests.functional.bench import events_common
from tests.functional.bench import notifier
from tests.functional.bench import storm_process
from tests.functional.services import rabbitmq_server

MODULE = "tests.functional.bench.ironic_storm"
REPO_ROOT = Path(__file__).resolve().parents[3]
#: Run outside Nova's harness, on native threads as nova-scheduler runs (Nova
#: 34's nova/cmd/scheduler.py patches with backend='threading'): tools/bench.sh
#: sets OS_NOVA_DISABLE_EVENTLET_PATCHING=true for a module that says this.
EVENTLET = False
QUIET = 5.0


class Worker:
    """One listener process, spoken to by lines on stdin and stdout."""

    def __init__(self, transport_url: str, nodes: int, scheduler: bool,
                 ) -> None:
        # NDF_STORM_STDERR=DIR keeps each worker's stderr in DIR.
        keep = os.environ.get("NDF_STORM_STDERR")
        stderr: Any = subprocess.DEVNULL
        if keep:
            stderr = open(os.path.join(keep, f"worker-{time.time_ns()}.log"),
                          "w")
        self.stderr = stderr
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, "--child", transport_url,
             str(nodes), "1" if scheduler else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=stderr, text=True, cwd=REPO_ROOT,
            env=dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING="true"),
            # A process group of its own, to be stopped by, but the
            # caller's session: the workers of one nova-scheduler service
            # share its session (and cgroup), so the kernel shares the
            # CPUs between them, and their readers' niceness counts
            # against them all (``priority``). A session each would give
            # every listener, and so every idle listener's reader, a whole
            # autogroup's share.
            process_group=0)

    def ask(self, line: str | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"worker {self.proc.pid} exited")
        return dict(json.loads(answer))

    def stop(self) -> None:
        events_common.stop_worker(self.proc)
        if self.stderr is not subprocess.DEVNULL:
            self.stderr.close()


def run_phase(pool: list[Worker], pub: notifier.Notifier, nodes: list[str], name: str,
              count: int, rate: float | None, start: int,
              drain_timeout: float) -> dict[str, Any]:
    for worker in pool:
        worker.ask(f"phase {name}")
    if count:
        first, last = notifier.publish(pub, nodes, count, rate, start)
    else:
        first = time.time()
        time.sleep(QUIET)
        last = time.time()
    deadline = time.monotonic() + drain_timeout
    while True:
        reports = [w.ask("report") for w in pool]
        if all(r["applied"] >= count for r in reports) or (
                time.monotonic() > deadline):
            break
        time.sleep(0.5)
    return {"name": name, "count": count, "rate": rate, "first": first,
            "last": last, "reports": reports}


def show(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nEvent storm: {args.nodes:,} nodes, W={args.workers} listener "
          f"processes, one node per event, listener {args.listener}"
          + (", one reader for the host" if args.host_reader else "")
          + f", event threads at nice +{args.thread_nice} over their "
          "process's")
    servers = sorted({rep.get("server", "") for row in rows
                      for rep in row["reports"]})
    print(f"Queue read by: {', '.join(servers)}")
    print("CPU s and CPU ms/ev: the process and its reader; in-proc: the "
          "process alone (what its GIL carries); RSS: the process + reader; "
          "full GCs: the process's full garbage collections / the longest")
    print(f"{'phase':>11} {'sent/s':>7} {'W#':>3} {'applied':>8} "
          f"{'appl/s':>7} {'drain s':>8} {'lag med':>8} {'p99':>7} "
          f"{'max':>7} {'CPU s':>6} {'RSS MB':>9} {'copies':>7} "
          f"{'batches':>7} {'Ironic req':>10} {'CPU ms/ev':>9} "
          f"{'in-proc':>7} {'full GCs':>9}")
    for row in rows:
        sent = row["last"] - row["first"]
        sent_rate = row["count"] / sent if row["count"] and sent else 0
        for n, rep in enumerate(row["reports"]):
            drain = max(0.0, rep["last_applied"] - row["first"])
            rate = rep["applied"] / drain if drain else 0
            cpu = rep["cpu"] + rep.get("reader_cpu", 0.0)
            rss = f"{rep['rss_mb']:.0f}+{rep.get('reader_rss_mb', 0):.0f}"
            per_event = (f"{cpu * 1000 / rep['applied']:9.3f} "
                         f"{rep['cpu'] * 1000 / rep['applied']:7.3f}"
                         if rep["applied"] else f"{'-':>9} {'-':>7}")
            print(f"{row['name']:>11} {sent_rate:7.0f} {n:3d} "
                  f"{rep['applied']:8d} {rate:7.0f} {drain:8.2f} "
                  f"{rep['lag_median']:8.3f} {rep['lag_p99']:7.3f} "
                  f"{rep['lag_max']:7.3f} {cpu:6.1f} {rss:>9} "
                  f"{rep['copies']:7d} {rep['batches']:7d} "
                  f"{rep['requests']:10d} {per_event} "
                  f"{rep.get('full_gcs', 0):3d}/{rep.get('longest_gc', 0):.2f}s")
    quiet = rows[0]["reports"][0]["sched"]
    base = statistics.median(quiet) if quiet else 0.0
    if not base:
        return
    print(f"\nDrain filters' filter_all over {storm_process.CANDIDATES:,} "
          "candidates in process 0 (median per run, ratio to quiet):")
    for row in rows:
        runs = row["reports"][0]["sched"]
        if runs and base:
            med = statistics.median(runs)
            print(f"{row['name']:>11} {med * 1000:7.2f} ms {med / base:5.2f}x"
                  f"  p90 {events_common.percentile(runs, .9) * 1000:6.2f} ms"
                  f"  ({len(runs)} runs)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add = parser.add_argument
    add("--nodes", type=int, default=2000)
    add("--workers", type=int, default=8)
    add("--bursts", default="1000,10000")
    add("--rates", default="100,1000,5000")
    add("--seconds", type=float, default=10.0, help="per steady rate")
    add("--drain-timeout", type=float, default=120.0)
    add("--prefetch", type=int, default=0, help="[oslo_messaging_rabbit] "
        "rabbit_qos_prefetch_count in every process (0: unlimited, the "
        "default; a batch is at most this many)")
    add("--batch", default="", metavar="SIZE,TIMEOUT",
        help="the batch listener's size and timeout (listening.BATCH_SIZE "
             "and BATCH_TIMEOUT) in every process, e.g. 1000,0.05")
    add("--listener", choices=("reader", "own", "oslo"), default="reader",
        help="who consumes each pool's queue: consumer.QueueConsumer in a "
             "reader process (reader, the default) or in the listener's "
             "own (own), or oslo.messaging's batch listener (oslo)")
    add("--host-reader", action=argparse.BooleanOptionalAction,
        default=True, help="one reader for all the processes, as one "
        "host's scheduler workers ([drain_filters] "
        "baremetal_notifications_host_reader = true; the option is off "
        "by default); --no-host-reader, one reader for each")
    add("--thread-nice", type=int, default=priority.THREAD_NICE,
        help="the event threads' niceness above their process's others "
             "(priority.THREAD_NICE); 0 leaves them")
    add("--no-requests", action="store_true", help="process 0 does not "
        "run the filters either (a listener-only profile)")
    add("--profile", metavar="PREFIX", help="cProfile every thread of each "
        "process to PREFIX.<pid>.txt (not the readers' processes: profile "
        "the whole path with --listener own or oslo)")
    args = parser.parse_args(argv)
    try:
        args.bursts = [int(b) for b in args.bursts.split(",") if b]
        args.rates = [int(r) for r in args.rates.split(",") if r]
        os.environ["NDF_STORM_PREFETCH"] = str(args.prefetch)
        os.environ["NDF_STORM_LISTENER"] = args.listener
        os.environ["NDF_STORM_HOST_READER"] = "1" if args.host_reader else "0"
        os.environ["NDF_STORM_THREAD_NICE"] = str(args.thread_nice)
        if args.batch:
            size, timeout = args.batch.split(",")
            os.environ["NDF_STORM_BATCH"] = f"{int(size)},{float(timeout)}"
        if args.profile:
            os.environ["NDF_STORM_PROFILE"] = os.path.abspath(args.profile)
    except ValueError:
        parser.error("--bursts and --rates take integers, e.g. 1000,10000; "
                     "--batch an integer and a number, e.g. 1000,0.05")
    if args.nodes < 20 or args.workers < 1 or args.seconds <= 0:
        parser.error("--nodes must be at least 20, --workers and --seconds "
                     "positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return storm_process.child(argv[1], int(argv[2]), argv[3] == "1")
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, events_common.terminate)
    # A lock directory of this run's own: its processes elect among
    # themselves only (--host-reader).
    lock_path = tempfile.mkdtemp(prefix="ndf-storm-")
    os.environ["NDF_STORM_LOCK_PATH"] = lock_path
    broker = rabbitmq_server.RabbitMQServer()
    pool: list[Worker] = []
    try:
        broker.start()
        print(f"broker at {broker.transport_url} (pid {broker.pid})",
              flush=True)
        pool = [Worker(broker.transport_url, args.nodes,
                       n == 0 and not args.no_requests)
                for n in range(args.workers)]
        for worker in pool:
            worker.ask(None)  # ready: listening, listed
        print(f"{args.workers} processes listening", flush=True)
        pub = notifier.Notifier(broker.transport_url)
        # The scheduler's candidates are the first nodes: events name the
        # others, so that the filters' work is the same in every phase.
        nodes = [str(uuidlib.UUID(int=i + 1)) for i in range(
            min(storm_process.CANDIDATES, args.nodes // 2), args.nodes)]
        plan: list[tuple[str, int, float | None]] = [("quiet", 0, None)]
        plan += [(f"burst {b}", b, None) for b in args.bursts]
        plan += [(f"{r}/s", int(r * args.seconds), float(r))
                 for r in args.rates]
        rows, start = [], 0
        for name, count, rate in plan:
            rows.append(run_phase(pool, pub, nodes, name, count, rate, start,
                                  args.drain_timeout))
            start += count
            print(f"{name}: done", flush=True)
        show(rows, args)
        return 0
    except (RuntimeError, OSError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    finally:
        for worker in pool:
            worker.stop()
        broker.stop()
        shutil.rmtree(lock_path, ignore_errors=True)
        print("workers and the broker stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
