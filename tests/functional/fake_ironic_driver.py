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

"""A fake virt driver that reports its nodes the way Nova's Ironic driver does.

Each node's name and compute node UUID is an Ironic node UUID and the
hypervisor type is ``ironic`` (``nova/virt/ironic/driver.py``
``_node_resource``), so the drain filters treat them as Ironic nodes. Nova's
Ironic driver itself needs a real deploy path; the fake one spawns nothing.
It is the one multi-node fake of the functional tests, the demo and the
benchmarks, kept for the tests that need many nodes cheaply: class
attributes say what its nodes offer, and whoever sets one restores it
(``self.addCleanup(setattr, driver, name, old)``). Nova's own driver runs
against the real Ironic in ``test_ironic_driver_*`` (``ironic_driver_base.py``).
"""
import sys
from typing import Any

import os_traits
from nova.virt import fake


class FakeIronicDriver(fake.FakeDriver):
    """Reports ``NODES`` (Ironic node UUIDs) as its nodes."""

    #: Set by the test before the compute service starts.
    NODES: list[str] = []
    #: If set, each node offers one unit of this custom resource class and
    #: nothing else, as Nova's Ironic driver reports a node.
    RESOURCE_CLASS: str | None = None
    #: If set, each node also gets a child provider ``<node>-child`` that
    #: offers 100 of this class, the shape of Nova's
    #: ``MediumFakeDriverWithNestedCustomResources`` (nova/virt/fake.py).
    CHILD_RESOURCE_CLASS: str | None = None
    #: Whether a node no longer in the driver's nodes was deleted, so that
    #: Nova drops its compute node record (nova/compute/manager.py
    #: ``update_available_resource`` asks ``is_node_deleted``; Nova's
    #: Ironic driver asks Ironic). False, as for most drivers, keeps it.
    GONE_IS_DELETED = False

    def init_host(self, host: str) -> None:
        self._host = host
        self._set_nodes(list(self.NODES))

    def get_available_resource(self, nodename: str) -> dict[str, Any]:
        resources = super().get_available_resource(nodename)
        if resources:
            resources["hypervisor_type"] = "ironic"
            resources["uuid"] = nodename
        return resources

    def update_provider_tree(self, provider_tree: Any, nodename: str,
                             allocations: Any = None) -> None:
        if self.RESOURCE_CLASS:
            provider_tree.update_inventory(nodename, {self.RESOURCE_CLASS: {
                "total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1,
                "step_size": 1, "allocation_ratio": 1.0}})
        else:
            super().update_provider_tree(provider_tree, nodename, allocations)
        if self.CHILD_RESOURCE_CLASS:
            child = f"{nodename}-child"
            if not provider_tree.exists(child):
                provider_tree.new_child(name=child, parent=nodename)
            provider_tree.update_inventory(child, {self.CHILD_RESOURCE_CLASS: {
                "total": 100, "reserved": 0, "min_unit": 1, "max_unit": 100,
                "step_size": 1, "allocation_ratio": 1.0}})
            provider_tree.add_traits(child, os_traits.OWNER_NOVA)

    def get_nodenames_by_uuid(self, refresh: bool = False) -> dict[str, str]:
        return {node: node for node in self.get_available_nodes()}

    def is_node_deleted(self, nodename: str) -> bool:
        return (self.GONE_IS_DELETED
                and nodename not in self.get_available_nodes())


# nova/virt/driver.py load_compute_driver imports 'nova.virt.<name>' only;
# give this module a name there so [DEFAULT] compute_driver can point at it.
sys.modules["nova.virt.drain_fake_ironic"] = sys.modules[__name__]


#: The custom resource class the baremetal orphan tests give their nodes.
GOLD = "CUSTOM_BAREMETAL_GOLD"


def post_gold_flavor(admin_api: Any) -> str:
    """A flavor asking for one GOLD node and nothing else, as for Ironic.

    ``resources:VCPU=0`` and the like drop the standard classes Nova would
    ask for (``nova/scheduler/utils.py`` ``ResourceRequest``). Returns its id.
    """
    flavor = admin_api.post_flavor({"flavor": {
        "name": "bm-gold", "ram": 1, "vcpus": 1, "disk": 1}})
    admin_api.post_extra_spec(flavor["id"], {"extra_specs": {
        f"resources:{GOLD}": "1", "resources:VCPU": "0",
        "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}})
    return str(flavor["id"])
