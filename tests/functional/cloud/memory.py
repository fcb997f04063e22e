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

"""The cloud's memory: every recorded process and all its descendants.

PSS (``/proc/PID/smaps_rollup``) is the figure that adds up: forked
workers (nova-scheduler's, uWSGI's) share most pages with their parent,
and PSS charges each shared page to its sharers in parts, where RSS
counts it once per process. Both are given; the issue's target (the
whole cloud under 3 GiB) is read against PSS.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
GIB = 1024 * 1024  # KiB in a GiB


@dataclass(frozen=True)
class Usage:
    """Memory of a set of processes, in KiB."""

    processes: int
    pss_kib: int
    rss_kib: int

    def text(self) -> str:
        return (f"PSS {self.pss_kib / GIB:.2f} GiB, RSS "
                f"{self.rss_kib / GIB:.2f} GiB, {self.processes} processes")

    def as_dict(self) -> dict[str, int]:
        return {"processes": self.processes, "pss_kib": self.pss_kib,
                "rss_kib": self.rss_kib}


def _parent(stat: str) -> int:
    # The command name (field 2) may hold spaces: split after its ")".
    return int(stat.rsplit(")", 1)[1].split()[1])


def children_map(proc: Path = PROC) -> dict[int, list[int]]:
    """Every running process's children, from each ``stat``'s PPID."""
    found: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = _parent((entry / "stat").read_text())
        except (OSError, IndexError, ValueError):
            continue  # gone since the listing
        found.setdefault(ppid, []).append(int(entry.name))
    return found


def with_descendants(pids: Iterable[int],
                     proc: Path = PROC) -> set[int]:
    """``pids`` and all their descendants that run, each once."""
    children = children_map(proc)
    seen: set[int] = set()
    todo = [pid for pid in pids if (proc / str(pid)).is_dir()]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return seen


def _rollup(pid: int, proc: Path) -> tuple[int, int] | None:
    """(PSS, RSS) in KiB of one process, or None if it is gone."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[key.strip()] = int(parts[0])
    return fields.get("Pss", 0), fields.get("Rss", 0)


def usage(pids: Iterable[int], proc: Path = PROC) -> Usage:
    """The memory of ``pids`` and their descendants, each counted once."""
    pss = rss = count = 0
    for pid in sorted(with_descendants(pids, proc)):
        got = _rollup(pid, proc)
        if got is not None:
            pss, rss, count = pss + got[0], rss + got[1], count + 1
    return Usage(count, pss, rss)
