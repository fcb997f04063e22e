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

"""One scheduler-like process of the storm benchmark (``ironic_storm``).

It runs the view and its event listener as a scheduler worker does
(``IronicView.ensure_running`` in event mode, the real oslo.messaging
listener on its own pool), over an in-memory listing of ``nodes`` nodes
(``bench.filters.Listing``: enrolling 50,000 nodes in the test Ironic is
not practical; the listing is made once, at start-up). Each event's
``maintenance_reason`` carries its publish time, so the lag from publish
to applied is read off every batch the view applies. Optionally a
"scheduler" thread runs the three drain filters' ``filter_all`` over
1,000 candidates (``max_placement_results``' default) every
``SCHED_EVERY`` seconds, as requests would. It answers ``phase NAME`` and
``report`` lines on stdin with one JSON line each.
"""
from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import resource
import sys
import threading
import time
import uuid as uuidlib
from typing import Any

from nova import objects
from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_messaging._drivers import impl_rabbit

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import FILTER_CLASSES
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import priority
from tests.functional.bench import events_common
from tests.functional.bench import filters as filters_bench
from tests.functional.bench import notifier

CONF = cfg.CONF
#: Seconds between two scheduler runs of the filters (five requests a
#: second in one process: a busy scheduler, leaving the listener room).
SCHED_EVERY = 0.2
#: Candidates per request: Nova's ``max_placement_results`` default.
CANDIDATES = 1000
STAMP = notifier.STAMP


class Phase:
    """What one process saw in one phase of the benchmark."""

    def __init__(self, name: str, reader_pid: int | None = None) -> None:
        self.name = name
        self.lags: list[float] = []
        self.last_applied = 0.0
        self.sched: list[float] = []
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu = usage.ru_utime + usage.ru_stime
        #: The view's reader process, if it reads in one, and its CPU.
        self.reader_pid = reader_pid
        self.reader_cpu = self.reader_cpu_now()
        #: The process's full garbage collections in the phase, and the
        #: longest (every thread waits meanwhile).
        self.full_gcs = 0
        self.longest_gc = 0.0

    def reader_cpu_now(self) -> float:
        return (events_common.cpu_of(f"/proc/{self.reader_pid}/stat")
                if self.reader_pid else 0.0)

    def summary(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        lags = self.lags
        return {
            "phase": self.name, "applied": len(lags),
            "last_applied": self.last_applied,
            "lag_median": events_common.percentile(lags, .5) if lags else 0,
            "lag_p99": events_common.percentile(lags, .99) if lags else 0,
            "lag_max": max(lags) if lags else 0,
            "cpu": usage.ru_utime + usage.ru_stime - self.cpu,
            "reader_cpu": self.reader_cpu_now() - self.reader_cpu,
            "reader_rss_mb": (events_common.peak_rss_mb(self.reader_pid)
                              if self.reader_pid else 0.0),
            "sched": sorted(self.sched),
            "full_gcs": self.full_gcs, "longest_gc": self.longest_gc,
        }


def count_collections(phase: list[Phase]) -> None:
    """Count each full collection in the current phase (``gc.callbacks``)."""
    started = [0.0]

    def callback(stage: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if stage == "start":
            started[0] = time.perf_counter()
            return
        current = phase[0]
        current.full_gcs += 1
        current.longest_gc = max(current.longest_gc,
                                 time.perf_counter() - started[0])

    gc.callbacks.append(callback)


def record_lags(view: ironic_view.IronicView, phase: list[Phase]) -> None:
    """Time every batch the view applies, from each event's stamp."""
    apply = view.patches.apply_packed
    at = node_table.FIELD_AT["maintenance_reason"]

    def timed(changes: Any, read_at: float) -> int:
        count = apply(changes, read_at)
        now = time.time()
        current = phase[0]
        for node in changes.values():
            reason = node[at] if node else None
            if reason and reason.startswith(STAMP):
                current.lags.append(now - float(reason[len(STAMP):]))
        current.last_applied = now
        return count

    view.patches.apply_packed = timed  # type: ignore[method-assign]


def schedule(nodes: list[decisions.IronicNodeFacts], phase: list[Phase],
             stop: threading.Event) -> None:
    """Run the drain filters as requests would, timing each run."""
    objects.register_all()
    hosts = filters_bench.make_hosts(nodes[:CANDIDATES])
    spec = objects.RequestSpec(instance_uuid=str(uuidlib.uuid4()))
    chain = [cls() for cls in FILTER_CLASSES]
    while not stop.wait(SCHED_EVERY):
        started = time.perf_counter()
        for filt in chain:
            filt.filter_all(hosts, spec)
        phase[0].sched.append(time.perf_counter() - started)


def profile_threads() -> list[cProfile.Profile]:
    """Profile every thread started from now on (``--profile``)."""
    profiles: list[cProfile.Profile] = []
    # _bootstrap_inner, not run: futurist's executor threads (oslo.messaging
    # dispatches there) override run.
    bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def profiled(thread: threading.Thread) -> None:
        prof = cProfile.Profile(time.thread_time)  # CPU, not GIL waits
        profiles.append(prof)
        prof.enable()
        try:
            bootstrap(thread)
        finally:
            prof.disable()

    threading.Thread._bootstrap_inner = profiled  # type: ignore[attr-defined]
    return profiles


def dump(profiles: list[cProfile.Profile], path: str) -> None:
    """All threads' profiles, summed, top functions by own time."""
    stats = None
    for prof in profiles:
        prof.disable()  # a daemon thread's, still running
        stats = pstats.Stats(prof) if stats is None else stats.add(prof)
    if stats is not None:
        with open(path, "w") as out:
            stats.stream = out  # type: ignore[attr-defined]
            stats.dump_stats(path + ".prof")
            stats.sort_stats("tottime").print_stats(40)
            stats.sort_stats("cumulative").print_stats(60)


def tune_transport() -> None:
    """The transport settings the parent asks for (``--prefetch``,
    ``--batch``), as an operator would set them in nova.conf, and which
    listener consumes the queue (``--listener``)."""
    listener = os.environ.get("NDF_STORM_LISTENER") or "reader"
    listening.OWN_CONSUMER = listener != "oslo"
    listening.READER_PROCESS = listener == "reader"
    nice = os.environ.get("NDF_STORM_READER_NICE")
    if nice:
        priority.READER_NICE = int(nice)
    nice = os.environ.get("NDF_STORM_THREAD_NICE")
    if nice:
        priority.THREAD_NICE = int(nice)
    # One reader for the host's listening processes (select_burst's
    # --host-reader), as nova.conf sets it; the host and lock_path of the
    # scheduler it runs beside, so that all are one host's processes.
    CONF.set_override("baremetal_notifications_host_reader",
                      os.environ.get("NDF_STORM_HOST_READER") == "1",
                      "drain_filters")
    if os.environ.get("NDF_STORM_LOCK_PATH"):
        lockutils.set_defaults(os.environ["NDF_STORM_LOCK_PATH"])
    if os.environ.get("NDF_STORM_HOST"):
        try:
            CONF.register_opt(cfg.StrOpt("host"))
        except cfg.DuplicateOptError:
            pass
        CONF.set_override("host", os.environ["NDF_STORM_HOST"])
    prefetch = int(os.environ.get("NDF_STORM_PREFETCH") or 0)
    # oslo.messaging registers the rabbit options with its first transport.
    CONF.register_opts(impl_rabbit.rabbit_opts, group="oslo_messaging_rabbit")
    CONF.set_override("rabbit_qos_prefetch_count", prefetch,
                      "oslo_messaging_rabbit")
    batch = os.environ.get("NDF_STORM_BATCH")
    if batch:
        size, timeout = batch.split(",")
        listening.BATCH_SIZE = int(size)
        listening.BATCH_TIMEOUT = float(timeout)


def child(transport_url: str, count: int, scheduler: bool) -> int:
    """The process: listen, apply, answer the parent on stdin/stdout."""
    profile_to = os.environ.get("NDF_STORM_PROFILE")
    profiles = profile_threads() if profile_to else []
    events_common.configure("events", transport_url, 600)
    tune_transport()
    nodes = filters_bench.make_nodes(count, 0.0)
    listing = filters_bench.Listing(nodes)
    # Only the scheduling thread's candidates stay (its HostStates, as
    # Nova's would): the rest of the facts are Ironic's, not this heap's.
    nodes = nodes[:CANDIDATES] if scheduler else []
    view = ironic_view.IronicView(client_factory=lambda: listing)  # type: ignore
    ironic_view.set_view(view)
    phase = [Phase("start")]
    record_lags(view, phase)
    count_collections(phase)
    view.ensure_running()
    events_common.wait(lambda: events_common.ready(view), 300, "listening")
    listed = listing.requests
    stop = threading.Event()
    if scheduler:
        threading.Thread(target=schedule, args=(nodes, phase, stop),
                         daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["phase"]:
            phase[0] = Phase(words[1], events_common.reader_pid(view))
            print(json.dumps({"phase": words[1]}), flush=True)
        elif words == ["report"]:
            events = view._events
            print(json.dumps({
                **phase[0].summary(),
                "rss_mb": resource.getrusage(
                    resource.RUSAGE_SELF).ru_maxrss / 1024,
                "copies": view.patches.copies,
                "batches": view.patches.batches,
                # Listing pages since start-up, and one GET per re-read
                # (the stand-in has no get_node: a re-read fails, counted).
                "requests": (listing.requests - listed
                             + (events.reread if events else 0)),
                "listings": view.refreshes,
                "reread": events.reread if events else 0,
                "received": events.received if events else 0,
                "server": type(events._server).__name__ if events else ""}),
                flush=True)
    stop.set()
    # Stop first: a thread still blocked when its profile is read gets its
    # pending call timed on the reading thread's clock (cProfile's flush),
    # which makes nonsense of that call's time.
    view.stop(timeout=5)
    if profile_to:
        dump(profiles, f"{profile_to}.{os.getpid()}.txt")
    return 0
