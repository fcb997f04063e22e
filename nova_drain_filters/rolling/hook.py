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


"""COMMAND, run detached: it outlives the ``openstack`` process that
started it.

COMMAND runs through ``sh -c`` in a session of its own, under coreutils'
``timeout`` (SIGTERM at the hook timeout, SIGKILL 10 s later), with its
output in ``<host>.log`` and its exit status written to ``<host>.rc`` by
the shell that waits for it. If the ``openstack`` process is killed (Ctrl-C,
``kill -9``) COMMAND goes on and its status still lands in the file: the
next run waits for it instead of running it twice. Only a reboot of the
machine ends both; then no status is written, the process is gone, and
the next run says so and runs COMMAND again.
"""
import dataclasses
import os
import shlex
import subprocess
from pathlib import Path

#: ``timeout``'s exit status when COMMAND ran out of time.
TIMED_OUT = 124
#: Seconds between SIGTERM and SIGKILL at the hook timeout.
KILL_AFTER = 10
#: Characters of the log's end quoted in a failed host's row.
TAIL = 300


@dataclasses.dataclass(frozen=True)
class Started:
    """A detached COMMAND: the shell that waits for it, and its files."""

    pid: int
    log: str
    rc: str
    #: This boot's ID and the shell's start time in it: a PID reused
    #: after a reboot, or later in the same boot, is not that shell.
    boot: str = ""
    since: str = ""


def start(command: str, host: str, directory: Path,
          timeout: float) -> Started:
    """Start COMMAND (``{host}`` already replaced) for ``host``."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in host)
    log, rc = directory / f"{safe}.log", directory / f"{safe}.rc"
    rc.unlink(missing_ok=True)
    timed = shlex.join(["timeout", f"--kill-after={KILL_AFTER}",
                        f"{timeout:g}", "sh", "-c", command])
    partial = shlex.quote(f"{rc}.partial")
    waiter = (f"{timed} >> {shlex.quote(str(log))} 2>&1 < /dev/null; "
              f"echo $? > {partial} && mv {partial} {shlex.quote(str(rc))}")
    proc = subprocess.Popen(  # noqa: S603 - the operator's own COMMAND
        ["sh", "-c", waiter], start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, close_fds=True)
    return Started(proc.pid, str(log), str(rc), _boot(),
                   _stat(proc.pid)[1])


def status(started: Started) -> int | None:
    """COMMAND's exit status; None while it runs.

    Raises ``Interrupted`` when it ended with no status: its shell is gone
    (a reboot of this machine, or a kill of that shell itself).
    """
    try:
        return int(Path(started.rc).read_text().strip())
    except FileNotFoundError:
        pass
    except ValueError:
        return 1
    if _alive(started):
        return None
    try:  # it may have written the file between the two looks
        return int(Path(started.rc).read_text().strip())
    except (FileNotFoundError, ValueError):
        raise Interrupted(f"COMMAND's shell (pid {started.pid}) ended "
                          "with no exit status") from None


class Interrupted(Exception):
    """COMMAND ended with no exit status."""


def _alive(started: Started) -> bool:
    """The waiting shell still runs: the same boot, the same process
    (its start time), and not a zombie."""
    state, since = _stat(started.pid)
    if not state or started.boot != _boot() or since != started.since:
        return False
    if state == "Z":  # our child, over but not reaped yet
        _reap(started.pid)
        return False
    return True


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, str]:
    """A process's state letter and start time ('' if it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", ""
    fields = text.rsplit(")", 1)[-1].split()
    # proc(5): after "(comm)", field 3 is the state, field 22 starttime.
    return fields[0], fields[19]


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def tail(path: str, limit: int = TAIL) -> str:
    """The end of a log, on one line."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 4 * limit))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else "..." + line[-limit:]
