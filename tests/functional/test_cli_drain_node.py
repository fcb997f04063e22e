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

"""``openstack drain node`` and ``drain host`` on an Ironic service: the real
shell, Nova's harness and a real Ironic, with a driver that copies node
traits over the provider as Nova's Ironic driver does.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
import json
import sys
from typing import Any

from nova_drain_filters import traits
from tests.functional import baremetal_base
from tests.functional import cli_harness
from tests.functional import fake_ironic_driver
from tests.functional.services import ironic_server

MARK = traits.DRAIN_HOST
PLACEMENT_ONLY = "CUSTOM_SET_IN_PLACEMENT_ONLY"


class TraitCopyingIronicDriver(fake_ironic_driver.FakeIronicDriver):
    """Replaces each node provider's traits with the Ironic node's, as
    ``nova/virt/ironic/driver.py`` ``update_provider_tree`` does
    (``provider_tree.update_traits(nodename, node.traits)``)."""

    #: Set by the test before the compute service starts.
    IRONIC: ironic_server.IronicTestClient | None = None

    def update_provider_tree(self, provider_tree: Any, nodename: str,
                             allocations: Any = None) -> None:
        super().update_provider_tree(provider_tree, nodename, allocations)
        assert self.IRONIC is not None
        provider_tree.update_traits(nodename,
                                    self.IRONIC.get_traits(nodename))


sys.modules["nova.virt.drain_trait_copy"] = sys.modules[__name__]


class NodeDrainTest(cli_harness.CliTestBase,
                    baremetal_base.BaremetalTestBase):
    COMPUTE_DRIVER = "drain_trait_copy.TraitCopyingIronicDriver"
    NODES = {"a": "available", "b": "available"}

    def setUp(self) -> None:
        driver = TraitCopyingIronicDriver
        self.addCleanup(setattr, driver, "IRONIC", driver.IRONIC)
        super().setUp()

    def _prepare(self, name: str, how: str) -> str:
        # Runs once Ironic is up and before the compute service starts:
        # from its first periodic on, the driver copies the node traits.
        TraitCopyingIronicDriver.IRONIC = self.ironic
        return super()._prepare(name, how)

    def copy_traits(self) -> None:
        """What nova-compute's periodic does, once."""
        self._run_periodics(raise_on_error=True)

    def node_rows(self, *nodes: str) -> dict[str, dict[str, Any]]:
        return {r["Name"]: r for r in self.cli_json(
            "drain", "node", "show", *nodes)}

    def test_mark_survives_the_trait_copy_and_keeps_boots_off(self) -> None:
        a, b = self.nodes["a"], self.nodes["b"]
        self.ironic.add_trait(b, "CUSTOM_GPU")
        self.copy_traits()
        self.assertEqual({"CUSTOM_GPU"}, self.custom_traits(b))

        run = self.cli("drain", "node", "start", "b", "--yes", "-f", "json")
        self.assertEqual(0, run.rc, run)
        self.assertEqual([("mark Ironic node", b), ("mark provider", b)],
                         [(r["Step"], r["Target"])
                          for r in json.loads(run.stdout)])
        self.assertEqual({MARK, "CUSTOM_GPU"},
                         set(self.ironic.get_traits(b)))
        # A trait set only in placement is wiped by the copy; ours is not.
        self.add_trait_to_provider(b, PLACEMENT_ONLY)
        self.copy_traits()
        self.assertEqual({MARK, "CUSTOM_GPU"}, self.custom_traits(b))

        for _ in range(3):
            self.assertEqual("a", self.node_of(self.boot()))
        self.assertIn("%21CUSTOM_DRAIN_HOST", self.stdlog.logger.output)

        # Nova's driver records the instance on the node it deploys.
        server = self.boot()
        self.ironic.update_node(a, instance_uuid=server["id"])
        rows = self.node_rows("a", b)
        self.assertEqual(["Node", "Name", "Host", "Phase", "Instance",
                          "Allocations", "Marked On"], list(rows["a"]))
        self.assertEqual(("Active", server["id"], "bm-compute", ""), (
            rows["a"]["Phase"], rows["a"]["Instance"], rows["a"]["Host"],
            rows["a"]["Marked On"]))
        self.assertEqual(("Drained", "", 0, "ironic,placement"), (
            rows["b"]["Phase"], rows["b"]["Instance"],
            rows["b"]["Allocations"], rows["b"]["Marked On"]))
        # A node drain is no host drain.
        self.assertEqual([], self.cli_json("drain", "host", "show"))

        cancel = self.cli("drain", "node", "cancel", b, "--yes")
        self.assertEqual(0, cancel.rc, cancel)
        self.assertEqual(["CUSTOM_GPU"], self.ironic.get_traits(b))
        self.assertEqual({"CUSTOM_GPU"}, self.custom_traits(b))
        self.assertEqual("Active", self.node_rows("b")["b"]["Phase"])

        unknown = self.cli("drain", "node", "show", "nosuch")
        self.assertEqual((1, ["unknown Ironic node(s): nosuch"]),
                         (unknown.rc, unknown.stderr.strip().splitlines()))

    def test_host_drain_of_an_ironic_service_says_so(self) -> None:
        dry = self.cli("drain", "host", "start", "bm-compute", "--reason",
                       "move", "--dry-run")
        self.assertEqual(0, dry.rc, dry)
        self.assertIn("Note: bm-compute is an Ironic nova-compute service "
                      "fronting 2 node(s)", dry.stderr)
        refused = self.cli("drain", "host", "start", "bm-compute",
                           "--reason", "move")
        self.assertEqual(1, refused.rc)
        self.assertIn("refusing to change anything without a terminal",
                      refused.stderr)
        ok = self.cli("drain", "host", "start", "bm-compute", "--reason",
                      "move", stdin_text="y\n", tty=True)
        self.assertEqual(0, ok.rc, ok)
        self.assertIn("Carry out these 5 step(s)? [y/N]", ok.stderr)
        for node in self.nodes.values():
            self.assertIn(MARK, self.ironic.get_traits(node))
        self.copy_traits()
        for node in self.nodes.values():
            self.assertIn(MARK, self._get_provider_traits(node))

    def custom_traits(self, rp: str) -> set[str]:
        """The provider's custom traits (Nova adds capability traits)."""
        return {t for t in self._get_provider_traits(rp)
                if t.startswith("CUSTOM_")}

    def add_trait_to_provider(self, rp: str, trait: str) -> None:
        self._create_trait(trait)
        self._set_provider_traits(rp, self._get_provider_traits(rp) + [trait])
