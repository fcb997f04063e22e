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

"""``openstack drain report`` against a fake cloud."""
import dataclasses
from unittest import mock

from osc_lib import exceptions

from nova_drain_filters import traits
from osc_plugin.v1 import report
from tests.unit import ironic_fakes
from tests.unit.osc_plugin import fakes
from tests.unit.osc_plugin.fakes import NODE_DOWN
from tests.unit.osc_plugin.fakes import NODE_GONE
from tests.unit.osc_plugin.fakes import NODE_OK


class TestReport(fakes.CommandTestCase):
    cls, prog = report.ReportCapacity, "openstack drain report"

    def test_headroom(self) -> None:
        with mock.patch.object(report.fit_check, "provider_rooms",
                               return_value={}) as rooms:
            columns, rows = self.take(fakes.stale_cloud(), "--headroom",
                                      "--by", "host")
        # The fake cloud's one schedulable node reports no inventory.
        self.assertEqual(("Host", "Hosts", "Nodes"), columns)
        rooms.assert_called_once()
        self.assertEqual([("c1", 1, 1)], rows)

    def test_rows_and_requests(self) -> None:
        client = fakes.stale_cloud()
        client.placement.traits[traits.DRAIN_HOST] = {NODE_OK}
        columns, rows = self.take(client)
        self.assertEqual(("Reason", "Hosts", "Nodes"), columns)
        # A mark on an Ironic node's provider is a node drain: Drained.
        self.assertEqual([("drain_drained", 1, 1),
                          ("service_forced_down", 1, 1),
                          ("ironic_node_missing", 1, 1),
                          ("Schedulable", 0, 0), ("Total", 2, 3)], rows)
        # Lists only: no per-provider read; only known traits are asked.
        self.assertEqual([(None,), ("COMPUTE_NODE",), (traits.DRAIN_HOST,)],
                         client.placement.called("providers"))
        self.assertEqual([], client.placement.called("provider_allocations"))
        self.assertEqual([1000], client.ironic.page_sizes)

    def test_json_lists_every_reason(self) -> None:
        columns, rows = self.take(fakes.stale_cloud(), "-f", "json",
                                  "--by", "host")
        self.assertEqual(("Host", "Reason", "Hosts", "Nodes",
                          report.NODES_COLUMN), columns)
        members = {m["uuid"]: m["reasons"] for r in rows for m in r[-1]}
        self.assertEqual({NODE_GONE: ["ironic_node_missing"],
                          NODE_DOWN: ["service_forced_down"]}, members)

    def test_empty_ironic_listing_is_refused(self) -> None:
        client = fakes.stale_cloud()
        client.ironic = ironic_fakes.FakeIronicClient([])
        error = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertTrue(str(error).startswith(
            "refusing to report capacity: the Ironic listing lacks 3 of the "
            "3 Ironic compute nodes Nova knows"), error)

    def test_nova_view_without_compute_nodes_is_refused(self) -> None:
        client = fakes.stale_cloud(ironic=False)
        client.nova = type(client.nova)([], [])
        error = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertIn("refusing to report capacity: Nova lists no compute "
                      "node record, while placement has 4 compute node "
                      "providers", str(error))

    def test_exit_code_and_bad_input(self) -> None:
        def cloud() -> fakes.FakeDrainClient:
            # Of NODE_OK and NODE_DOWN, one unit each, half is lost.
            client = fakes.stale_cloud()
            client.ironic.nodes = [dataclasses.replace(
                n, resource_class="gold") for n in client.ironic.nodes]
            return client
        self.assertEqual(0, self.run_cmd(cloud()))
        self.assertEqual(3, self.run_cmd(cloud(), "--exit-code"))
        self.assertIn("CUSTOM_GOLD: 50.0% of the inventory is unschedulable",
                      self.app.stderr.getvalue())
        self.assertEqual(0, self.run_cmd(
            cloud(), "--exit-code", "--max-unschedulable-fraction", "0.5"))
        self.assertIn("must be a fraction from 0.0 to 1.0", self.parse_error(
            "--max-unschedulable-fraction", "1.5"))
        self.assertIn("invalid choice: 'rack'", self.parse_error(
            "--by", "rack"))
        error = self.assertRaises(
            exceptions.CommandError, self.take, fakes.stale_cloud(),
            "--prometheus-textfile", "/nonexistent/dir/x.prom")
        self.assertEqual("cannot write --prometheus-textfile "
                         "/nonexistent/dir/x.prom: No such file or directory",
                         str(error))
