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
import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path

import requests

from tests.functional.cloud import configs
from tests.functional.cloud import identity
from tests.functional.cloud import mariadb
from tests.functional.cloud import plan
from tests.functional.cloud import resources
from tests.functional.cloud import schemas
from tests.functional.cloud.configs import Layout
from tests.functional.cloud.plan import Step
from tests.functional.cloud.schemas import IRONIC_VENV
from tests.functional.cloud.state import CloudState
from tests.functional.services.process import REPO_ROOT
from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import ServiceStartError
from tests.functional.services.process import child_env
from tests.functional.services.process import free_port
from tests.functional.services.process import write_ini
from tests.functional.services.rabbitmq_server import RabbitMQServer

CLOUD_VENV = REPO_ROOT / ".venv-cloud"
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
        #: The steps run in threads: every change to the state, and its
        #: save, holds this.
        self.lock = threading.RLock()

    def save(self) -> None:
        with self.lock:
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
        with self.lock:
            self.state.done.append(step)
            self.save()

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
        with self.lock:
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
        with self.lock:
            self.state.endpoints[name] = self.layout.url(port_key)

    # -- services --------------------------------------------------------
    def database(self) -> None:
        if not self.state.running("mariadb"):
            process = mariadb.start(self.layout.data("mariadb"),
                                    self.state.ports["mariadb"])
            assert process.pid is not None
            with self.lock:
                self.state.record("mariadb", process.pid, process.log_path)
                self.save()
        else:
            # A cloud made before a database was added gets it too.
            mariadb.create_databases(self.layout.data("mariadb"))

    def broker(self) -> None:
        if not self.state.running("rabbitmq"):
            broker = RabbitMQServer(port=self.state.ports["rabbitmq"],
                                    base_dir=self.layout.data("rabbitmq"))
            broker.start()
            assert broker.pid is not None and broker.epmd_pid is not None
            data = self.layout.data("rabbitmq")
            with self.lock:
                self.state.record("epmd", broker.epmd_pid, data / "epmd.log")
                self.state.record("rabbitmq", broker.pid,
                                  data / "log" / f"{broker.node}.log")
        with self.lock:
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

    def schema(self, service: str) -> None:
        """``service``'s schema (and Keystone's keys and bootstrap)."""
        self.once(f"{service}-schema",
                  schemas.commands(self.layout, service, self.bin))

    def keystone(self) -> None:
        """Its schema, its API, then the projects, users and roles."""
        self.schema("keystone")
        self.uwsgi("keystone", "keystone",
                   ["--module", "keystone.wsgi.api:application"],
                   {"OS_KEYSTONE_CONFIG_DIR": str(self.layout.etc("keystone"))},
                   "/v3")
        self.wait("keystone")
        if "identity" not in self.state.done:
            identity.populate(self.layout)
            with self.lock:
                self.state.done.append("identity")
                self.save()

    def api(self, service: str, module: str, config_env: str) -> None:
        """``service``'s schema, then its API under uWSGI, answering."""
        self.schema(service)
        name = "nova-api" if service == "nova" else service
        self.uwsgi(name, name, ["--module", module],
                   {config_env: str(self.layout.etc(service))})
        self.wait(name)

    def network(self) -> None:
        self.uwsgi("network", "network",
                   ["--wsgi-file", str(Path(__file__).with_name(
                       "network_standin.py"))], {})
        self.wait("network")

    def ironic(self) -> None:
        lay = self.layout
        self.schema("ironic")
        self.run("ironic", [self.bin("ironic", IRONIC_VENV), "--config-file",
                            str(lay.etc("ironic") / "ironic.conf")],
                 _answers(f"{lay.url('ironic')}/v1"))
        with self.lock:
            self.state.endpoints["ironic"] = lay.url("ironic")
        self.wait("ironic")

    def nova_control(self) -> None:
        """nova-conductor and nova-scheduler: the database, RPC and the
        catalog."""
        conf = ["--config-file", str(self.layout.etc("nova") / "nova.conf")]
        for name in ("nova-conductor", "nova-scheduler"):
            self.run(name, [self.bin(name), *conf])

    def computes(self, hosts: Sequence[str]) -> None:
        nova = self.layout.etc("nova")
        for host in hosts:
            name = f"nova-compute-{host}"
            if self.state.running(name):
                continue
            self.run(name, [self.bin("nova-compute"), "--config-file",
                            str(nova / "nova.conf"), "--config-file",
                            str(nova / f"compute-{host}.conf")])

    def ironic_nodes(self) -> None:
        """Enrol the Ironic nodes before the Ironic compute starts, so its
        first resource update reports them (the next is 60 s later)."""
        uuids = resources.ironic_nodes(
            lambda: identity.connect(self.layout, "ndf-system-admin"))
        with self.lock:
            self.state.facts["ironic_nodes"] = uuids
            self.save()

    def flavors_and_image(self) -> None:
        admin = identity.connect(self.layout)
        resources.flavors(admin)
        image = resources.image(admin)
        with self.lock:
            self.state.facts["image"] = image
            self.save()

    def compute_nodes(self) -> None:
        """Wait for Nova to see every compute node, mapping new hosts to
        cell1 once placement has their providers: ``GET /os-hypervisors``
        lists a node only once its host is mapped (nova/api/openstack/
        compute/hypervisors.py skips HostMappingNotFound), and each run of
        nova-manage costs seconds of CPU."""
        lay = self.layout
        admin = identity.connect(lay)
        expected = len(configs.FAKE_COMPUTES) + len(resources.IRONIC_NODES)
        nova = ["--config-file", str(lay.etc("nova") / "nova.conf")]
        deadline = time.monotonic() + READY_TIMEOUT
        found = 0
        while time.monotonic() < deadline:
            resources.wait_providers(admin, expected,
                                     deadline - time.monotonic())
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

    def finish(self) -> None:
        clouds = identity.write_clouds_yaml(self.layout)
        env = self.base / "env"
        env.write_text(f"export OS_CLIENT_CONFIG_FILE={clouds}\n"
                       f"export OS_CLOUD={identity.DEFAULT_CLOUD}\n")
        with self.lock:
            self.state.facts.update(clouds_yaml=str(clouds),
                                    env_file=str(env),
                                    default_cloud=identity.DEFAULT_CLOUD,
                                    clouds=list(identity.CLOUDS))
            self.save()

    def steps(self) -> list[Step]:
        """What ``up`` does, each step with the steps it needs.

        Measured on the 2-core machine (one after another): a core idled
        through the schemas' tail, the APIs' loading and the Ironic nodes'
        state changes, 40 core-seconds of 140 s; each step now starts as
        soon as what it needs is there.
        """
        conf = "configuration"
        apis = ("Keystone", "Placement")
        return [
            Step("MariaDB", self.database),
            Step("RabbitMQ", self.broker),
            Step(conf, self.write_configs),
            Step("network stand-in", self.network, (conf,)),
            Step("Keystone", self.keystone, ("MariaDB", conf)),
            Step("Placement", lambda: self.api(
                "placement", "placement.wsgi.api:application",
                "OS_PLACEMENT_CONFIG_DIR"), ("MariaDB", conf)),
            Step("Glance", lambda: self.api(
                "glance", "glance.wsgi.api:application",
                "OS_GLANCE_CONFIG_DIR"), ("MariaDB", conf)),
            Step("Ironic", self.ironic, ("MariaDB", "RabbitMQ", conf)),
            Step("nova-api", lambda: self.api(
                "nova", "nova.wsgi.osapi_compute:application",
                "OS_NOVA_CONFIG_DIR"), ("MariaDB", conf)),
            # Nova's schema is nova-api's step. The scheduler builds its
            # placement client once, when it starts (nova/scheduler/
            # manager.py SchedulerManager.__init__): started before the
            # catalog has placement, it answered every request with
            # ServiceDisabledException until restarted.
            Step("nova-conductor, nova-scheduler", self.nova_control,
                 ("nova-api", "RabbitMQ", "Keystone")),
            # A compute reports to placement when it starts.
            Step("3 fake nova-compute",
                 lambda: self.computes(configs.FAKE_COMPUTES),
                 ("nova-conductor, nova-scheduler", *apis)),
            Step("Ironic nodes", self.ironic_nodes, ("Ironic", "Keystone")),
            Step("Ironic nova-compute",
                 lambda: self.computes([configs.IRONIC_COMPUTE]),
                 ("Ironic nodes", "nova-conductor, nova-scheduler", *apis)),
            Step("flavors, image", self.flavors_and_image,
                 ("nova-api", "Glance", "Keystone")),
            Step("compute nodes", self.compute_nodes,
                 ("3 fake nova-compute", "Ironic nova-compute")),
            Step("clouds.yaml", self.finish,
                 ("compute nodes", "flavors, image", "network stand-in")),
        ]


def up(base: Path) -> Cloud:
    """Start whatever of the cloud does not run yet; return it."""
    started = time.monotonic()
    cloud = Cloud(base)
    say(f"state in {base}/cloud.json")
    plan.run(cloud.steps(), lambda t: say(
        f"{t.name}: {t.took:.1f} s (from {t.began:.1f} s)"))
    with cloud.lock:
        cloud.state.facts["up_seconds"] = round(time.monotonic() - started, 1)
        cloud.save()
    return cloud
