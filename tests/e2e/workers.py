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

"""nova-scheduler's forked workers, seen in /proc and in the real log.

How Nova 34 runs them: ``nova/cmd/scheduler.py`` ``main`` builds the
service (which loads the filters, so this project's view starts in the
parent) and calls ``nova/service.py`` ``serve(workers=2)``; oslo.service's
threading backend (``oslo_service/backend/_threading/service.py``
``ProcessLauncher``) hands it to a ``cotyledon.ServiceManager`` with
multiprocessing's fork context, linked to oslo.config with
``restart_method='mutate'``. The children are forked from the parent, and
the view restarts its threads in each (``os.register_at_fork``,
``nova_drain_filters/ironic_view/refresher.py``).

* SIGKILL of a child: SIGCHLD wakes the parent's
  ``_child_supervisor_thread`` (``cotyledon/_service_manager.py``), which
  logs "Child PID killed by signal SIGKILL" and forks a new worker with the
  same worker id (``_start_worker``).
* SIGHUP of the parent: ``ServiceManager._reload`` mutates the config
  files in the parent, then sends SIGHUP to its process group. oslo's
  ``ServiceWrapper`` has no ``reload``, so cotyledon's default
  (``cotyledon/_service.py`` ``Service.reload``) makes each child SIGTERM
  itself: every worker stops gracefully and the parent forks new ones.

Which worker served a request is read from the scheduler's log: oslo.log
writes the PID on every line, and the cloud logs this project at DEBUG
(``tests/functional/cloud/configs.py``), so each worker writes "Ironic
snapshot refreshed" when its view is ready and one summary line per
request, naming the instance (``nova_drain_filters/filters/summary.py``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import TypeVar

from tests.functional.cloud import memory
from tests.functional.cloud import resources
from tests.functional.services import proc_stat

READY = "Ironic snapshot refreshed"
REQUEST = "nova-drain-filters: request for instance "
PREFILTER = "drain_traits_filter forbade traits"
NO_CANDIDATES = "Got no allocation candidates"  # nova/scheduler/manager.py
LISTENING = "Listening to Ironic's notifications as pool "
#: What a reader logs when it finds another consumer on its queue
#: (``reader_child``): two readers of one queue, each given part of the
#: events (issue 41).
ANOTHER_READER = "Another Ironic event reader reads this reader's queue"
#: oslo.log's default formats: date, time, PID, level, logger, the
#: request context in brackets, the instance if any, the message.
LINE = re.compile(r"^\S+ \S+ (?P<pid>\d+) (?P<level>[A-Z]+) \S+ "
                  r"\[(?P<context>[^\]]*)\] (?:\[instance: [^\]]*\] )?"
                  r"(?P<msg>.*?)\s*$")
REQUEST_ID = re.compile(r"\breq-[0-9a-f-]{36}\b")
#: oslo.log's ``logging_debug_format_suffix``: function, file and line.
DEBUG_SUFFIX = re.compile(r"\s+\S+ \S+:\d+$")
WAIT = 120.0
#: Rounds of two requests before giving up on a worker serving one.
PROBE_ROUNDS = 4
#: One Ironic node, and a capability no node has: placement offers the
#: Ironic nodes, our filters decide them with the view (and log the line),
#: then ComputeCapabilitiesFilter rejects them all. No deploy, no node
#: changes: the request ends in "No valid host" in a second or two.
PROBE_FLAVOR = "ndf.baremetal-probe"

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None],
             timeout: float = WAIT, interval: float = 0.3) -> T:
    """Poll ``probe`` until it returns something not None (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


def probe_flavor(conn: Any) -> str:
    """Make (once) the flavor of :data:`PROBE_FLAVOR`; its name."""
    if conn.compute.find_flavor(PROBE_FLAVOR) is None:
        flavor = conn.compute.create_flavor(name=PROBE_FLAVOR, vcpus=1,
                                            ram=64, disk=1)
        conn.compute.create_flavor_extra_specs(flavor, {
            f"resources:CUSTOM_{resources.BAREMETAL_CLASS.upper()}": "1",
            "resources:VCPU": "0", "resources:MEMORY_MB": "0",
            "resources:DISK_GB": "0",
            "capabilities:ndf_e2e_probe": "nowhere"})
    return PROBE_FLAVOR


def request_id(conn: Any, server: str) -> str:
    """The ID of the API request that created ``server``: the scheduler
    logs under it (``nova/context.py`` carries it over RPC)."""
    resp = conn.compute.get(f"/servers/{server}/os-instance-actions",
                            microversion="2.74")
    resp.raise_for_status()
    return next(str(a["request_id"]) for a in resp.json()["instanceActions"]
                if a["action"] == "create")


def set_trait(conn: Any, provider: str, trait: str, on: bool) -> None:
    """Add or remove one trait of a provider, straight in placement (what
    ``drain host start`` marks a host with, without disabling it)."""
    url = f"/resource_providers/{provider}/traits"
    resp = conn.placement.get(url, microversion="1.6")
    resp.raise_for_status()
    body = resp.json()
    traits = set(body["traits"]) | {trait} if on else set(
        body["traits"]) - {trait}
    resp = conn.placement.put(url, microversion="1.6", json={
        "traits": sorted(traits),
        "resource_provider_generation": body["resource_provider_generation"]})
    resp.raise_for_status()


def children(parent: int) -> set[int]:
    """The running children of ``parent`` (the workers of the scheduler)."""
    return set(memory.children_map().get(parent, ()))


#: What a reader process runs (nova_drain_filters/ironic_view/reader_child.py).
READER = "nova_drain_filters.event_reader"


def readers(parent: int) -> set[int]:
    """The Ironic event readers among ``parent``'s children."""
    found = set()
    for pid in children(parent):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if READER.encode() in args:
            found.add(pid)
    return found


def niceness(pid: int) -> dict[int, int]:
    """Each thread of ``pid`` (its TID) and its niceness, from
    /proc/PID/task/TID/stat (proc(5): field 19, after the name)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = proc_stat.fields(str(task / "stat"))
        if fields is not None:  # else the thread ended meanwhile
            found[int(task.name)] = int(fields[proc_stat.NICE])
    return found


@dataclass(frozen=True)
class Line:
    index: int
    pid: int
    msg: str
    request: str | None = None  # the request ID of its context


class SchedulerLog:
    """nova-scheduler's log file (parent and workers write to it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def lines(self) -> list[Line]:
        found = []
        with open(self.path, errors="replace") as log:
            for index, raw in enumerate(log):
                match = LINE.match(raw)
                if match:
                    msg = match["msg"]
                    if match["level"] == "DEBUG":
                        msg = DEBUG_SUFFIX.sub("", msg)
                    req = REQUEST_ID.search(match["context"])
                    found.append(Line(index, int(match["pid"]), msg,
                                      req[0] if req else None))
        return found

    def ready(self, pid: int) -> Line | None:
        """The first line where ``pid``'s view had a listing."""
        return next((line for line in self.lines()
                     if line.pid == pid and line.msg.startswith(READY)), None)

    def request(self, instance: str) -> Line | None:
        """The summary line of the request that scheduled ``instance``."""
        tag = REQUEST + instance
        return next((line for line in self.lines()
                     if line.msg.startswith(tag)), None)

    def of_request(self, request_id: str) -> list[Line]:
        """Every line logged for one API request (its ID crosses RPC)."""
        return [line for line in self.lines() if line.request == request_id]

    def first_request(self, pid: int) -> Line | None:
        return next((line for line in self.lines()
                     if line.pid == pid and line.msg.startswith(REQUEST)),
                    None)

    def pools(self, pid: int) -> list[str]:
        """The queues ``pid`` said it listens as, in order."""
        return [line.msg[len(LISTENING):].split(";")[0]
                for line in self.lines()
                if line.pid == pid and line.msg.startswith(LISTENING)]

    def contains(self, pid: int, text: str) -> bool:
        return any(line.pid == pid and text in line.msg
                   for line in self.lines())


def verdict(line: Line) -> str:
    """A summary line without its instance: what the filters decided."""
    return line.msg[len(REQUEST):].split(":", 1)[1]
