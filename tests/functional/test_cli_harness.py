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

"""The in-process ``openstack`` shell works against Nova's test harness."""
from __future__ import annotations

import logging
import warnings

from keystoneauth1 import session as ks_session

from tests.functional import cli_harness
from tests.functional.services import ironic_server


class CliHarnessTest(cli_harness.CliTestBase):
    """Built-in OSC commands, run through :mod:`cli_harness`."""

    def test_server_list_shows_booted_server(self) -> None:
        server = self.boot()
        rows = self.cli_json("server", "list", "--all-projects")
        self.assertEqual([server["id"]], [row["ID"] for row in rows])
        self.assertEqual("ACTIVE", rows[0]["Status"])

    def test_project_name_lookup_passes_id_through(self) -> None:
        # Keystone is unserved (403): OSC uses the given ID as is.
        server = self.boot()
        rows = self.cli_json("server", "list", "--project",
                             self.api_fixture.project_id)
        self.assertEqual([server["id"]], [row["ID"] for row in rows])

    def test_hypervisor_list(self) -> None:
        rows = self.cli_json("hypervisor", "list")
        self.assertEqual(sorted(self.HOSTS),
                         sorted(row["Hypervisor Hostname"] for row in rows))

    def test_compute_service_list(self) -> None:
        rows = self.cli_json("compute", "service", "list")
        computes = {row["Host"]: row for row in rows
                    if row["Binary"] == "nova-compute"}
        self.assertEqual(set(self.HOSTS), set(computes))
        for row in computes.values():
            self.assertEqual(("enabled", "up"), (row["Status"], row["State"]))

    def test_failing_command_has_one_line_error(self) -> None:
        result = self.cli("server", "show", "no-such-server")
        self.assertEqual(1, result.rc)
        self.assertEqual("", result.stdout)
        self.assertEqual(["No Server found for no-such-server"],
                         result.stderr.splitlines())

    def test_unknown_command(self) -> None:
        # Like the real shell: exit code 2, the hint goes to stdout.
        result = self.cli("no-such-command")
        self.assertEqual(2, result.rc)
        self.assertEqual("", result.stderr)
        self.assertEqual("openstack: 'no-such-command' is not an openstack "
                         "command. See 'openstack --help'.",
                         result.stdout.splitlines()[0])

    def test_harness_is_restored(self) -> None:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        filters = list(warnings.filters)
        self.cli_json("hypervisor", "list")
        self.assertEqual((handlers, level), (list(root.handlers), root.level))
        self.assertEqual(filters, list(warnings.filters))
        self.assertNotIn("addHandler", vars(root))

    def test_auth_reaches_placement(self) -> None:
        session = ks_session.Session(auth=self.cli_auth)
        resp = session.get("/resource_providers",
                           endpoint_filter={"service_type": "placement"})
        self.assertEqual(
            set(self.HOSTS),
            {rp["name"] for rp in resp.json()["resource_providers"]})


class CliBaremetalTest(cli_harness.CliTestBase):
    """ironicclient's commands reach the real Ironic through the catalog."""

    def setUp(self) -> None:
        ironic = self.useFixture(ironic_server.IronicServerFixture())
        self.ironic_url = ironic.url
        assert ironic.client is not None
        self.node = ironic.client.create_node(name="cli-node")
        super().setUp()

    def test_baremetal_node_list(self) -> None:
        rows = self.cli_json("baremetal", "node", "list")
        # ironicclient 6 keys the rows by field, 5 (Nova 31's set) by label
        # (ironicclient/osc/v1/baremetal_node.py ListBaremetalNode.take_action).
        columns = {"uuid": "UUID", "name": "Name",
                   "provision_state": "Provisioning State"}
        self.assertEqual([(self.node["uuid"], "cli-node", "enroll")],
                         [tuple(r.get(field, r.get(label))
                                for field, label in columns.items())
                          for r in rows])
