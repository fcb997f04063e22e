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

"""Event mode against polling: how fast the view learns, what Ironic pays.

Starts a private RabbitMQ broker and an all-in-one Ironic that publishes
its versioned notifications (the test services), enrolls ``--nodes`` nodes,
and measures side by side:

1. Latency, from the return of an Ironic API call (maintenance on or off)
   to the view's change: by events (``--changes`` changes, at least 50),
   and by polling every ``--poll-interval`` seconds. Polling is sampled on
   ``--poll-samples`` changes, since each takes up to a whole interval,
   and computed: a change waits for the next listing (uniform over the
   interval) and then for that listing to finish (measured).
2. Ironic API requests per minute, and Ironic's CPU seconds per minute,
   with W scheduler processes (``--workers``, default 1,8,24) watching the
   nodes, by events and by polling, over a ``--window`` of seconds while
   one node changes every ``--change-every`` seconds. Each process is a
   real one with its own view (and listener); it counts its requests.

Run from the repository root::

    tools/bench.sh ironic_events --nodes 2000

It prints figures; it asserts nothing about time. Every process it starts
is stopped by its PID at the end, also on an error or Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from oslo_config import cfg

from nova_drain_filters import ironic_view
from tests.functional.bench import events_common
from tests.functional.bench import ironic_refresh as refresh_bench
from tests.functional.bench.events_common import RECONCILE
from tests.functional.bench.events_common import configure
from tests.functional.bench.events_common import percentile
from tests.functional.bench.events_common import ready
from tests.functional.bench.events_common import requests_sent
from tests.functional.bench.events_common import wait
from tests.functional.services import rabbitmq_server

#: This module, as ``python -m`` runs it: each worker is one more run of it.
MODULE = "tests.functional.bench.ironic_events"
#: The repository root, where ``python -m`` finds ``tests``.
REPO_ROOT = Path(__file__).resolve().parents[3]
CONF = cfg.CONF
#: Run outside Nova's harness, on native threads as nova-scheduler runs (Nova
#: 34's nova/cmd/scheduler.py patches with backend='threading'): tools/bench.sh
#: sets OS_NOVA_DISABLE_EVENTLET_PATCHING=true for a module that says this, so
#: that importing tests.functional does not monkey-patch eventlet.
EVENTLET = False
TICK = 0.002


def start_view(url: str) -> ironic_view.IronicView:
    view = ironic_view.IronicView(lambda: refresh_bench.ironic_client(url))
    view.ensure_running()
    return view


# a scheduler process -------------------------------------------------------


def child(mode: str, transport_url: str, url: str, interval: int) -> int:
    """One scheduler-like process: answers 'report' lines on stdin."""
    configure(mode, transport_url, interval)
    view = start_view(url)
    wait(lambda: ready(view), 300, "first listing")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() == "report":
            events = view._events
            print(json.dumps({
                "requests": requests_sent(view), "listings": view.refreshes,
                "applied": events.applied if events else 0,
                "reread": events.reread if events else 0}), flush=True)
    view.stop(timeout=5)
    return 0


class Worker:
    def __init__(self, mode: str, transport_url: str, url: str,
                 interval: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, "--child", mode, transport_url,
             url, str(interval)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT,
            env=dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING="true"),
            start_new_session=True)

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.pid} exited")
        return dict(json.loads(line))

    def report(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("report\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        events_common.stop_worker(self.proc)


# measurements --------------------------------------------------------------


def toggle(client: Any, view: ironic_view.IronicView, node: str,
           timeout: float) -> tuple[float, float]:
    """Flip maintenance; seconds to the view's change from the API call's
    return, and from its start."""
    snap = view.trusted()
    on = not (snap is not None and snap.nodes[node].maintenance)
    called = time.monotonic()
    client.set_maintenance(node, on)
    returned = time.monotonic()
    deadline = returned + timeout
    while True:
        snap = view.trusted()
        if snap is not None and snap.nodes[node].maintenance == on:
            now = time.monotonic()
            return now - returned, now - called
        if time.monotonic() > deadline:
            raise RuntimeError(f"view did not see {node} change in "
                               f"{timeout:.0f} s")
        time.sleep(TICK)


def latency(srv: Any, url: str, transport_url: str, nodes: list[str],
            args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    client = srv.IronicTestClient(url, timeout=30)
    out: dict[str, Any] = {}
    configure("events", transport_url, args.poll_interval)
    view = start_view(url)
    try:
        wait(lambda: ready(view), 120, "event view")
        out["events"] = [toggle(client, view, rng.choice(nodes), 60)
                         for _ in range(args.changes)]
        out["events_listings"] = view.refreshes
    finally:
        view.stop(5)
    configure("polling", transport_url, args.poll_interval)
    view = start_view(url)
    try:
        wait(lambda: ready(view), 120, "polling view")
        durations = []
        for _ in range(3):
            started = time.monotonic()
            view.refresh()
            durations.append(time.monotonic() - started)
        out["listing"] = statistics.median(durations)
        out["polling"] = []
        for _ in range(args.poll_samples):
            time.sleep(rng.uniform(0, args.poll_interval))  # random phase
            out["polling"].append(toggle(client, view, rng.choice(nodes),
                                         args.poll_interval * 3))
    finally:
        view.stop(5)
        client.close()
    return out


def load(srv: Any, server: Any, transport_url: str, nodes: list[str],
         mode: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    pool = [Worker(mode, transport_url, server.url, args.poll_interval)
            for _ in range(workers)]
    client = srv.IronicTestClient(server.url, timeout=30)
    rng = random.Random(workers)
    try:
        for worker in pool:
            worker.read()  # ready: listening, first listing done
        before = [w.report() for w in pool]
        cpu = events_common.group_cpu(server.pid)
        started = time.monotonic()
        changes = 0
        while time.monotonic() - started < args.window:
            node = rng.choice(nodes)
            on = changes % 2 == 0
            client.set_maintenance(node, on)
            changes += 1
            time.sleep(args.change_every)
        elapsed = time.monotonic() - started
        cpu = events_common.group_cpu(server.pid) - cpu
        after = [w.report() for w in pool]
    finally:
        for worker in pool:
            worker.stop()
        client.close()
    sent = sum(a["requests"] - b["requests"] for a, b in zip(after, before,
                                                             strict=True))
    listings = sum(a["listings"] - b["listings"]
                   for a, b in zip(after, before, strict=True))
    delta = {key: sum(a[key] - b[key] for a, b in zip(after, before,
                                                      strict=True))
             for key in ("applied", "reread")}
    return {"mode": mode, "workers": workers, "changes": changes, **delta,
            "per_minute": sent * 60 / elapsed, "cpu": cpu * 60 / elapsed,
            "listings": listings, "elapsed": elapsed}


# report --------------------------------------------------------------------


def report(nodes: int, lat: dict[str, Any], rows: list[dict[str, Any]],
           args: argparse.Namespace, pages: int) -> None:
    listing, interval = lat["listing"], args.poll_interval
    print(f"\nLatency to the view's change ({nodes} nodes)")
    print(f"{'':30} {'median':>8} {'p95':>8} {'max':>8} {'n':>4}")
    for name, key, which in (("events, from call return", "events", 0),
                             ("events, from call start", "events", 1),
                             (f"polling {interval}s, sampled", "polling", 0)):
        vals = [v[which] for v in lat[key]]
        print(f"{name:30} {statistics.median(vals):7.3f}s "
              f"{percentile(vals, .95):7.3f}s {max(vals):7.3f}s "
              f"{len(vals):4d}")
    print(f"{f'polling {interval}s, computed':30} "
          f"{interval / 2 + listing:7.3f}s {0.95 * interval + listing:7.3f}s "
          f"{interval + listing:7.3f}s    -  (U(0,{interval}) + one listing,"
          f" {listing:.2f}s)")
    ev_start = statistics.median(v[1] for v in lat["events"])
    print(f"listings in event mode during the {len(lat['events'])} changes:"
          f" {lat['events_listings']} (start-up and catch-up only)")
    print(f"polling (computed) / events (from call start), medians: "
          f"{(interval / 2 + listing) / max(ev_start, 1e-3):.0f}x")

    print(f"\nIronic load, one change every {args.change_every}s, "
          f"{args.window:.0f}s windows ({nodes} nodes, {pages} requests per "
          "listing)")
    print(f"{'W':>3} {'mode':8} {'req/min':>9} {'listings':>9} "
          f"{'Ironic CPU s/min':>17} {'changes':>8} {'applied':>8}")
    for row in rows:
        print(f"{row['workers']:3d} {row['mode']:8} {row['per_minute']:9.1f} "
              f"{row['listings']:9d} {row['cpu']:17.1f} {row['changes']:8d} "
              f"{row['applied']:8d}")
    print(f"\nEvent mode also lists every {RECONCILE}s: " + ", ".join(
        f"{w * pages * 60 / RECONCILE:.1f}/min at W={w}" for w in args.workers)
        + "; a change costs no request when its payload carries the node"
        + " (re-reads, all processes: "
        + ", ".join(f"W={r['workers']} {r.get('reread', 0)}"
                    for r in rows if r["mode"] == "events") + ").")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add = parser.add_argument
    add("--nodes", type=int, default=2000)
    add("--changes", type=int, default=60, help="timed by events (>= 50)")
    add("--poll-interval", type=int, default=15)
    add("--poll-samples", type=int, default=8, help="timed by polling")
    add("--workers", default="1,8,24", help="process counts, e.g. 1,8,24")
    add("--window", type=float, default=60.0, help="seconds per (W, mode)")
    add("--change-every", type=float, default=1.0)
    add("--enroll-workers", type=int, default=4)
    args = parser.parse_args(argv)
    try:
        args.workers = [int(w) for w in args.workers.split(",") if w]
    except ValueError:
        parser.error("--workers takes integers, e.g. 1,8,24")
    if args.changes < 50:
        parser.error("--changes must be at least 50")
    if args.nodes < 10 or not args.workers or min(args.workers) < 1:
        parser.error("--nodes must be at least 10 and workers at least 1")
    if args.poll_samples < 1 or args.poll_interval < 1:
        parser.error("--poll-samples and --poll-interval must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2], argv[3], int(argv[4]))
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, events_common.terminate)
    srv = refresh_bench.load_ironic_server()
    broker = rabbitmq_server.RabbitMQServer()
    server = None
    try:
        broker.start()
        server = srv.IronicServer(
            ready_timeout=90.0,
            extra_config=rabbitmq_server.ironic_notification_config(
                broker.transport_url))
        server.start()
        print(f"broker at {broker.transport_url} (pid {broker.pid}), Ironic "
              f"at {server.url} (pid {server.pid})", flush=True)
        started = time.monotonic()
        nodes = refresh_bench.enroll(srv, server.url, args.nodes,
                                     args.enroll_workers, 1800)
        print(f"enrolled {len(nodes)} nodes in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        client = refresh_bench.ironic_client(server.url)
        client.list_nodes(1000)
        pages = client.requests
        lat = latency(srv, server.url, broker.transport_url, nodes, args)
        print("latency measured", flush=True)
        rows = []
        for workers in args.workers:
            for mode in ("events", "polling"):
                rows.append(load(srv, server, broker.transport_url, nodes,
                                 mode, workers, args))
                print(f"W={workers} {mode}: {rows[-1]['per_minute']:.0f} "
                      "req/min", flush=True)
        report(len(nodes), lat, rows, args, pages)
        return 0
    except (RuntimeError, srv.ServiceStartError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        broker.stop()
        print("Ironic and the broker stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
