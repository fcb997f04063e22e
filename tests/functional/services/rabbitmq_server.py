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

"""Run a private RabbitMQ broker on loopback for tests.

Debian's ``rabbitmq-server`` package provides the broker (``tools/setup.sh``
installs it). Each broker gets its own node name, AMQP port, distribution
port, ``epmd`` port and a temporary directory for its database, logs, PID
file, plugin list (none) and feature flags, so it shares nothing with a
system broker or with another test's.

The broker script is run directly (``/usr/lib/rabbitmq/bin``), not through
the Debian wrapper in ``/usr/sbin``, which writes to ``/var/log/rabbitmq``.
As root the broker runs as the ``rabbitmq`` user (``setpriv``), owning its
directory, as the package intends; otherwise as the current user.

The broker's own ``epmd`` is started first, on a private port, so that it is
ours to stop by PID. The broker is stopped by PID too: SIGTERM, which the
broker script hands to the Erlang VM, whose signal handler stops RabbitMQ
cleanly (``rabbit_prelaunch_sighandler``); SIGKILL if it has not exited
within its grace. ``rabbitmqctl stop`` did the same, but boots an Erlang VM
of its own first: 3 to 5 s of CPU per broker on two cores.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import amqp
import fixtures

from tests.functional.services.process import LoopbackService
from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import ServiceStartError
from tests.functional.services.process import child_env
from tests.functional.services.process import free_port
from tests.functional.services.process import log_detail

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
"""Where Debian's package puts the broker's own scripts."""

RABBITMQ_USER = "rabbitmq"
"""The user Debian's package creates for the broker."""

USER = PASSWORD = "guest"
"""RabbitMQ's default user; it may log in from loopback only."""

INSTALL_HINT = (
    "install Debian's rabbitmq-server package (tools/setup.sh does it as "
    "root or through sudo): the event-mode tests run a private broker"
)


def _as_broker_user() -> list[str]:
    """The argv prefix that runs a command as the broker's user."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={RABBITMQ_USER}", f"--regid={RABBITMQ_USER}",
            "--clear-groups", "--"]


def _chown_to_broker_user(path: Path) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam(RABBITMQ_USER)
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, entry.pw_uid, entry.pw_gid)


def _broker_tmp() -> str | None:
    """A temp dir the broker's user can reach, or None for the default.

    Nova's harness points ``TMPDIR`` into root-only (0700) directories; the
    ``rabbitmq`` user could not reach a broker dir made there (nor write
    its Erlang cookie), so a broker restarted inside a test goes to /tmp.
    """
    if os.geteuid() != 0:
        return None
    path = Path(tempfile.gettempdir()).resolve()
    for part in (path, *path.parents):
        if not os.stat(part).st_mode & 0o001:
            return "/tmp"
    return str(path)


def drain_event_options(transport_url: str) -> dict[str, object]:
    """nova.conf's ``[drain_filters]`` for event mode on this broker, as the
    event-mode tests write it: a 600 s refresh interval, so what the view
    learns between listings comes by notification."""
    return {
        "baremetal_notifications": True,
        "baremetal_notifications_url": transport_url,
        "baremetal_notifications_fallback_interval": 1,
        "baremetal_refresh_interval": 600,
        "baremetal_max_snapshot_age": 900,
    }


def ironic_notification_config(
    transport_url: str,
) -> dict[str, dict[str, str | int | bool]]:
    """ironic.conf sections that make Ironic publish versioned notifications.

    Ironic sends them through its notification transport
    (``[oslo_messaging_notifications]``), which works with
    ``rpc_transport = none``; topic and exchange are Ironic's defaults, so
    they land in the ``ironic`` exchange under ``ironic_versioned_notifications``.
    A notification that cannot be sent is dropped after one retry, so
    Ironic's API keeps working while the broker is down.
    """
    return {
        "DEFAULT": {
            "notification_level": "info",
            "versioned_notifications_topics": "ironic_versioned_notifications",
        },
        "oslo_messaging_notifications": {
            "driver": "messagingv2",
            "transport_url": transport_url,
            # The default (-1) retries for ever, inside the API request:
            # with the broker down every node change would hang.
            "retry": 1,
        },
    }


class RabbitMQServer(LoopbackService):
    """A private ``rabbitmq-server`` bound to a loopback port."""

    name = "rabbitmq"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout: float = 90.0,
        base_dir: Path | None = None,
    ):
        super().__init__(host, port, ready_timeout)
        self._epmd: ServiceProcess | None = None
        self._env: dict[str, str] = {}
        #: A directory of the caller's that outlives this object (the
        #: cloud of tools/cloud.sh): the broker is not stopped at exit and
        #: its files are kept. None: a temp dir, removed on stop.
        self.base_dir = base_dir

    @property
    def epmd_pid(self) -> int | None:
        """PID of the broker's own epmd while it runs."""
        return self._epmd.pid if self._epmd is not None else None

    @property
    def node(self) -> str:
        """The Erlang node name, for ``rabbitmqctl -n``.

        A broker in a temp dir has that dir's random part in its name, so
        that it is told from another broker that picked the same free
        port (``_amqp_answers``). The cloud's broker keeps one name for
        its port: its database, kept in ``base_dir``, is the node's.
        """
        if self.base_dir is None and self.state_dir is not None:
            tag = self.state_dir.name.rsplit("-", 1)[-1]
            return f"ndf-{self.port}-{tag}@localhost"
        return f"ndf-{self.port}@localhost"

    @property
    def transport_url(self) -> str:
        """An oslo.messaging transport URL for this broker."""
        return f"rabbit://{USER}:{PASSWORD}@{self.host}:{self.port}/"

    def _start_once(self) -> None:
        assert self.port is not None
        server_bin = RABBITMQ_BIN / "rabbitmq-server"
        if not server_bin.exists() or shutil.which("epmd") is None:
            raise ServiceStartError(f"{server_bin} or epmd not found; "
                                    f"{INSTALL_HINT}")
        if self.base_dir is not None:
            self.base_dir.mkdir(parents=True, exist_ok=True)
            base = self.base_dir
        else:
            self.state_dir = Path(tempfile.mkdtemp(prefix="ndf-rabbitmq-",
                                                   dir=_broker_tmp()))
            atexit.register(self.stop)
            base = self.state_dir
        (base / "enabled_plugins").write_text("[].\n")
        epmd_port = free_port(self.host)
        self._env = child_env({
            "HOME": str(base),  # the Erlang cookie goes here
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": self.host,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": self.host,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port(self.host)),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_FEATURE_FLAGS_FILE": str(base / "feature_flags"),
            # No system-wide config or env file may leak in.
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
        })
        _chown_to_broker_user(base)
        os.chmod(base, 0o755)
        self._epmd = ServiceProcess(
            "epmd", _as_broker_user() + [
                "epmd", "-port", str(epmd_port), "-address", self.host],
            base / "epmd.log", env=self._env, cwd=base)
        self._epmd.start()
        self._process = ServiceProcess(
            "rabbitmq", _as_broker_user() + [str(server_bin)],
            base / "rabbitmq.log", env=self._env, cwd=base)
        self._process.start()
        try:
            self._wait_ready(self._amqp_answers)
        except ServiceStartError as exc:
            tail = self.broker_log()
            if "eaddrinuse" in tail:
                # LoopbackService.start retries on a new port for this.
                raise ServiceStartError(str(exc), "Address already in use")
            raise ServiceStartError(f"{exc}\n--- broker log ---\n{tail}",
                                    exc.log_tail) from None

    def _amqp_answers(self) -> bool:
        """True once this start's broker answers on the port.

        Another broker that took the port first would answer too: two
        tests may pick one free port, and the second cannot bind. Its
        cluster name is its own node's (RabbitMQ's default), so an answer
        from it keeps this probe waiting until this broker's failure to
        bind shows, which ``start`` retries on a new port.
        """
        conn = amqp.Connection(f"{self.host}:{self.port}", userid=USER,
                               password=PASSWORD, connect_timeout=2)
        try:
            conn.connect()
        except (OSError, amqp.exceptions.AMQPError):
            conn.collect()
            return False
        name = (conn.server_properties or {}).get("cluster_name", "")
        conn.close()
        if isinstance(name, bytes):
            name = name.decode("utf-8", "replace")
        return str(name).split("@", 1)[0] == self.node.split("@", 1)[0]

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl -n NODE ARGS``; return its output or raise."""
        argv = _as_broker_user() + [str(RABBITMQ_BIN / "rabbitmqctl"),
                                    "-n", self.node, *args]
        result = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            env=self._env, cwd=self.state_dir or self.base_dir,
            timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} exited with "
                               f"{result.returncode}: {result.stderr[-2000:]}")
        return result.stdout

    def queues(self) -> dict[str, dict[str, Any]]:
        """{queue name: {consumers, messages, ...}} as the broker has them."""
        out = self.ctl("list_queues", "-q", "--formatter", "json",
                       "name", "consumers", "messages", "arguments")
        return {q["name"]: q for q in json.loads(out or "[]")}

    def set_policy(self, name: str, pattern: str,
                   definition: Mapping[str, Any]) -> None:
        """``rabbitmqctl set_policy --apply-to queues``."""
        self.ctl("set_policy", "--apply-to", "queues", name, pattern,
                 json.dumps(dict(definition)))

    def broker_log(self, max_chars: int = 6000) -> str:
        """The end of the broker's own log file (not its console)."""
        base = self.state_dir or self.base_dir
        if base is None:
            return self._final_log[-max_chars:]
        path = base / "log" / f"{self.node}.log"
        try:
            return path.read_text("utf-8", "replace")[-max_chars:]
        except OSError as exc:
            return f"<no log: {exc}>"

    def stop(self) -> None:
        """SIGTERM the broker, SIGKILL it after its grace, then its epmd.

        The port is kept, so ``start()`` brings the broker back where its
        clients expect it.
        """
        process = self._process
        if process is not None:
            process.stop(grace=self.stop_grace)
        # Read after the broker exited: its own log is written lazily.
        log = self.broker_log() if process is not None else ""
        epmd, self._epmd = self._epmd, None
        super().stop()
        if epmd is not None:
            epmd.stop(grace=5)
        if log:
            self._final_log = log


class RabbitMQServerFixture(fixtures.Fixture):
    """Fixture that runs a :class:`RabbitMQServer` for the test's lifetime.

    Exposes ``server`` and ``transport_url``; the broker's log is attached
    as the detail ``rabbitmq-log``.
    """

    def __init__(self, ready_timeout: float = 90.0) -> None:
        super().__init__()
        self.server = RabbitMQServer(ready_timeout=ready_timeout)
        self.transport_url = ""

    def _setUp(self) -> None:
        self.addCleanup(self.server.stop)
        self.addDetail("rabbitmq-log", log_detail(self.server.broker_log))
        self.server.start()
        self.transport_url = self.server.transport_url
