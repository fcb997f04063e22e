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

"""Smoke tests: the real Ironic and Placement servers start and work."""

from __future__ import annotations

import os
import re
import time
import uuid

import fixtures
import testtools

from tests.functional.services import forkserver
from tests.functional.services.ironic_client import IronicTestClient
from tests.functional.services.ironic_server import IronicServer
from tests.functional.services.ironic_server import IronicServerFixture
from tests.functional.services.placement_server import SERVING
from tests.functional.services.placement_server import PlacementServer
from tests.functional.services.placement_server import PlacementServerFixture
from tests.functional.services.placement_server import PlacementTestClient
from tests.functional.services.process import ServiceStartError
from tests.functional.services.rabbitmq_server import RabbitMQServer
from tests.functional.services.rabbitmq_server import RabbitMQServerFixture


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class IronicServerSmokeTest(testtools.TestCase):
    """Drive a fake-hardware node through real Ironic state changes."""

    def setUp(self) -> None:
        super().setUp()
        self.ironic = self.useFixture(IronicServerFixture())
        self.client: IronicTestClient = self.ironic.client

    def test_node_lifecycle(self) -> None:
        node = self.client.create_node(name="ndf-smoke-0", resource_class="baremetal")
        node_id = node["uuid"]
        self.assertEqual("enroll", node["provision_state"])
        self.assertEqual("baremetal", node["resource_class"])
        self.assertEqual("fake-hardware", node["driver"])

        self.assertEqual("manageable", self.client.manage(node_id)["provision_state"])
        self.assertEqual("available", self.client.provide(node_id)["provision_state"])

        self.client.add_trait(node_id, "CUSTOM_NDF_SMOKE")
        self.assertEqual(["CUSTOM_NDF_SMOKE"], self.client.get_traits(node_id))
        self.client.remove_trait(node_id, "CUSTOM_NDF_SMOKE")
        self.assertEqual([], self.client.get_traits(node_id))

        instance = str(uuid.uuid4())
        node = self.client.deploy(node_id, instance_uuid=instance)
        self.assertEqual("active", node["provision_state"])
        self.assertEqual(instance, node["instance_uuid"])

        node = self.client.undeploy(node_id)
        self.assertEqual("available", node["provision_state"])
        self.assertIsNone(node["instance_uuid"])

        node = self.client.set_maintenance(node_id, True, reason="ndf smoke")
        self.assertTrue(node["maintenance"])
        self.assertEqual("ndf smoke", node["maintenance_reason"])
        node = self.client.set_maintenance(node_id, False)
        self.assertFalse(node["maintenance"])
        self.assertIsNone(node["maintenance_reason"])

        self.client.delete_node(node_id)
        self.assertEqual([], self.client.list_nodes())

    def test_manual_clean_and_clean_failed(self) -> None:
        node_id = self.client.make_available_node(name="ndf-smoke-1")["uuid"]
        self.client.manage(node_id)
        self.assertEqual(
            "manageable", self.client.clean_manual(node_id)["provision_state"]
        )

        node = self.client.fail_cleaning(node_id)
        self.assertEqual("clean failed", node["provision_state"])
        self.assertIn("ndf_no_such_step", node["last_error"])

        self.assertEqual("manageable", self.client.manage(node_id)["provision_state"])
        node = self.client.set_power_state(node_id, "power off")
        self.assertEqual("power off", node["power_state"])

    def test_server_stops_by_pid(self) -> None:
        pid = self.ironic.server.pid
        self.assertIsNotNone(pid)
        assert pid is not None
        self.ironic.server.stop()
        self.assertFalse(_pid_alive(pid))
        self.ironic.server.stop()  # idempotent

    def test_each_start_is_a_fork_of_one_server(self) -> None:
        first = self.ironic.server
        second = self.useFixture(IronicServerFixture()).server
        forker = forkserver.shared(first.venv / "bin" / "python",
                                   "ironic.command.singleprocess", "main")
        assert forker._proc is not None
        pids = [first.pid, second.pid]
        self.assertNotEqual(pids[0], pids[1])
        for pid in pids:
            assert pid is not None
            self.assertEqual(forker._proc.pid, _parent(pid))
            self.assertEqual(pid, os.getsid(pid))  # a session, stopped by PID
        # Both serve, each its own database.
        IronicTestClient(second.url).create_node(name="ndf-second")
        self.assertEqual([], self.client.list_nodes())
        second.stop()
        self.assertFalse(_pid_alive(pids[1]))
        self.assertIsNotNone(forker.exited(pids[1]))
        self.assertEqual([], self.client.list_nodes())  # the first serves on

    def test_without_the_fork_server(self) -> None:
        self.useFixture(fixtures.EnvironmentVariable(forkserver.ENABLED_ENV,
                                                     "0"))
        server = self.useFixture(IronicServerFixture()).server
        assert server.pid is not None
        self.assertEqual(os.getpid(), _parent(server.pid))
        self.assertEqual([], IronicTestClient(server.url).list_nodes())


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _running(pid: int) -> bool:
    """Alive and not a zombie (``/proc/<pid>/stat`` state Z)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class PlacementServerSmokeTest(testtools.TestCase):
    """Create a provider and a custom trait in a real Placement server."""

    def setUp(self) -> None:
        super().setUp()
        self.placement = self.useFixture(PlacementServerFixture())
        self.client: PlacementTestClient = self.placement.client

    def test_provider_and_custom_trait(self) -> None:
        rp = self.client.create_resource_provider("ndf-smoke-rp")
        self.assertEqual("ndf-smoke-rp", rp["name"])
        self.assertEqual(0, rp["generation"])

        self.assertTrue(self.client.ensure_trait("CUSTOM_NDF_SMOKE"))
        self.assertFalse(self.client.ensure_trait("CUSTOM_NDF_SMOKE"))
        self.assertTrue(self.client.trait_exists("CUSTOM_NDF_SMOKE"))

        self.client.set_provider_traits(rp["uuid"], ["CUSTOM_NDF_SMOKE"])
        self.assertEqual(
            ["CUSTOM_NDF_SMOKE"], self.client.get_provider_traits(rp["uuid"])
        )
        self.assertEqual(1, self.client.get_resource_provider(rp["uuid"])["generation"])

    def test_server_stops_by_pid(self) -> None:
        pid = self.placement.server.pid
        self.assertIsNotNone(pid)
        assert pid is not None
        self.placement.server.stop()
        self.assertFalse(_pid_alive(pid))
        self.placement.server.stop()  # idempotent


class TakenPortTest(testtools.TestCase):
    """A server whose port another server already holds is not ready.

    Two tests may pick one free port; the second server cannot bind, and
    the first answers its readiness probe. That must fail as a taken port
    (which ``LoopbackService.start`` retries on a new one), not pass as
    ready and hand the test the other server (seen in CI with Ironic).
    """

    def assert_taken(self, second: IronicServer | PlacementServer
                     | RabbitMQServer) -> None:
        self.addCleanup(second.stop)
        error = self.assertRaises(ServiceStartError, second.start)
        self.assertTrue(error.address_in_use, error.log_tail[-2000:])
        self.assertIsNone(second.pid)

    def test_ironic(self) -> None:
        # Without its own conductor's name in the answer, the second took
        # the first's nodes: 409 "node a already exists" (3e5bb26).
        first = self.useFixture(IronicServerFixture()).server
        self.assert_taken(IronicServer(port=first.port, ready_timeout=60))

    def test_placement(self) -> None:
        first = self.useFixture(PlacementServerFixture()).server
        self.assert_taken(PlacementServer(port=first.port, ready_timeout=60))

    def test_rabbitmq(self) -> None:
        first = self.useFixture(RabbitMQServerFixture()).server
        self.assert_taken(RabbitMQServer(port=first.port, ready_timeout=90))


class PlacementWorkersSmokeTest(testtools.TestCase):
    """Pre-forked workers on one port, serving an existing database."""

    def test_two_workers_serve_the_same_database_and_stop_together(self) -> None:
        first = self.useFixture(PlacementServerFixture())
        rp = first.client.create_resource_provider("ndf-workers-rp")
        assert first.server.state_dir is not None
        database = first.server.state_dir / "placement.db"
        server = PlacementServer(database=database, workers=2)
        server.start()
        self.addCleanup(server.stop)
        client = PlacementTestClient(server.url)
        self.assertEqual("ndf-workers-rp",
                         client.get_resource_provider(rp["uuid"])["name"])
        pids = {int(p) for p in re.findall(
            rf"{SERVING} \S+ \(pid (\d+)\)", server.log_tail(10**6))}
        self.assertEqual(2, len(pids), server.log_tail())
        server.stop()
        # A killed worker is its killed parent's child: it may linger as a
        # zombie until init reaps it, which is gone all the same.
        for _ in range(100):  # a bound (10 s), not a timing claim
            if not any(_running(p) for p in pids):
                break
            time.sleep(0.1)
        self.assertEqual([], [p for p in pids if _running(p)])

    def test_workers_need_a_database(self) -> None:
        self.assertRaises(ValueError, PlacementServer, workers=2)
