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

"""``openstack drain sync`` and the Ironic rule of ``stale list``: the real
openstack shell, Nova's harness and a real Ironic."""
import json

from nova_drain_filters import traits
from tests.functional import cli_harness
from tests.functional import test_baremetal_scheduling

BM = traits.BAREMETAL_UNAVAILABLE
STALE = traits.STALE_NODE


class SyncTest(cli_harness.CliTestBase,
               test_baremetal_scheduling.BaremetalTestBase):
    NODES = {"a": "available", "b": "maintenance", "c": "available"}

    def test_sync_then_placement_keeps_them_out(self) -> None:
        # c is deleted from Ironic after Nova learned of it.
        self.ironic.delete_node(self.nodes["c"])

        stale = self.cli_json("drain", "stale", "list", "--reason",
                              "ironic_node_missing")
        self.assertEqual([self.nodes["c"]], [r["UUID"] for r in stale])
        self.assertEqual("ironic", stale[0]["Hypervisor Type"])

        dry = self.cli("drain", "sync", "--dry-run", "-f", "json")
        self.assertEqual(0, dry.rc, dry.stderr)
        planned = {(r["Target"], r["UUID"], r["Trait"], r["Action"])
                   for r in json.loads(dry.stdout)}
        expected = {("ironic", self.nodes["b"], BM, "add"),
                    ("placement", self.nodes["b"], BM, "add"),
                    ("placement", self.nodes["c"], STALE, "add")}
        self.assertEqual(expected, planned)
        self.assertEqual([], self.ironic.get_traits(self.nodes["b"]))

        run = self.cli("drain", "sync", "-f", "json")
        self.assertEqual(0, run.rc, run.stderr)
        self.assertEqual(expected, {
            (r["Target"], r["UUID"], r["Trait"], r["Action"])
            for r in json.loads(run.stdout)})
        self.assertIn("sync: 3 compute nodes, 2 Ironic nodes, 3 change(s), "
                      "0 failure(s)", run.stderr)
        self.assertEqual([BM], self.ironic.get_traits(self.nodes["b"]))
        self.assertIn(BM, self._get_provider_traits(self.nodes["b"]))
        self.assertIn(STALE, self._get_provider_traits(self.nodes["c"]))
        self.assertEqual([], self.cli_json("drain", "sync"))

        # The scheduler's view would reject b anyway; placement now keeps
        # both b and c out of the candidates before any filter runs.
        for _ in range(3):
            self.assertEqual("a", self.node_of(self.boot()))
        log = self.stdlog.logger.output
        self.assertIn("%21CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE", log)

        # b comes back: the trait goes from Ironic and placement.
        self.ironic.set_maintenance(self.nodes["b"], False)
        back = self.cli_json("drain", "sync")
        self.assertEqual({("ironic", "remove"), ("placement", "remove")},
                         {(r["Target"], r["Action"]) for r in back})
        self.assertEqual([], self.ironic.get_traits(self.nodes["b"]))
        self.assertNotIn(BM, self._get_provider_traits(self.nodes["b"]))

    def test_bad_interval(self) -> None:
        bad = self.cli("drain", "sync", "--watch", "--interval", "1")
        self.assertEqual(1, bad.rc)
        self.assertEqual(["--interval 1: must be 5 or more"],
                         bad.stderr.strip().splitlines())
