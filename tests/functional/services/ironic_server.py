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

"""Run a real all-in-one Ironic (API + conductor) on loopback for tests.

The server uses the ``fake-hardware`` hardware type with every interface
family restricted to fake or no-op implementations, a private SQLite
database and ``rpc_transport = none``, so it needs no other service.

This module also holds the small process helpers that
:mod:`tests.functional.services.placement_server` reuses: starting a child
in its own session, waiting for readiness with a time bound, and stopping
the child's process group by PID.
"""

from __future__ import annotations

import atexit
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

REPO_ROOT = Path(__file__).resolve().parents[3]
"""The root of the nova-drain-filters work tree."""

IRONIC_VENV_ENV = "NDF_IRONIC_VENV"
"""Environment variable naming the venv that has ``ironic`` installed."""

KEEP_DIRS_ENV = "NDF_KEEP_SERVICE_DIRS"
"""If set to a non-empty value, service temp dirs are kept after stop."""

IRONIC_API_VERSION = "1.82"
"""Ironic API microversion the test client pins (1.82 adds node shards)."""

FAKE_HARDWARE = "fake-hardware"

ADDRESS_IN_USE = "Address already in use"
"""Log text of a failed bind (stdlib socket error message)."""

PORT_ATTEMPTS = 3
"""Start attempts when a freshly picked port is taken before the bind."""

# Every interface family of ironic 39 and the fake / no-op implementation
# used for it.  ``network`` and ``storage`` have no fake implementation
# that avoids other services, so they use ``noop``.
FAKE_INTERFACES: Mapping[str, str] = {
    "bios": "fake",
    "boot": "fake",
    "console": "fake",
    "deploy": "fake",
    "firmware": "fake",
    "inspect": "fake",
    "management": "fake",
    "network": "noop",
    "power": "fake",
    "raid": "fake",
    "rescue": "fake",
    "storage": "noop",
    "vendor": "fake",
}

# Log lines after which an ironic worker never serves the API: it logs
# one of these and then hangs (ironic 39 does not re-fork it).
IRONIC_FATAL_LOG_MARKERS = (
    "Failed to register hardware types",
    "Cannot start ironic",
    "cannot be started because",
    "Failed to start keepalive",
    # The API bind failed; the worker exits and is re-forked forever.
    ADDRESS_IN_USE,
)

# Provision states from which a node does not move on by itself.
FAILED_PROVISION_STATES = frozenset(
    {
        "adopt failed",
        "clean failed",
        "deploy failed",
        "error",
        "inspect failed",
        "rescue failed",
        "service failed",
        "unrescue failed",
    }
)


# --------------------------------------------------------------------------
# Generic process helpers (shared with placement_server).
# --------------------------------------------------------------------------


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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


class ServiceProcess:
    """One child process in its own session, stopped by its PID.

    The child is started with ``start_new_session=True``, so its PID is
    also the ID of a process group that holds every worker it forks.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ):
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
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            close_fds=True,
        )

    def returncode(self) -> int | None:
        """Return the exit code if the child has exited, else None."""
        return self._proc.poll() if self._proc is not None else None

    def wait_ready(
        self,
        probe: Callable[[], bool],
        timeout: float,
        interval: float = 0.1,
        fatal_markers: Sequence[str] = (),
    ) -> float:
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
            f"--- last lines of {self.log_path} ---\n{tail}",
            tail,
        )

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` s.

        Safe to call more than once and on a child that already exited.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return
        pgid = proc.pid
        deadline = time.monotonic() + grace
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            proc.wait(timeout=5)
        # Workers may outlive the leader for a moment; give them the rest
        # of the grace period, then kill whatever is left of the group.
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, max_chars: int = 6000) -> str:
        """Return the last ``max_chars`` characters of the log file."""
        try:
            data = self.log_path.read_bytes()
        except OSError as exc:
            return f"<no log: {exc}>"
        return data[-max_chars:].decode("utf-8", "replace")


def write_ini(
    path: Path, sections: Mapping[str, Mapping[str, str | int | bool]]
) -> None:
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


def log_detail(get_text: Callable[[], str]) -> content.Content:
    """Return a testtools detail whose text is read when it is reported."""
    return content.Content(content.UTF8_TEXT, lambda: [get_text().encode("utf-8")])


class LoopbackService:
    """Life cycle shared by the service wrappers: start, stop, log, URL.

    Subclasses implement :meth:`_start_once`, which must set
    ``state_dir`` and ``_process`` before anything that can fail.
    """

    name = "service"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout: float = 60.0,
        debug: bool = False,
    ):
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
            process.stop()
            self._final_log = process.log_tail()
        atexit.unregister(self.stop)
        if self.state_dir is not None:
            remove_service_dir(self.state_dir)
            self.state_dir = None


# --------------------------------------------------------------------------
# Ironic server.
# --------------------------------------------------------------------------


def ironic_venv() -> Path:
    """Return the venv holding ironic (``$NDF_IRONIC_VENV`` or default)."""
    configured = os.environ.get(IRONIC_VENV_ENV)
    return Path(configured) if configured else REPO_ROOT / ".venv-ironic"


def ironic_config(
    state_dir: Path, port: int, host: str = "127.0.0.1", debug: bool = False
) -> dict[str, dict[str, str | int | bool]]:
    """Return the ironic.conf sections for an isolated fake-hardware server."""
    default: dict[str, str | int | bool] = {
        "auth_strategy": "noauth",
        # Only the all-in-one ``ironic`` command accepts 'none': API and
        # conductor share one process and call each other directly.
        "rpc_transport": "none",
        "host": f"ndf-ironic-{port}",
        "debug": debug,
        "use_stderr": True,
        "enabled_hardware_types": FAKE_HARDWARE,
    }
    for family, impl in FAKE_INTERFACES.items():
        default[f"enabled_{family}_interfaces"] = impl
        default[f"default_{family}_interface"] = impl
    return {
        "DEFAULT": default,
        "api": {"host_ip": host, "port": port, "api_workers": 1},
        "database": {"connection": f"sqlite:///{state_dir / 'ironic.db'}"},
        # Automated cleaning runs the fake vendor step ``log_passthrough``
        # (priority 1) in a few milliseconds; no ramdisk is involved.
        "conductor": {"automated_clean": True},
        "dhcp": {"dhcp_provider": "none"},
        "oslo_concurrency": {"lock_path": str(state_dir / "locks")},
    }


def create_schema(dbsync_bin: Path, conf: Path, timeout: float) -> None:
    """Run ``ironic-dbsync create_schema`` for the database in ``conf``.

    ``upgrade`` fails on SQLite; ``create_schema`` builds the tables from
    the models and stamps the head revision.
    """
    try:
        result = subprocess.run(
            [str(dbsync_bin), "--config-file", str(conf), "create_schema"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env(),
            cwd=conf.parent,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(
            f"ironic-dbsync create_schema took over {timeout:.0f} s"
        ) from exc
    if result.returncode != 0:
        output = result.stdout.decode("utf-8", "replace")[-6000:]
        raise ServiceStartError(
            f"ironic-dbsync create_schema exited with code "
            f"{result.returncode}:\n{output}"
        )


_SCHEMA_TEMPLATES: dict[Path, Path] = {}


def schema_template(dbsync_bin: Path, timeout: float) -> Path:
    """Return an empty ironic SQLite DB made once per process and venv.

    Creating the schema takes about 1.4 s, more than starting ironic
    itself, so each server copies this file instead.
    """
    key = dbsync_bin.resolve()
    cached = _SCHEMA_TEMPLATES.get(key)
    if cached is not None and cached.exists():
        return cached
    tmpl_dir = make_service_dir("ndf-ironic-schema-")
    atexit.register(shutil.rmtree, tmpl_dir, True)
    db = tmpl_dir / "ironic.db"
    conf = tmpl_dir / "ironic.conf"
    write_ini(conf, {"database": {"connection": f"sqlite:///{db}"}})
    create_schema(dbsync_bin, conf, timeout)
    _SCHEMA_TEMPLATES[key] = db
    return db


class IronicServer(LoopbackService):
    """A real ``ironic`` all-in-one process bound to a loopback port."""

    name = "ironic"

    def __init__(
        self,
        venv: Path | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout: float = 60.0,
        debug: bool = False,
        reuse_schema: bool = True,
        extra_config: Mapping[str, Mapping[str, str | int | bool]] | None = None,
    ):
        super().__init__(host, port, ready_timeout, debug)
        self.venv = venv or ironic_venv()
        self.reuse_schema = reuse_schema
        #: Sections merged over ironic_config(), e.g. notification settings
        #: (rabbitmq_server.ironic_notification_config).
        self.extra_config = extra_config or {}

    def _bin(self, name: str) -> Path:
        path = self.venv / "bin" / name
        if not path.exists():
            raise ServiceStartError(
                f"{path} not found; set {IRONIC_VENV_ENV} to a venv that "
                "has ironic installed"
            )
        return path

    def _start_once(self) -> None:
        assert self.port is not None
        ironic_bin = self._bin("ironic")
        dbsync_bin = self._bin("ironic-dbsync")
        self.state_dir = make_service_dir("ndf-ironic-")
        atexit.register(self.stop)
        (self.state_dir / "locks").mkdir()
        conf = self.state_dir / "ironic.conf"
        sections = ironic_config(self.state_dir, self.port, self.host, self.debug)
        for section, options in self.extra_config.items():
            sections[section] = {**sections.get(section, {}), **options}
        write_ini(conf, sections)
        if self.reuse_schema:
            template = schema_template(dbsync_bin, self.ready_timeout)
            shutil.copyfile(template, self.state_dir / "ironic.db")
        else:
            create_schema(dbsync_bin, conf, self.ready_timeout)
        self._process = ServiceProcess(
            "ironic",
            [str(ironic_bin), "--config-file", str(conf)],
            self.state_dir / "ironic.log",
            env=child_env(),
            cwd=self.state_dir,
        )
        self._process.start()
        # A running PID proves nothing: the API is served by a worker that
        # may be failing.  The driver endpoint needs the conductor too.
        probe_url = f"{self.url}/v1/drivers/{FAKE_HARDWARE}"
        with http_session() as session:
            self._wait_ready(
                lambda: session.get(probe_url, timeout=2).status_code == 200,
                IRONIC_FATAL_LOG_MARKERS,
            )


class IronicServerFixture(fixtures.Fixture):
    """Fixture that runs an :class:`IronicServer` for the test's lifetime.

    Exposes ``url``, ``server`` and a ready :class:`IronicTestClient` as
    ``client``; the server log is attached as the detail ``ironic-log``.
    """

    def __init__(
        self,
        ready_timeout: float = 60.0,
        debug: bool = False,
        venv: Path | None = None,
        reuse_schema: bool = True,
        extra_config: Mapping[str, Mapping[str, str | int | bool]] | None = None,
    ):
        super().__init__()
        self.server = IronicServer(
            venv=venv,
            ready_timeout=ready_timeout,
            debug=debug,
            reuse_schema=reuse_schema,
            extra_config=extra_config,
        )
        self.url = ""
        self.client: IronicTestClient | None = None

    def _setUp(self) -> None:
        self.addCleanup(self.server.stop)
        self.addDetail("ironic-log", log_detail(self.server.log_tail))
        self.server.start()
        self.url = self.server.url
        self.client = IronicTestClient(self.url)
        self.addCleanup(self.client.close)


# --------------------------------------------------------------------------
# Test client.
# --------------------------------------------------------------------------

# Provision verb -> stable provision state the node ends in.
_VERB_TARGETS: Mapping[str, str] = {
    "manage": "manageable",
    "provide": "available",
    "active": "active",
    "deleted": "available",
    "clean": "manageable",
}

# A manual clean step every fake-hardware node supports and which needs
# no arguments.
DEFAULT_CLEAN_STEPS: list[dict[str, Any]] = [
    {"interface": "bios", "step": "cache_bios_settings"},
]


class ProvisionStateError(AssertionError):
    """A node failed, or did not reach a provision state in time."""


class IronicTestClient:
    """Minimal typed Ironic API client for driving fake-hardware nodes."""

    def __init__(
        self,
        url: str,
        api_version: str = IRONIC_API_VERSION,
        timeout: float = 10.0,
        poll_interval: float = 0.05,
    ):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.session = http_session(
            {
                "X-OpenStack-Ironic-API-Version": api_version,
                "Accept": "application/json",
            }
        )

    def close(self) -> None:
        """Close the underlying HTTP session."""
        self.session.close()

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        expected: Iterable[int] = (200,),
        params: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send a request to ``/v1<path>``; raise unless status is expected."""
        url = f"{self.url}/v1{path}"
        resp = self.session.request(
            method, url, json=json, params=params, timeout=self.timeout
        )
        if resp.status_code not in tuple(expected):
            raise ServiceAPIError(method, url, resp.status_code, resp.text)
        return resp

    # Nodes -----------------------------------------------------------------

    def create_node(
        self,
        name: str | None = None,
        uuid: str | None = None,
        resource_class: str = "baremetal",
        **fields: Any,
    ) -> dict[str, Any]:
        """Create a fake-hardware node (state ``enroll``) and return it."""
        body: dict[str, Any] = {
            "driver": FAKE_HARDWARE,
            "resource_class": resource_class,
            **fields,
        }
        if name is not None:
            body["name"] = name
        if uuid is not None:
            body["uuid"] = uuid
        return self.request("POST", "/nodes", body, (201,)).json()

    def get_node(self, uuid: str) -> dict[str, Any]:
        """Return the node as Ironic reports it."""
        return self.request("GET", f"/nodes/{uuid}").json()

    def list_nodes(self, **filters: str) -> list[dict[str, Any]]:
        """Return detailed node records matching the query ``filters``."""
        return self.request("GET", "/nodes/detail", params=filters).json()["nodes"]

    def update_node(self, uuid: str, **fields: Any) -> dict[str, Any]:
        """Set top-level node fields with a JSON patch and return the node."""
        patch = [{"op": "add", "path": f"/{k}", "value": v} for k, v in fields.items()]
        return self.request("PATCH", f"/nodes/{uuid}", patch).json()

    def delete_node(self, uuid: str) -> None:
        """Delete the node."""
        self.request("DELETE", f"/nodes/{uuid}", expected=(204,))

    # Provisioning ----------------------------------------------------------

    def set_provision_state(self, uuid: str, verb: str, **extra: Any) -> None:
        """Request a provision state change (``manage``, ``active``, ...)."""
        self.request(
            "PUT", f"/nodes/{uuid}/states/provision", {"target": verb, **extra}, (202,)
        )

    def _provision(
        self, uuid: str, verb: str, wait: bool, **extra: Any
    ) -> dict[str, Any]:
        self.set_provision_state(uuid, verb, **extra)
        if wait:
            return self.wait_for_provision_state(uuid, _VERB_TARGETS[verb])
        return self.get_node(uuid)

    def manage(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """enroll / available / clean failed -> manageable."""
        return self._provision(uuid, "manage", wait)

    def provide(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """manageable -> cleaning -> available."""
        return self._provision(uuid, "provide", wait)

    def deploy(
        self, uuid: str, instance_uuid: str | None = None, wait: bool = True
    ) -> dict[str, Any]:
        """available -> deploying -> active, optionally for an instance."""
        if instance_uuid is not None:
            self.update_node(uuid, instance_uuid=instance_uuid)
        return self._provision(uuid, "active", wait)

    def undeploy(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """active -> deleting -> cleaning -> available."""
        return self._provision(uuid, "deleted", wait)

    def clean_manual(
        self,
        uuid: str,
        clean_steps: list[dict[str, Any]] | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """manageable -> cleaning -> manageable, running ``clean_steps``."""
        steps = DEFAULT_CLEAN_STEPS if clean_steps is None else clean_steps
        return self._provision(uuid, "clean", wait, clean_steps=steps)

    def fail_cleaning(self, uuid: str) -> dict[str, Any]:
        """manageable -> cleaning -> clean failed, via an unknown step.

        The conductor accepts the request, then rejects the step while
        cleaning, which is a real cleaning failure (``last_error`` set).
        """
        self.set_provision_state(
            uuid,
            "clean",
            clean_steps=[{"interface": "deploy", "step": "ndf_no_such_step"}],
        )
        return self.wait_for_provision_state(uuid, "clean failed")

    def make_available_node(
        self,
        name: str | None = None,
        uuid: str | None = None,
        resource_class: str = "baremetal",
        **fields: Any,
    ) -> dict[str, Any]:
        """Create a node and take it through manageable to available."""
        node = self.create_node(
            name=name, uuid=uuid, resource_class=resource_class, **fields
        )
        self.manage(node["uuid"])
        return self.provide(node["uuid"])

    def wait_for_provision_state(
        self, uuid: str, target: str, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Poll until the node rests in ``target``; return the node.

        A node rests in a state when ``target_provision_state`` is unset
        (failure states keep it set, so for them reaching the state is
        enough).  Raises :class:`ProvisionStateError` at once if the node
        lands in a different failure state, or after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            node = self.get_node(uuid)
            state = node["provision_state"]
            if state == target and (
                node["target_provision_state"] is None
                or target in FAILED_PROVISION_STATES
            ):
                return node
            if state in FAILED_PROVISION_STATES and state != target:
                raise ProvisionStateError(
                    f"node {uuid} is in {state!r} while waiting for "
                    f"{target!r}: {node.get('last_error')}"
                )
            if time.monotonic() >= deadline:
                raise ProvisionStateError(
                    f"node {uuid} is in {state!r} (target "
                    f"{node['target_provision_state']!r}) after {timeout} s "
                    f"waiting for {target!r}; last_error: "
                    f"{node.get('last_error')}"
                )
            time.sleep(self.poll_interval)

    # Power -----------------------------------------------------------------

    def set_power_state(
        self, uuid: str, target: str, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Set ``power on`` / ``power off`` and wait until it is reported.

        Fake-hardware nodes start with power_state None and the fake deploy
        does not power them on, so tests that care set it explicitly.
        """
        self.request("PUT", f"/nodes/{uuid}/states/power", {"target": target}, (202,))
        deadline = time.monotonic() + timeout
        while True:
            node = self.get_node(uuid)
            if node["power_state"] == target and node["target_power_state"] is None:
                return node
            if time.monotonic() >= deadline:
                raise ProvisionStateError(
                    f"node {uuid} power is {node['power_state']!r} after "
                    f"{timeout} s waiting for {target!r}"
                )
            time.sleep(self.poll_interval)

    # Maintenance and traits ------------------------------------------------

    def set_maintenance(
        self, uuid: str, on: bool, reason: str | None = None
    ) -> dict[str, Any]:
        """Turn maintenance mode on (with ``reason``) or off; return node."""
        path = f"/nodes/{uuid}/maintenance"
        if on:
            body = {"reason": reason} if reason is not None else None
            self.request("PUT", path, body, (202,))
        else:
            self.request("DELETE", path, expected=(202,))
        return self.get_node(uuid)

    def get_traits(self, uuid: str) -> list[str]:
        """Return the node's traits."""
        return self.request("GET", f"/nodes/{uuid}/traits").json()["traits"]

    def add_trait(self, uuid: str, trait: str) -> None:
        """Add one trait to the node."""
        self.request("PUT", f"/nodes/{uuid}/traits/{trait}", expected=(204,))

    def remove_trait(self, uuid: str, trait: str) -> None:
        """Remove one trait from the node."""
        self.request("DELETE", f"/nodes/{uuid}/traits/{trait}", expected=(204,))
