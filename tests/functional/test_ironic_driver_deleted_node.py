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

"""Seed 003 with Nova's own Ironic driver: a node deleted from Ironic.

Driver: ``ironic.IronicDriver`` (Nova's own) on a real Ironic, because what
Nova leaves behind is the driver's doing: its periodic drops the node from
``get_available_nodes`` and ``is_node_deleted`` lets the compute manager
delete the compute node and its provider
(``nova/compute/manager.py`` ``update_available_resource``).
"""
import time
from typing import Any

from nova import exception
from nova import objects

from tests.functional import cli_harness
from tests.functional import ironic_driver_base as idb


class DeletedNodeTest(cli_harness.CliTestBase, idb.IronicDriverTestBase):
    NODES = ("a", "b")

    def records(self) -> dict[str, int]:
        """Nova's and placement's records of this test's nodes."""
        ours = set(self.nodes.values())
        nodes = [cn for cn in objects.ComputeNodeList.get_all(self.ctxt)
                 if cn.uuid in ours]
        providers = [rp for rp in self._get_all_providers()
                     if rp["uuid"] in ours]
        allocations = sum(
            len(self.placement.get(
                f"/resource_providers/{rp['uuid']}/allocations"
            ).body["allocations"]) for rp in providers)
        stale = self.cli_json("drain", "stale", "list")
        return {"compute nodes": len(nodes), "providers": len(providers),
                "allocations": allocations, "stale rows": len(stale)}

    def stale_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.cli_json("drain", "stale", "list")
                if r["UUID"] in self.by_uuid]

    def test_deleted_node_is_avoided_then_nova_removes_it(self) -> None:
        gone = self.nodes["b"]
        self.ironic.delete_node(gone)
        deleted = time.monotonic()
        # nova-compute's heartbeat is fresh: the service is up.
        service = self.admin_api.get_services(binary="nova-compute")[0]
        self.assertEqual(("up", "enabled"),
                         (service["state"], service["status"]))
        # Nova alone still offers the node: nothing ran since.
        self.assertIn("b", self.candidates())

        self.wait_until("a listing after the deletion", lambda: (
            (snap := self.drain.view.trusted()) is not None
            and snap.started_at > deleted))
        self.assertEqual("a", self.node_of(self.boot()))
        self.assertIn("node missing from Ironic: " + gone,
                      self.summary_lines()[-1])

        before = self.records()
        rows = self.stale_rows()
        self.assertEqual([(gone, "compute_node", "ironic_node_missing")],
                         [(r["UUID"], r["Kind"], r["Reason Codes"])
                          for r in rows])

        took = self.periodic()
        # IronicDriver.is_node_deleted said so: the compute node and its
        # provider are gone, and the CLI has nothing left to report.
        self.assertIn("Deleting orphan compute node", self.stdlog.logger.output)
        after = self.records()
        self.assertEqual([], self.stale_rows())
        self.assertRaises(exception.ComputeHostNotFound, self.compute_node,
                          "bm-compute", gone)
        self.assertNotIn(gone, {rp["uuid"] for rp in self._get_all_providers()})
        self.assertEqual({"compute nodes": 1, "providers": 1,
                          "allocations": 1, "stale rows": 0}, after)
        idb.report(f"seed 003: before the periodic {before}; after it "
                   f"({took:.2f} s) {after}; drain stale list reported "
                   f"{[r['Reason Codes'] for r in rows]} before and nothing "
                   f"after")
