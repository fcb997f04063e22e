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
database and ``rpc_transport = none``, so it needs no other service. The
process helpers are in :mod:`tests.functional.services.process` and the
client that drives its nodes in :mod:`tests.functional.services.ironic_client`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import requests

from tests.functional.services import forkserver
from tests.functional.services.ironic_client import FAKE_HARDWARE
from tests.functional.services.ironic_client import IronicTestClient
from tests.functional.services.process import ADDRESS_IN_USE
from tests.functional.services.process import REPO_ROOT
from tests.functional.services.process import LoopbackService
from tests.functional.services.process import ServiceFixture
from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import ServiceStartError
from tests.functional.services.process import child_env
from tests.functional.services.process import http_session
from tests.functional.services.process import make_service_dir
from tests.functional.services.process import write_ini

IRONIC_VENV_ENV = "NDF_IRONIC_VENV"
"""Environment variable naming the venv that has ``ironic`` installed."""

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


def ironic_venv() -> Path:
    """Return the venv holding ironic (``$NDF_IRONIC_VENV`` or default)."""
    configured = os.environ.get(IRONIC_VENV_ENV)
    return Path(configured) if configured else REPO_ROOT / ".venv-ironic"


def ironic_config(
    state_dir: Path, port: int, host: str = "127.0.0.1", debug: bool = False,
    conductor: str | None = None,
) -> dict[str, dict[str, str | int | bool]]:
    """Return the ironic.conf sections for an isolated fake-hardware server;
    ``conductor``: its conductor's name (``[DEFAULT] host``)."""
    default: dict[str, str | int | bool] = {
        "auth_strategy": "noauth",
        # Only the all-in-one ``ironic`` command accepts 'none': API and
        # conductor share one process and call each other directly.
        "rpc_transport": "none",
        "host": conductor or f"ndf-ironic-{port}",
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
        # sqlite allows one writer at a time; the API and the conductor are
        # two. Wait up to 30 s for the lock (pysqlite's ``timeout``, 5 s by
        # default) instead of answering 500 "database is locked" under
        # load, as a production database would not.
        "database": {
            "connection": f"sqlite:///{state_dir / 'ironic.db'}?timeout=30"},
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
    #: Its state dir is removed with it, so a clean shutdown buys nothing,
    #: and one takes 1.5 to 2.5 s (cotyledon stops the conductor's
    #: periodics, then its RPC server): SIGKILL after half a second.
    stop_grace = 0.5

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
        #: The conductor's name of the current start (its probe's proof).
        self.conductor = ""
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
        # A name of this start's own, which the readiness probe looks for:
        # another test's Ironic that took the port first answers the probe
        # too (seen in CI: two servers picked one free port, ours failed to
        # bind and the test used the other's nodes).
        self.conductor = f"{self.state_dir.name}-{self.port}"
        sections = ironic_config(self.state_dir, self.port, self.host,
                                 self.debug, conductor=self.conductor)
        for section, options in self.extra_config.items():
            sections[section] = {**sections.get(section, {}), **options}
        write_ini(conf, sections)
        if self.reuse_schema:
            template = schema_template(dbsync_bin, self.ready_timeout)
            shutil.copyfile(template, self.state_dir / "ironic.db")
        else:
            create_schema(dbsync_bin, conf, self.ready_timeout)
        argv = [str(ironic_bin), "--config-file", str(conf)]
        log = self.state_dir / "ironic.log"
        if forkserver.enabled():
            # The console script's own entry point, forked from a process
            # that imported it once (forkserver.py says why).
            server = forkserver.shared(self._bin("python"),
                                       "ironic.command.singleprocess", "main")
            self._process = forkserver.ForkedProcess(
                server, "ironic", argv, log, cwd=self.state_dir)
        else:
            self._process = ServiceProcess("ironic", argv, log,
                                           env=child_env(), cwd=self.state_dir)
        self._process.start()
        # A running PID proves nothing: the API is served by a worker that
        # may be failing.  The driver endpoint needs the conductor too.
        probe_url = f"{self.url}/v1/drivers/{FAKE_HARDWARE}"

        def ours(resp: requests.Response) -> bool:
            return resp.status_code == 200 and self.conductor in (
                resp.json().get("hosts") or ())

        with http_session() as session:
            self._wait_ready(
                lambda: ours(session.get(probe_url, timeout=2)),
                IRONIC_FATAL_LOG_MARKERS,
            )



class IronicServerFixture(ServiceFixture):
    """Runs an :class:`IronicServer` for the test's lifetime.

    Exposes ``url``, ``server`` and a ready :class:`IronicTestClient` as
    ``client``; the server log is attached as the detail ``ironic-log``.
    """

    server: IronicServer
    client: IronicTestClient

    def __init__(
        self,
        ready_timeout: float = 60.0,
        debug: bool = False,
        venv: Path | None = None,
        reuse_schema: bool = True,
        extra_config: Mapping[str, Mapping[str, str | int | bool]] | None = None,
    ):
        super().__init__(
            IronicServer(venv=venv, ready_timeout=ready_timeout, debug=debug,
                         reuse_schema=reuse_schema,
                         extra_config=extra_config),
            IronicTestClient,
        )
