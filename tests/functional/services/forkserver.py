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

"""Start a service's process by forking one that has imported it already.

Ironic's all-in-one ``ironic`` spends 4 to 5 s of CPU importing itself
before it reads its config, and the suite starts a fresh Ironic for each
of some 40 tests per run on a 2-core machine. A :class:`ForkServer` (one a
test process, for each entry point) imports the entry point's module once,
in the service's own venv (``forkserver_main.py``), and forks a child for
each start; the child then runs the entry point as the console script
would, from ``main()`` on, with its own argv, working directory and log.

A :class:`ForkedProcess` is the same to its callers as a
:class:`~tests.functional.services.process.ServiceProcess`: a session of
its own, stopped by PID (SIGTERM to its group, SIGKILL after the grace),
its exit code known. ``NDF_FORKSERVER=0`` starts every service with
``subprocess`` as before.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.functional.services import process

MAIN = Path(__file__).with_name("forkserver_main.py")
READY_TIMEOUT = 120.0
"""Bound on the fork server's own import (Ironic's takes 4 to 8 s)."""

ENABLED_ENV = "NDF_FORKSERVER"


def enabled() -> bool:
    """Whether services start through a fork server (the default)."""
    return os.environ.get(ENABLED_ENV, "1") != "0"


class ForkServerError(RuntimeError):
    """The fork server could not start, or stopped answering."""


class ForkServer:
    """One long-lived process that forks a service child on request."""

    def __init__(self, python: Path, module: str, function: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = [str(python), str(MAIN), module, function]
        self.env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=self.env, start_new_session=True,
            close_fds=True)
        self._proc = proc
        answer = self._read(READY_TIMEOUT)
        if "ready" not in answer:
            self.close()
            raise ForkServerError(f"{' '.join(self.argv)}: {answer}")
        return proc

    def _read(self, timeout: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else b""
        if not line:
            code = proc.poll()
            self.close()
            raise ForkServerError(
                f"{' '.join(self.argv)}: no answer within {timeout:.0f} s"
                + (f" (exited with {code})" if code is not None else ""))
        return json.loads(line)

    def _ask(self, request: Mapping[str, object]) -> dict[str, Any]:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                proc = self._start()
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(dict(request)).encode() + b"\n")
            proc.stdin.flush()
            return self._read(30.0)

    def spawn(self, argv: Sequence[str], cwd: Path, log: Path) -> int:
        """Fork a child that runs the entry point; return its PID."""
        return int(self._ask({"spawn": list(argv), "cwd": str(cwd),
                              "log": str(log)})["pid"])

    def exited(self, pid: int) -> int | None:
        """The child's exit code once it has exited, else None."""
        code = self._ask({"status": pid})["exited"]
        return None if code is None else int(code)

    def close(self) -> None:
        """Stop the fork server (its children are not touched)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


_SERVERS: dict[tuple[str, ...], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def shared(python: Path, module: str, function: str) -> ForkServer:
    """This test process's fork server for one entry point."""
    key = (str(python), module, function)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = _SERVERS[key] = ForkServer(python, module, function,
                                                env=process.child_env())
            atexit.register(server.close)
        return server


class ForkedProcess(process.ServiceProcess):
    """A :class:`ServiceProcess` whose child a :class:`ForkServer` forks."""

    def __init__(self, server: ForkServer, name: str, argv: Sequence[str],
                 log_path: Path, cwd: Path) -> None:
        super().__init__(name, argv, log_path, cwd=cwd)
        self.server = server
        self._pid: int | None = None
        self._code: int | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self) -> None:
        if self._pid is not None:
            raise RuntimeError(f"{self.name} is already started")
        assert self.cwd is not None
        self._code = None
        self._pid = self.server.spawn(self.argv, self.cwd, self.log_path)

    def returncode(self) -> int | None:
        if self._pid is None:
            return self._code
        if self._code is None:
            self._code = self.server.exited(self._pid)
        return self._code

    def stop(self, grace: float = 10.0) -> None:
        pid, self._pid = self._pid, None
        if pid is None:
            return
        # The leader exits last (it reaps its own workers); the fork server
        # reaps the leader at once. SIGKILL to the group then ends any
        # straggler: a killed worker is a zombie until init reaps it, which
        # can take a second or two, but holds no port or file.
        deadline = time.monotonic() + grace
        process.signal_group(pid, signal.SIGTERM)
        code = self._exit_code(pid)
        while code is None and time.monotonic() < deadline:
            time.sleep(0.05)
            code = self._exit_code(pid)
        process.signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while code is None and time.monotonic() < deadline:
            time.sleep(0.05)
            code = self._exit_code(pid)
        self._code = code

    def _exit_code(self, pid: int) -> int | None:
        try:
            return self.server.exited(pid)
        except ForkServerError:
            return -1  # no fork server to ask: the group was signalled, go on
