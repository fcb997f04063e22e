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

"""Seed 004 with Nova's own Ironic driver: a deleted server's node cleans.

Driver: ``ironic.IronicDriver`` (Nova's own) on a real Ironic, because the
question is what Nova's driver does to placement when Ironic cleans a node
after a delete (``_unprovision`` returns once the node is CLEANING, then the
delete's resource update runs ``update_provider_tree``). Nova's filters only
(``DRAIN = False``): this tests Nova, not our protection.
"""
import time

from tests.functional import ironic_driver_base as idb


class CleaningAfterDeleteTest(idb.IronicDriverTestBase):
    DRAIN = False
    NODES = ("a", "b")

    def test_default_workarounds(self) -> None:
        self.delete_then_boot_while_cleaning("default workarounds")

    def test_skip_reserve_in_use_ironic_nodes(self) -> None:
        # The driver reads it on each call (update_provider_tree). A
        # CLEANING node is unavailable to the driver
        # (_node_resources_unavailable) whatever it says.
        self.flags(skip_reserve_in_use_ironic_nodes=True, group="workarounds")
        self.delete_then_boot_while_cleaning(
            "skip_reserve_in_use_ironic_nodes=True")

    def delete_then_boot_while_cleaning(self, described: str) -> None:
        first = self.boot()
        used = self.node_of(first)
        other = ({"a", "b"} - {used}).pop()
        # The boot's own resource update ran before the deploy: nothing is
        # reserved (the node's allocation holds its one unit), so the
        # reservation below is the delete's doing.
        in_use = self.reserved(used)
        self.assertEqual(0, in_use)
        # Cleaning on for this node only; the fake vendor step sleeps.
        self.ironic.update_node(self.nodes[used], automated_clean=True)
        self._delete_server(first)
        deleted = time.monotonic()

        # nova/virt/ironic/driver.py _unprovision returned at CLEANING; the
        # delete's resource update (ResourceTracker.update_usage ->
        # IronicDriver.update_provider_tree, node not in the cache any
        # more, so read from Ironic) found it cleaning and reserved it.
        node = self.ironic.get_node(self.nodes[used])
        self.assertIn(node["provision_state"], ("cleaning", "clean wait"))
        self.assertEqual(1, self.reserved(used))
        self.assertNotIn(used, self.candidates())

        # The next boots do not land on it: one takes the other node, the
        # one after finds no host.
        self.assertEqual(other, self.node_of(self.boot()))
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        node = self.ironic.get_node(self.nodes[used])
        self.assertIn(node["provision_state"], ("cleaning", "clean wait"),
                      "cleaning ended before the boots were done")
        during = time.monotonic() - deleted

        # The periodic reserves the deployed node too, with or without the
        # workaround: an ACTIVE node is not AVAILABLE, so
        # _node_resources_unavailable says so before the in-use rule is
        # asked.
        self.periodic()
        self.assertEqual(1, self.reserved(other))
        idb.report(f"seed 004 ({described}): the node was cleaning and "
                   f"reserved for the {during:.1f} s of two boots after the "
                   f"delete (reserved 0 while in use before any periodic; "
                   f"the periodic reserves an ACTIVE node either way)")
