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


"""A rolling run's progress: one line per event, each on disk before the
next step.

The file is ``journal.jsonl`` in the run's directory. Each line is a JSON
object with the time, the host and the event, written, flushed and
fsynced before the run goes on: a run cut off by Ctrl-C, ``kill -9`` or a
reboot of the machine loses nothing it had done. A line cut short by a
crash is the last one, and is ignored.

Why a file and not Nova alone: Nova and placement say whether a host is
disabled and marked, and :mod:`.schedule` reads them, but no record of
theirs says whether COMMAND ran on a host, nor whether the run or an
operator disabled it. A file beside the run says both, and the same
command line finds it again (:func:`run_dir`).
"""
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nova_drain_filters.rolling import schedule

NAME = "journal.jsonl"
#: The events, in the order a host goes through them.
CHANGED, STARTED, ENDED, UP, FINISHED = (
    "drained", "command started", "command ended", "up", "finished")
#: What a "command started" event holds (``hook.Started``'s fields).
STARTED_FIELDS = ("pid", "log", "rc", "boot", "since")


def default_root() -> Path:
    """Where runs keep their directories: ``$XDG_STATE_HOME`` (or
    ``~/.local/state``) ``/openstack-drain/rolling``; it survives reboots,
    unlike ``/tmp`` on many hosts."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return Path(base) / "openstack-drain" / "rolling"


def run_key(hosts: Sequence[str], command: str, cloud: str) -> str:
    """The same hosts, COMMAND and cloud give the same run, so the same
    command line resumes it."""
    text = json.dumps([sorted(set(hosts)), command, cloud])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_dir(root: Path, hosts: Sequence[str], command: str,
            cloud: str) -> Path:
    return root / run_key(hosts, command, cloud)


class Journal:
    """The progress of one run, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / NAME

    def exists(self) -> bool:
        return self.path.exists()

    def record(self, host: str, event: str, **data: Any) -> None:
        """Append one event and make it durable before returning."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = json.dumps({"time": time.time(), "host": host,
                           "event": event, **data}, sort_keys=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     0o600)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        """Every whole event, oldest first."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the last line, cut short by a crash
            if isinstance(event, dict) and "host" in event:
                found.append(event)
        return found

    def progress(self) -> dict[str, schedule.Progress]:
        """Each host's progress, from its events in order."""
        found: dict[str, schedule.Progress] = {}
        for event in self.events():
            host, kind = str(event["host"]), event.get("event")
            now = found.get(host, schedule.Progress())
            if kind == CHANGED:
                now = dataclasses.replace(now,
                                          changed=bool(event.get("changed")))
            elif kind == STARTED:
                now = dataclasses.replace(now, started={
                    k: event.get(k) for k in STARTED_FIELDS},
                    rc=None, up=False)
            elif kind == ENDED:
                now = dataclasses.replace(now, rc=int(event.get("status", 1)))
            elif kind == UP:
                now = dataclasses.replace(now, up=True)
            elif kind == FINISHED:
                now = dataclasses.replace(now, finished=True)
            found[host] = now
        return found
