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

"""``openstack drain node start|show|cancel`` against a fake cloud."""
import dataclasses

from osc_lib import exceptions

from osc_plugin.v1 import node
from tests.unit.osc_plugin import drain_cloud
from tests.unit.osc_plugin import fakes
from tests.unit.osc_plugin.drain_cloud import MARK


class NodeCase(fakes.CommandTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.cloud = drain_cloud.Cloud()


class TestShowNode(NodeCase):
    cls, prog = node.ShowNode, "openstack drain node show"

    def test_parser(self) -> None:
        self.assertEqual(["a", "b"], self.parse("a", "b").nodes)
        self.assertIn("<node>", self.parse_error())

    def test_columns_and_rows(self) -> None:
        self.assertEqual(("Node", "Name", "Host", "Phase", "Instance",
                          "Allocations", "Marked On"), node.COLUMNS)
        self.cloud.nodes[0] = dataclasses.replace(self.cloud.nodes[0],
                                                  instance_uuid="i1")
        self.cloud.allocations["n1"] = {"i1": {"CUSTOM_BAREMETAL": 1}}
        self.cloud.node_traits["n1"] = {MARK}
        self.cloud.traits["n2"].add(MARK)
        columns, rows = self.take(self.cloud.client(), "bm-n1", "n2")
        self.assertEqual(node.COLUMNS, columns)
        self.assertEqual([
            ("n1", "bm-n1", "bm", "Draining", "i1", 1, "ironic"),
            ("n2", "bm-n2", "bm", "Drained", "", 0, "placement")], rows)

    def test_unknown_node_and_no_ironic(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(), "n1", "nope")
        self.assertEqual("unknown Ironic node(s): nope", str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(has_ironic=False), "n1")
        self.assertIn("no baremetal endpoint", str(exc))


class TestStartCancelNode(NodeCase):
    def test_start_marks_ironic_then_placement_only(self) -> None:
        self.cls = node.StartNode
        _, rows = self.take(self.cloud.client(), "n1", "--yes")
        self.assertEqual([("add_trait", "n1", MARK),
                          ("update_provider_traits", "n1", {MARK}, set())],
                         self.cloud.writes())
        self.assertEqual(["done", "done"], [r[3] for r in rows])
        self.assertEqual("enabled", self.cloud.services["bm"].status)
        _, rows = self.take(self.cloud.client(), "n1", "--yes")
        self.assertEqual([("n1", "nothing to do", "", "already marked")],
                         rows)

    def test_start_rolls_back(self) -> None:
        self.cls = node.StartNode
        self.cloud.placement.errors["update_provider_traits"] = (
            fakes.api_error(500))
        self.assertEqual(1, self.run_cmd(self.cloud.client(), "n1", "--yes"))
        self.assertEqual(set(), self.cloud.node_traits["n1"])
        self.assertIn("failed: n1: mark provider n1: ",
                      self.app.stderr.getvalue())

    def test_cancel(self) -> None:
        self.cls = node.CancelNode
        self.cloud.node_traits["n1"] = {MARK, "CUSTOM_GPU"}
        self.cloud.traits["n1"] = {MARK}
        _, rows = self.take(self.cloud.client(), "n1", "n2", "--dry-run")
        self.assertEqual([("n2", "nothing to do", "", "not marked"),
                          ("n1", "unmark Ironic node", "n1", "planned"),
                          ("n1", "unmark provider", "n1", "planned")], rows)
        self.take(self.cloud.client(), "n1", "--yes")
        self.assertEqual(({"CUSTOM_GPU"}, set()),
                         (self.cloud.node_traits["n1"], self.cloud.traits["n1"]))
