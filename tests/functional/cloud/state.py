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

"""The cloud's state file and its processes, found and stopped by PID.

``.cloud/cloud.json`` is what ``up`` leaves behind and what ``status``,
``down`` and a test tier read: the ports, the endpoints, and for every
process its PID, the PID's start time (so a PID the kernel gave to
another program since is never signalled) and its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from tests.functional.services.process import REPO_ROOT

#: Where the cloud keeps everything; ``NDF_CLOUD_DIR`` moves it.
CLOUD_DIR_ENV = "NDF_CLOUD_DIR"
STATE_FILE = "cloud.json"


def cloud_dir() -> Path:
    """The state directory (``$NDF_CLOUD_DIR`` or ``<checkout>/.cloud``)."""
    configured = os.environ.get(CLOUD_DIR_ENV)
    return Path(configured).resolve() if configured else REPO_ROOT / ".cloud"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: split after its ")".
    return int(stat.rsplit(")", 1)[1].split()[19])


@dataclass
class Proc:
    """One process of the cloud, as recorded when it was started."""

    name: str
    pid: int
    started: int
    log: str
    group: bool = True  # its own process group: signal the whole group

    def alive(self) -> bool:
        """True while this very process (not a reused PID) runs."""
        return start_time(self.pid) == self.started

    def signal(self, signum: int) -> bool:
        """Send ``signum`` (to its group) if it runs; True if it did."""
        if not self.alive():
            return False
        kill = os.killpg if self.group else os.kill
        with contextlib.suppress(ProcessLookupError):
            kill(self.pid, signum)
        return True


def stop_all(procs: list[Proc], grace: float = 20.0) -> list[Proc]:
    """SIGTERM every one at once, SIGKILL what runs after ``grace`` s;
    the ones that ran."""
    stopped = [proc for proc in procs if proc.signal(signal.SIGTERM)]
    deadline = time.monotonic() + grace
    while (any(p.alive() for p in stopped)
           and time.monotonic() < deadline):
        time.sleep(0.2)
    for proc in stopped:
        proc.signal(signal.SIGKILL)
    return stopped


@dataclass
class CloudState:
    """Everything ``up`` recorded; saved after every step."""

    ports: dict[str, int] = field(default_factory=dict)
    endpoints: dict[str, str] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, base: Path) -> CloudState:
        path = base / STATE_FILE
        if not path.exists():
            return cls()
        raw = json.loads(path.read_text())
        procs = {k: Proc(**v) for k, v in raw.pop("procs", {}).items()}
        return cls(procs=procs, **raw)

    def save(self, base: Path) -> None:
        path = base / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        tmp.replace(path)

    def running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.alive()

    def record(self, name: str, pid: int, log: Path,
               group: bool = True) -> None:
        started = start_time(pid)
        if started is None:
            raise RuntimeError(f"{name} (PID {pid}) exited at once; see {log}")
        self.procs[name] = Proc(name, pid, started, str(log), group)
