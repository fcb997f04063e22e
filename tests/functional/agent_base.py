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


"""nova-drain-agent as a real process on a real broker, Ironic and placement.

Nova's API, which the agent reads only for its compute node records, is
a small stand-in on loopback (``NovaApiStandin``): the records of the
test's Ironic nodes, as ``GET /os-hypervisors/detail`` shows them.
"""
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from http import server as http_server
from pathlib import Path
from typing import Any

import fixtures
import testtools

from nova_drain_filters import traits
from tests.functional.services import ironic_server
from tests.functional.services import placement_server
from tests.functional.services import process
from tests.functional.services import rabbitmq_server

BM = traits.BAREMETAL_UNAVAILABLE
AGENT = Path(sys.executable).parent / "nova-drain-agent"


class NovaApiStandin:
    """Nova's version document and hypervisor list on a loopback port."""

    def __init__(self) -> None:
        self.nodes: list[str] = []
        standin = self

        class Handler(http_server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if "/os-hypervisors/detail" in self.path:
                    body: Any = {"hypervisors": [{
                        "id": uuid, "hypervisor_hostname": uuid,
                        "hypervisor_type": "ironic", "state": "up",
                        "status": "enabled",
                        "service": {"host": "bm-compute", "id": "svc-1"}}
                        for uuid in list(standin.nodes)]}
                elif "/os-services" in self.path:
                    body = {"services": [{
                        "id": "svc-1", "host": "bm-compute", "state": "up",
                        "status": "enabled", "forced_down": False,
                        "updated_at": None}]}
                else:
                    body = {"version": {
                        "id": "v2.1", "status": "CURRENT", "version": "2.96",
                        "min_version": "2.1", "links": []}}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http_server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v2.1"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class AgentTestBase(testtools.TestCase):
    """A broker, a publishing Ironic, placement, Nova's stand-in, and
    ``NODES`` available Ironic nodes, each with its provider."""

    NODES = 2
    #: Long: the tests show that events, not the reconcile, write.
    INTERVAL = 600

    def setUp(self) -> None:
        super().setUp()
        self.broker = self.useFixture(
            rabbitmq_server.RabbitMQServerFixture()).server
        ironic_fx = self.useFixture(ironic_server.IronicServerFixture(
            extra_config=rabbitmq_server.ironic_notification_config(
                self.broker.transport_url)))
        placement_fx = self.useFixture(
            placement_server.PlacementServerFixture())
        self.ironic = ironic_fx.client
        #: Ironic's SQLite database, where a test may hold a node's lock.
        self.ironic_db = ironic_fx.server.state_dir / "ironic.db"
        self.placement = placement_fx.client
        self.placement_url = placement_fx.url
        self.nova = NovaApiStandin()
        self.addCleanup(self.nova.close)
        self.tmp = Path(self.useFixture(fixtures.TempDir()).path)
        self.nodes = []
        for i in range(self.NODES):
            uuid = self.ironic.make_available_node(name=f"bm-{i}")["uuid"]
            self.ironic.set_power_state(uuid, "power off")
            self.placement.create_resource_provider(uuid, uuid=uuid)
            self.nodes.append(uuid)
        self.nova.nodes = list(self.nodes)
        self.config = self.tmp / "nova.conf"
        self.metrics_port = process.free_port()
        process.write_ini(self.config, {
            "DEFAULT": {"debug": True},
            "drain_filters": {
                "baremetal_notifications_url": self.broker.transport_url,
                "ironic_missing_max_fraction": 0.5},
            "drain_agent": {
                "reconcile_interval": self.INTERVAL, "batch_timeout": 1,
                "max_marked_fraction": 1.0, "metrics_port": 0,
                "compute_endpoint": self.nova.url,
                "pool": "nova-drain-agent-test"},
            "ironic": {"auth_type": "none",
                       "endpoint_override": ironic_fx.url},
            "placement": {"auth_type": "admin_token", "token": "admin",
                          "endpoint": placement_fx.url,
                          "endpoint_override": placement_fx.url},
        })

    def scrape(self, port: int) -> dict[str, float]:
        """The agent's ``/metrics``, each sample by its name and labels."""
        from prometheus_client import parser

        text = process.http_session().get(
            f"http://127.0.0.1:{port}/metrics", timeout=10).text
        return {sample.name + json.dumps(sample.labels, sort_keys=True):
                sample.value for family in parser.text_string_to_metric_families(
                    text) for sample in family.samples}

    def agent(self, name: str = "agent", **extra: Any
              ) -> process.ServiceProcess:
        """Start an agent; return once it reconciled and reads its queue."""
        argv = [str(AGENT), "--config-file", str(self.config)]
        if extra:
            more = self.tmp / f"{name}.conf"
            process.write_ini(more, {"drain_agent": extra})
            argv += ["--config-file", str(more)]
        proc = process.ServiceProcess(
            name, argv, self.tmp / f"{name}.log", env=process.child_env(),
            cwd=process.REPO_ROOT)
        proc.start()
        self.addCleanup(proc.stop)
        self.addDetail(f"{name}-log", process.log_detail(proc.log_tail))
        log = proc.log_path
        proc.wait_ready(lambda: "Reconciled" in log.read_text(
            "utf-8", "replace"), timeout=60,
            fatal_markers=("Traceback",))
        return proc

    def hold_lock(self, uuid: str, holder: str | None) -> None:
        """Hold (or, with None, free) a node's lock as a conductor mid-step
        does: Ironic's API then answers 409 NodeLocked to a trait write."""
        with sqlite3.connect(self.ironic_db, timeout=30) as db:
            db.execute("UPDATE nodes SET reservation = ? WHERE uuid = ?",
                       (holder, uuid))

    def consumers(self) -> int:
        queue = self.broker.queues().get("nova-drain-agent-test") or {}
        return int(queue.get("consumers") or 0)

    def queued(self) -> int:
        """Messages in the pool's queue, ready or taken and not acked."""
        queue = self.broker.queues().get("nova-drain-agent-test") or {}
        return int(queue.get("messages") or 0)

    def marked(self, uuid: str) -> bool:
        """On both sides: placement's provider and the Ironic node."""
        return (BM in self.placement.get_provider_traits(uuid)
                and BM in self.ironic.get_traits(uuid))

    def cleared(self, uuid: str) -> bool:
        return (BM not in self.placement.get_provider_traits(uuid)
                and BM not in self.ironic.get_traits(uuid))

    def wait_for(self, what: str, check: Callable[[], bool],
                 timeout: float = 30.0) -> float:
        """Seconds until ``check`` holds; fails after ``timeout``."""
        start = time.monotonic()
        while not check():
            if time.monotonic() - start > timeout:
                self.fail(f"no {what} within {timeout} s")
            time.sleep(0.1)
        return time.monotonic() - start


def text(value: str) -> Any:
    """A test detail of plain text."""
    from testtools import content

    return content.text_content(value)
