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

"""What the event-mode benchmarks share: nova.conf, waiting, figures.

A helper of ``ironic_events`` and ``ironic_storm`` (no ``__main__``): the
options an operator sets for each mode, the wait for a view that listens
and has listed, the requests a view sent, a percentile, and the SIGTERM
handler that turns a kill into a clean stop of every process started.
"""
from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import time
from types import FrameType
from typing import Any
from typing import NoReturn

from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from tests.functional.services import proc_stat

CONF = cfg.CONF
#: Event mode lists Ironic this often (seconds): what it learns in between
#: comes by notification.
RECONCILE = 600
_PARSED: list[bool] = []


def configure(mode: str, transport_url: str, interval: int) -> None:
    """nova.conf as an operator sets it for one mode."""
    drain_conf.register_opts(CONF)
    if not _PARSED:
        CONF([], project="nova")
        _PARSED.append(True)
    events = mode == "events"
    CONF.set_override("baremetal_notifications", events, "drain_filters")
    CONF.set_override("baremetal_notifications_url", transport_url,
                      "drain_filters")
    CONF.set_override("baremetal_refresh_interval",
                      RECONCILE if events else interval, "drain_filters")
    CONF.set_override("baremetal_max_snapshot_age", 2 * RECONCILE,
                      "drain_filters")


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.01)


def ready(view: ironic_view.IronicView) -> bool:
    events = view._events
    if events is not None and not events.settled:
        return False
    return view.trusted() is not None


def requests_sent(view: ironic_view.IronicView) -> int:
    total = view._client.requests if view._client else 0
    events = view._events
    if events is not None and events._client is not None:
        total += events._client.requests
    return total


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ratio_interval(quiet: list[float], during: list[float],
                   stat: Any = statistics.median, rounds: int = 2000,
                   seed: int = 22) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of ``stat(during) / stat(quiet)``
    over ``rounds`` resamplings of both, with replacement (a bootstrap):
    how far the ratio of this many calls could move by chance alone."""
    rng = random.Random(seed)
    ratios = sorted(
        stat(rng.choices(during, k=len(during)))
        / stat(rng.choices(quiet, k=len(quiet))) for _ in range(rounds))
    return (ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1])


def terminate(signum: int, _frame: FrameType | None) -> NoReturn:
    raise SystemExit(128 + signum)


def stop_worker(proc: subprocess.Popen[str]) -> None:
    """End a benchmark's worker: close its stdin (its cue to exit), then,
    if it is still there after 10 s, kill its process group."""
    if proc.poll() is not None:
        return
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    except (OSError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# /proc figures (proc(5)) ---------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(stat_path: str) -> float:
    """user + system CPU seconds of the process or thread whose ``stat``
    this is (``/proc/PID/stat``, ``/proc/self/task/TID/stat``); 0 if gone."""
    fields = proc_stat.fields(stat_path)
    return 0.0 if fields is None else (
        int(fields[proc_stat.UTIME]) + int(fields[proc_stat.STIME])) / TICK


def group_cpu(*pgids: int, command: str | None = None) -> float:
    """CPU seconds of every live process in the process groups ``pgids``
    (services started each in a session of its own, their children
    included); only those whose command line holds ``command`` if given."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = proc_stat.fields(f"/proc/{entry}/stat")
            if fields is None or int(fields[proc_stat.PGRP]) not in pgids:
                continue
            if command is not None and command not in _command_line(entry):
                continue
            total += (int(fields[proc_stat.UTIME])
                      + int(fields[proc_stat.STIME])) / TICK
    return total


def _command_line(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(
                errors="replace")
    except OSError:  # gone meanwhile
        return ""


def run_queue_wait(tid: int) -> float:
    """Seconds thread ``tid`` of this process has waited for a CPU while
    runnable (``/proc/self/task/TID/schedstat``'s second field): what a
    busy machine, not the GIL, took from it."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def peak_rss_mb(pid: int | str = "self") -> float:
    """The process's peak resident set (``VmHWM``), MB; 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def reader_pid(view: ironic_view.IronicView) -> int | None:
    """The pid of the view's reader process, if it reads in one."""
    events = view._events
    return getattr(getattr(events, "_server", None), "pid", None)
