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

"""Process helpers for the test services: start, wait with a bound, stop.

:class:`LoopbackService` is the life cycle the Ironic and placement servers
share, :class:`ServiceFixture` runs one for a test, and
:class:`JsonTestClient` is the HTTP client their test clients build on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fixtures
import requests
from testtools import content

#: The root of the nova-drain-filters work tree.
REPO_ROOT = Path(__file__).resolve().parents[3]
#: If set to a non-empty value, service temp dirs are kept after stop.
KEEP_DIRS_ENV = "NDF_KEEP_SERVICE_DIRS"
#: Log text of a failed bind (stdlib socket error message).
ADDRESS_IN_USE = "Address already in use"
#: Start attempts when a freshly picked port is taken before the bind.
PORT_ATTEMPTS = 3


class ServiceStartError(RuntimeError):
    """A service process did not become ready."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail

    @property
    def address_in_use(self) -> bool:
        """True if the service failed because its port was taken."""
        return ADDRESS_IN_USE in self.log_tail


class ServiceAPIError(RuntimeError):
    """A service answered an HTTP request with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str):
        super().__init__(f"{method} {url} -> {status}: {body[:2000]}")
        self.method = method
        self.url = url
        self.status = status
        self.body = body


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return this process's environment without ``OS_*`` variables.

    oslo.config reads ``OS_<GROUP>__<OPTION>`` variables, so a developer's
    shell must not leak settings into the services under test.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(extra or {})
    return env


def http_session(headers: Mapping[str, str] | None = None) -> requests.Session:
    """Return a requests session that ignores proxy environment variables."""
    session = requests.Session()
    session.trust_env = False
    session.headers.update(headers or {})
    return session


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but not ours to signal
        pass
    return True


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


class ServiceProcess:
    """One child process in its own session, stopped by its PID.

    The child is started with ``start_new_session=True``, so its PID is
    also the ID of a process group that holds every worker it forks.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None

    @property
    def pid(self) -> int | None:
        """PID (and process group ID) of the running child, if any."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the child with stdout and stderr going to the log file."""
        if self._proc is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._log_file = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log_file,
            stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
            start_new_session=True, close_fds=True)

    def returncode(self) -> int | None:
        """Return the exit code if the child has exited, else None."""
        return self._proc.poll() if self._proc is not None else None

    def wait_ready(self, probe: Callable[[], bool], timeout: float,
                   interval: float = 0.1,
                   fatal_markers: Sequence[str] = ()) -> float:
        """Poll ``probe`` until it returns True; return the seconds taken.

        Stops the child and raises :class:`ServiceStartError` carrying the
        tail of the log if the child exits, if a line of ``fatal_markers``
        shows up in the log, or if ``timeout`` passes first.
        """
        started = time.monotonic()
        deadline = started + timeout
        while True:
            code = self.returncode()
            if code is not None:
                self._fail(f"{self.name} exited with code {code} before it was ready")
            try:
                if probe():
                    return time.monotonic() - started
            except requests.RequestException:
                pass
            marker = self._find_marker(fatal_markers)
            if marker is not None:
                self._fail(f"{self.name} logged {marker!r} while starting")
            if time.monotonic() >= deadline:
                self._fail(f"{self.name} was not ready after {timeout:.0f} s")
            time.sleep(interval)

    def _find_marker(self, markers: Sequence[str]) -> str | None:
        if not markers:
            return None
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return None
        return next((m for m in markers if m in text), None)

    def _fail(self, reason: str) -> None:
        # A child that never became ready has nothing to drain; a hung
        # ironic worker ignores SIGTERM, so do not wait the full grace.
        self.stop(grace=2.0)
        tail = self.log_tail()
        raise ServiceStartError(
            f"{reason}; command: {' '.join(self.argv)}\n"
            f"--- last lines of {self.log_path} ---\n{tail}", tail)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` s.

        Safe to call more than once and on a child that already exited.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return
        pgid = proc.pid
        deadline = time.monotonic() + grace
        signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            signal_group(pgid, signal.SIGKILL)
            proc.wait(timeout=5)
        # Workers may outlive the leader for a moment; give them the rest
        # of the grace period, then kill whatever is left of the group.
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, max_chars: int = 6000) -> str:
        """Return the last ``max_chars`` characters of the log file."""
        try:
            return self.log_path.read_bytes()[-max_chars:].decode(
                "utf-8", "replace")
        except OSError as exc:
            return f"<no log: {exc}>"


def write_ini(path: Path,
              sections: Mapping[str, Mapping[str, str | int | bool]]) -> None:
    """Write an oslo.config style INI file."""
    lines: list[str] = []
    for section, options in sections.items():
        lines.append(f"[{section}]")
        for key, value in options.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{key} = {value}")
        lines.append("")
    path.write_text("\n".join(lines))


def make_service_dir(prefix: str) -> Path:
    """Create a private temp dir for one service instance."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def remove_service_dir(path: Path) -> None:
    """Remove a service temp dir unless NDF_KEEP_SERVICE_DIRS is set."""
    if not os.environ.get(KEEP_DIRS_ENV):
        shutil.rmtree(path, ignore_errors=True)


class LoopbackService:
    """Life cycle shared by the service wrappers: start, stop, log, URL.

    Subclasses implement :meth:`_start_once`, which must set
    ``state_dir`` and ``_process`` before anything that can fail.
    """

    name = "service"
    #: Seconds between SIGTERM and SIGKILL when the service is stopped.
    stop_grace = 10.0

    def __init__(self, host: str = "127.0.0.1", port: int | None = None,
                 ready_timeout: float = 60.0, debug: bool = False):
        self.host = host
        self.port = port
        self.ready_timeout = ready_timeout
        self.debug = debug
        self.state_dir: Path | None = None
        self.startup_seconds: float | None = None
        self._process: ServiceProcess | None = None
        self._final_log = ""

    @property
    def url(self) -> str:
        """Base URL of the API, e.g. ``http://127.0.0.1:40123``."""
        if self.port is None:
            raise RuntimeError(f"{self.name} is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID (and process group) of the server process while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server and wait (bounded) until it answers.

        A port picked here is retried with a new one if another process
        took it before the server could bind.
        """
        if self._process is not None:
            raise RuntimeError(f"{self.name} is already started")
        auto_port = self.port is None
        for attempt in range(1, PORT_ATTEMPTS + 1):
            if auto_port:
                self.port = free_port(self.host)
            started = time.monotonic()
            try:
                self._start_once()
            except ServiceStartError as exc:
                self.stop()
                if not (auto_port and exc.address_in_use and attempt < PORT_ATTEMPTS):
                    raise
            except BaseException:
                self.stop()
                raise
            else:
                self.startup_seconds = time.monotonic() - started
                return

    def _start_once(self) -> None:
        raise NotImplementedError

    def _wait_ready(
        self, probe: Callable[[], bool], fatal_markers: Sequence[str] = ()
    ) -> None:
        assert self._process is not None
        self._process.wait_ready(probe, self.ready_timeout, fatal_markers=fatal_markers)

    def log_tail(self, max_chars: int = 6000) -> str:
        """Return the end of the server log (kept in memory after stop)."""
        if self._process is not None:
            return self._process.log_tail(max_chars)
        return self._final_log[-max_chars:]

    def stop(self) -> None:
        """Stop the server by PID and remove its temp dir; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            process.stop(grace=self.stop_grace)
            self._final_log = process.log_tail()
        atexit.unregister(self.stop)
        if self.state_dir is not None:
            remove_service_dir(self.state_dir)
            self.state_dir = None


def log_detail(get_text: Callable[[], str]) -> content.Content:
    """A testtools detail whose text is read when it is reported.

    Reported after the test, so it holds the whole log of the service.
    """
    return content.Content(content.UTF8_TEXT,
                           lambda: [get_text().encode("utf-8")])


class ServiceFixture(fixtures.Fixture):
    """Runs a :class:`LoopbackService` for the test's lifetime.

    Exposes ``url``, ``server`` and a ready test client as ``client``
    (built by ``make_client(url)``); the server log is attached as the
    detail ``<name>-log``.
    """

    def __init__(
        self, server: LoopbackService, make_client: Callable[[str], Any]
    ):
        super().__init__()
        self.server = server
        self.make_client = make_client
        self.url = ""
        self.client: Any = None

    def _setUp(self) -> None:
        self.addCleanup(self.server.stop)
        self.addDetail(f"{self.server.name}-log",
                       log_detail(self.server.log_tail))
        self.server.start()
        self.url = self.server.url
        self.client = self.make_client(self.url)
        self.addCleanup(self.client.close)


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are not None, for a request body."""
    return {k: v for k, v in fields.items() if v is not None}


class JsonTestClient:
    """A session to one service (no proxies) that raises on a wrong status."""

    prefix = ""

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = http_session({"Accept": "application/json", **headers})

    def close(self) -> None:
        """Close the underlying HTTP session."""
        self.session.close()

    def request(self, method: str, path: str, json: Any = None,
                expected: Iterable[int] = (200,),
                params: Mapping[str, str] | None = None) -> requests.Response:
        """Send a request to ``<url><prefix><path>``; raise unless expected."""
        url = f"{self.url}{self.prefix}{path}"
        resp = self.session.request(method, url, json=json, params=params,
                                    timeout=self.timeout)
        if resp.status_code not in tuple(expected):
            raise ServiceAPIError(method, url, resp.status_code, resp.text)
        return resp
