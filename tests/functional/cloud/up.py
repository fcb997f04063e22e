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

"""Bring the cloud up, step by step, each step skipped when done.

A process is started only if its recorded PID does not run; a one-off
step (a schema, a bootstrap) only if ``cloud.json`` does not list it as
done. Every wait is bounded and names the log to read when it fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from tests.functional.cloud import configs
from tests.functional.cloud import identity
from tests.functional.cloud import mariadb
from tests.functional.cloud import resources
from tests.functional.cloud.configs import Layout
from tests.functional.cloud.state import CloudState
from tests.functional.services.process import REPO_ROOT
from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import ServiceStartError
from tests.functional.services.process import child_env
from tests.functional.services.process import free_port
from tests.functional.services.process import write_ini
from tests.functional.services.rabbitmq_server import RabbitMQServer

CLOUD_VENV = REPO_ROOT / ".venv-cloud"
IRONIC_VENV = REPO_ROOT / ".venv-ironic"
PORTS = ("mariadb", "rabbitmq", "keystone", "placement", "glance",
         "network", "nova-api", "ironic")
#: The order processes start in; ``down`` stops them the other way round.
ORDER = ("mariadb", "epmd", "rabbitmq", "keystone", "placement", "glance",
         "network", "ironic", "nova-api", "nova-conductor", "nova-scheduler",
         *(f"nova-compute-{h}" for h in configs.FAKE_COMPUTES),
         f"nova-compute-{configs.IRONIC_COMPUTE}")
#: What the services talk to; stopped after them.
BACKENDS = ("mariadb", "epmd", "rabbitmq")
READY_TIMEOUT = 120.0


def say(message: str) -> None:
    print(f"cloud: {message}", file=sys.stderr, flush=True)


def _answers(url: str) -> Callable[[], bool]:
    return lambda: requests.get(url, timeout=3).status_code < 500


class Cloud:
    """The cloud of one state directory."""

    def __init__(self, base: Path):
        self.base = base
        self.logs = base / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state = CloudState.load(base)
        for key in PORTS:
            self.state.ports.setdefault(key, free_port())
        self.layout = Layout(base, self.state.ports)
        self._starting: dict[str, tuple[ServiceProcess,
                                        Callable[[], bool]]] = {}

    def save(self) -> None:
        self.state.save(self.base)

    # -- helpers ---------------------------------------------------------
    def bin(self, name: str, venv: Path = CLOUD_VENV) -> str:
        return str(venv / "bin" / name)

    def once(self, step: str, commands: Sequence[Sequence[str]]) -> None:
        """Run ``commands`` in turn, unless ``step`` is done already."""
        if step in self.state.done:
            return
        log = self.logs / f"setup-{step}.log"
        with open(log, "ab") as out:
            for argv in commands:
                result = subprocess.run(
                    list(argv), stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, env=child_env(),
                    cwd=self.base, timeout=600)
                if result.returncode != 0:
                    raise ServiceStartError(
                        f"{step}: {' '.join(argv)} exited with "
                        f"{result.returncode}; see {log}")
        self.state.done.append(step)

    def run(self, name: str, argv: Sequence[str],
            probe: Callable[[], bool] | None = None,
            env: dict[str, str] | None = None) -> None:
        """Start ``name`` unless it runs; its ``probe`` is waited for by
        :meth:`wait`, so that several services load at the same time."""
        if self.state.running(name):
            return
        log = self.logs / f"{name}.log"
        process = ServiceProcess(name, argv, log, env={**child_env(),
                                                       **(env or {})},
                                 cwd=self.base)
        process.start()
        assert process.pid is not None
        self.state.record(name, process.pid, log)
        self.save()
        if probe is not None:
            self._starting[name] = (process, probe)

    def wait(self, *names: str) -> None:
        """Wait (bounded) until each started one of ``names`` answers."""
        for name in names:
            started = self._starting.pop(name, None)
            if started is not None:
                process, probe = started
                process.wait_ready(probe, READY_TIMEOUT, interval=0.3)

    def uwsgi(self, name: str, port_key: str, target: list[str],
              env: dict[str, str], probe_path: str = "/") -> None:
        argv = [self.bin("uwsgi"), "--http-socket",
                f"127.0.0.1:{self.state.ports[port_key]}", *target,
                "--master", "--processes", "1", "--threads", "4",
                "--enable-threads", "--lazy-apps", "--die-on-term",
                "--need-app", "--buffer-size", "65535",
                "--procname-prefix-spaced", f"ndf-cloud-{name}",
                # --http-socket keeps no connection open after a response;
                # without this header clients reuse it and get a reset.
                "--add-header", "Connection: close"]
        url = f"{self.layout.url(port_key)}{probe_path}"
        self.run(name, argv, _answers(url), env)

        self.state.endpoints[name] = self.layout.url(port_key)

    # -- services --------------------------------------------------------
    def database_and_broker(self) -> None:
        if not self.state.running("mariadb"):
            process = mariadb.start(self.layout.data("mariadb"),
                                    self.state.ports["mariadb"])
            assert process.pid is not None
            self.state.record("mariadb", process.pid, process.log_path)
        else:
            # A cloud made before a database was added gets it too.
            mariadb.create_databases(self.layout.data("mariadb"))
        if not self.state.running("rabbitmq"):
            broker = RabbitMQServer(port=self.state.ports["rabbitmq"],
                                    base_dir=self.layout.data("rabbitmq"))
            broker.start()
            assert broker.pid is not None and broker.epmd_pid is not None
            data = self.layout.data("rabbitmq")
            self.state.record("epmd", broker.epmd_pid, data / "epmd.log")
            self.state.record("rabbitmq", broker.pid,
                              data / "log" / f"{broker.node}.log")
        self.state.endpoints["rabbitmq"] = self.layout.transport_url
        self.save()

    def write_configs(self) -> None:
        lay = self.layout
        write_ini(lay.etc("keystone") / "keystone.conf",
                  configs.keystone_conf(lay))
        write_ini(lay.etc("placement") / "placement.conf",
                  configs.placement_conf(lay))
        paste = lay.etc("glance") / "glance-api-paste.ini"
        shutil.copyfile(CLOUD_VENV / "etc/glance/glance-api-paste.ini", paste)
        write_ini(lay.etc("glance") / "glance-api.conf",
                  configs.glance_conf(lay, paste))
        nova = lay.etc("nova")
        shutil.copyfile(CLOUD_VENV / "etc/nova/api-paste.ini",
                        nova / "api-paste.ini")
        write_ini(nova / "nova.conf", configs.nova_conf(lay))
        for host in (*configs.FAKE_COMPUTES, configs.IRONIC_COMPUTE):
            write_ini(nova / f"compute-{host}.conf",
                      configs.compute_conf(lay, host))
        for host in configs.FAKE_COMPUTES:
            configs.write_node_identity(lay, host)
        write_ini(lay.etc("ironic") / "ironic.conf", configs.ironic_conf(lay))

    def schemas(self) -> None:
        """Every service's schema, in parallel (they are independent)."""
        lay, b = self.layout, self.bin
        ks = ["--config-file", str(lay.etc("keystone") / "keystone.conf")]
        nova = ["--config-file", str(lay.etc("nova") / "nova.conf")]
        keys = ["--keystone-user", "root", "--keystone-group", "root"]
        steps: dict[str, list[list[str]]] = {
            "keystone-schema": [
                [b("keystone-manage"), *ks, "db_sync"],
                [b("keystone-manage"), *ks, "fernet_setup", *keys],
                [b("keystone-manage"), *ks, "credential_setup", *keys],
                [b("keystone-manage"), *ks, "bootstrap",
                 "--bootstrap-password", configs.PASSWORD,
                 "--bootstrap-region-id", configs.REGION,
                 "--bootstrap-public-url", lay.keystone]],
            "placement-schema": [[b("placement-manage"), "--config-file",
                                  str(lay.etc("placement") / "placement.conf"),
                                  "db", "sync"]],
            "glance-schema": [[b("glance-manage"), "--config-file",
                               str(lay.etc("glance") / "glance-api.conf"),
                               "db_sync"]],
            "nova-schema": [
                [b("nova-manage"), *nova, "api_db", "sync"],
                [b("nova-manage"), *nova, "cell_v2", "map_cell0",
                 "--database_connection", lay.db("nova_cell0")],
                [b("nova-manage"), *nova, "cell_v2", "create_cell",
                 "--name", "cell1", "--verbose"],
                [b("nova-manage"), *nova, "db", "sync"]],
            "ironic-schema": [[b("ironic-dbsync", IRONIC_VENV),
                               "--config-file",
                               str(lay.etc("ironic") / "ironic.conf"),
                               "create_schema"]],
        }
        with ThreadPoolExecutor(len(steps)) as pool:
            futures = [pool.submit(self.once, k, v) for k, v in steps.items()]
            for future in futures:
                future.result()
        self.save()

    def apis(self) -> None:
        """Start every API at once (loading one takes 10 s or more), then
        wait for Keystone, fill it, and wait for the others."""
        lay = self.layout
        self.uwsgi("keystone", "keystone",
                   ["--module", "keystone.wsgi.api:application"],
                   {"OS_KEYSTONE_CONFIG_DIR": str(lay.etc("keystone"))}, "/v3")
        self.uwsgi("placement", "placement",
                   ["--module", "placement.wsgi.api:application"],
                   {"OS_PLACEMENT_CONFIG_DIR": str(lay.etc("placement"))})
        self.uwsgi("glance", "glance",
                   ["--module", "glance.wsgi.api:application"],
                   {"OS_GLANCE_CONFIG_DIR": str(lay.etc("glance"))})
        self.uwsgi("network", "network",
                   ["--wsgi-file", str(Path(__file__).with_name(
                       "network_standin.py"))], {})
        self.run("ironic", [self.bin("ironic", IRONIC_VENV), "--config-file",
                            str(lay.etc("ironic") / "ironic.conf")],
                 _answers(f"{lay.url('ironic')}/v1"))
        self.state.endpoints["ironic"] = lay.url("ironic")
        self.uwsgi("nova-api", "nova-api",
                   ["--module", "nova.wsgi.osapi_compute:application"],
                   {"OS_NOVA_CONFIG_DIR": str(lay.etc("nova"))})
        self.wait("keystone")
        if "identity" not in self.state.done:
            identity.populate(lay)
            self.state.done.append("identity")
        self.wait("placement", "glance", "network", "ironic", "nova-api")
        self.save()

    def nova_services(self) -> None:
        nova = self.layout.etc("nova")
        conf = ["--config-file", str(nova / "nova.conf")]
        self.run("nova-conductor", [self.bin("nova-conductor"), *conf])
        self.run("nova-scheduler", [self.bin("nova-scheduler"), *conf])
        for host in (*configs.FAKE_COMPUTES, configs.IRONIC_COMPUTE):
            self.run(f"nova-compute-{host}",
                     [self.bin("nova-compute"), *conf, "--config-file",
                      str(nova / f"compute-{host}.conf")])
        self.save()

    def ironic_nodes(self) -> None:
        """Enrol the Ironic nodes before the Ironic compute starts, so its
        first resource update reports them (the next is 60 s later)."""
        system = identity.connect(self.layout, "ndf-system-admin")
        self.state.facts["ironic_nodes"] = resources.ironic_nodes(system)
        self.save()

    def contents(self) -> None:
        """Flavors and the image; then wait for Nova to see every compute
        node, mapping new hosts to cell1 as they come."""
        lay = self.layout
        admin = identity.connect(lay)
        resources.flavors(admin)
        self.state.facts["image"] = resources.image(admin)
        self.save()
        expected = len(configs.FAKE_COMPUTES) + len(resources.IRONIC_NODES)
        nova = ["--config-file", str(lay.etc("nova") / "nova.conf")]
        deadline = time.monotonic() + READY_TIMEOUT
        found = 0
        while time.monotonic() < deadline:
            subprocess.run([self.bin("nova-manage"), *nova, "cell_v2",
                            "discover_hosts"], stdin=subprocess.DEVNULL,
                           capture_output=True, env=child_env(), timeout=120)
            found = resources.wait_hypervisors(admin, expected, 10)
            if found >= expected:
                break
        if found < expected:
            raise ServiceStartError(
                f"Nova lists {found} of {expected} compute nodes after "
                f"{READY_TIMEOUT:.0f} s; see {self.logs}/nova-compute-*.log")
        self.save()

    def finish(self) -> None:
        clouds = identity.write_clouds_yaml(self.layout)
        env = self.base / "env"
        env.write_text(f"export OS_CLIENT_CONFIG_FILE={clouds}\n"
                       f"export OS_CLOUD={identity.DEFAULT_CLOUD}\n")
        self.state.facts.update(clouds_yaml=str(clouds), env_file=str(env),
                                default_cloud=identity.DEFAULT_CLOUD,
                                clouds=list(identity.CLOUDS))
        self.save()


def up(base: Path) -> Cloud:
    """Start whatever of the cloud does not run yet; return it."""
    started = time.monotonic()
    cloud = Cloud(base)
    say(f"state in {base}/cloud.json")
    steps = [("MariaDB and RabbitMQ", cloud.database_and_broker),
             ("configuration", cloud.write_configs),
             ("schemas", cloud.schemas),
             ("Keystone, Placement, Glance, network stand-in, Ironic, "
              "nova-api", cloud.apis),
             ("Ironic nodes", cloud.ironic_nodes),
             ("nova-conductor, nova-scheduler, 4 nova-compute",
              cloud.nova_services),
             ("flavors, image, compute nodes", cloud.contents),
             ("clouds.yaml", cloud.finish)]
    for what, step in steps:
        t0 = time.monotonic()
        step()
        say(f"{what}: {time.monotonic() - t0:.1f} s")
    cloud.state.facts["up_seconds"] = round(time.monotonic() - started, 1)
    cloud.save()
    return cloud
