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

"""A Nova harness cloud the ``orphans`` benchmark grows: one compute service
fronting many nodes, each a root provider with a ``CUSTOM_MAGIC`` child,
and servers recorded as Nova records booted ones, some of them orphans."""
from __future__ import annotations

import collections
import time
import uuid
from typing import Any

from nova import context as nova_context
from nova import objects
from nova.network import model as network_model

from tests.functional import cli_harness
from tests.functional import fake_ironic_driver

#: Servers per node; two in three also hold CUSTOM_MAGIC on the child.
SERVERS_PER_NODE = 10
#: Servers deleted while their allocation removal fails, per 100 servers.
ORPHAN_PERCENT = 2
#: Instance fields copied from a booted template server.
COPIED = ("user_id", "project_id", "image_ref", "vm_state", "power_state",
          "task_state", "flavor", "instance_type_id", "memory_mb", "vcpus",
          "root_gb", "ephemeral_gb", "launched_at", "system_metadata",
          "launch_index", "reservation_id", "availability_zone", "hostname",
          "root_device_name", "config_drive", "locked", "key_name",
          "os_type", "architecture", "vm_mode", "display_description")
MAGIC = "CUSTOM_MAGIC"


def node_names(count: int) -> list[str]:
    """The first ``count`` nodes: Ironic node UUIDs, the same each size."""
    return [str(uuid.uuid5(uuid.NAMESPACE_DNS, f"bench-n{i:04d}"))
            for i in range(count)]


class GrowingCloud(cli_harness.CliTestBase):
    """Starts with ``sizes[0]`` nodes; ``grow`` adds nodes and servers."""

    HOSTS = ("bench",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"
    DRAIN = False  # the scheduler as Nova ships it; only listing matters
    #: Node counts, in increasing order; set before the case runs.
    sizes: tuple[int, ...]

    def setUp(self) -> None:
        driver = fake_ironic_driver.FakeIronicDriver
        for name, value in (("NODES", node_names(self.sizes[0])),
                            ("CHILD_RESOURCE_CLASS", MAGIC),
                            ("GONE_IS_DELETED", True)):
            self.addCleanup(setattr, driver, name, getattr(driver, name))
            setattr(driver, name, value)
        super().setUp()
        self.flags(max_placement_results=5000, group="scheduler")
        self.plain = self._create_flavor(memory_mb=1, vcpu=1, disk=0,
                                         ephemeral=0)
        self.magic = self._create_flavor(
            memory_mb=1, vcpu=1, disk=0, ephemeral=0,
            extra_spec={f"resources:{MAGIC}": "1"})
        self.templates: list[dict] = []
        self.facts: dict[str, tuple[Any, dict]] = {}

    def grow(self, nodes: int) -> str:
        """Grow the cloud to ``nodes`` nodes; return a note on the work."""
        compute = self.computes["bench"]
        names = node_names(nodes)
        if compute.driver.get_available_nodes() != names:
            compute.driver._set_nodes(names)
            self._run_periodics()
        rps = self.placement.get("/resource_providers",
                                 version="1.14").body["resource_providers"]
        self.rp = {p["name"]: p["uuid"] for p in rps}
        if not self.templates:
            self.templates = [self._create_server(
                flavor_id=f, networks="none") for f in (self.plain,
                                                       self.magic)]
            self.cell = objects.InstanceMapping.get_by_instance_uuid(
                self.ctxt, self.templates[0]["id"]).cell_mapping
        with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
            self.node_ids = {cn.hypervisor_hostname: cn.id for cn in
                             objects.ComputeNodeList.get_all_by_host(
                                 cctxt, "bench")}
            counts = collections.Counter(
                i.node for i in objects.InstanceList.get_by_host(
                    cctxt, "bench"))
        made: list[str] = []
        started = time.monotonic()
        for name in names:
            have = counts[name]
            for i in range(have, SERVERS_PER_NODE):
                made.append(self.clone(
                    self.templates[0 if i % 3 == 2 else 1], name))
        note = (f"{nodes} nodes: {len(made)} servers recorded in "
                f"{time.monotonic() - started:.0f}s")
        self.delete_a_node_with_an_orphan(names[-1])
        # After the last periodic: on a node it still manages, Nova's
        # resource tracker removes a deleted instance's allocations
        # itself (resource_tracker.py _remove_deleted_instances_allocations).
        with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
            for uuid_ in made[::100 // ORPHAN_PERCENT]:
                # As Nova leaves it when the allocation removal fails.
                objects.Instance.get_by_uuid(cctxt, uuid_).destroy()
        return note

    def clone(self, template: dict, node: str) -> str:
        """A server on ``node`` recorded as Nova records a booted one:
        the instance (copied from a booted template), its mapping and
        its allocations (root, and child for CUSTOM_MAGIC)."""
        new_uuid = str(uuid.uuid4())
        src, source = self.template_facts(template["id"])
        with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
            inst = objects.Instance(context=cctxt)
            for field in COPIED:
                if src.obj_attr_is_set(field):
                    setattr(inst, field, getattr(src, field))
            inst.uuid = new_uuid
            inst.display_name = f"clone-{new_uuid[:8]}"
            inst.host, inst.node = "bench", node
            inst.compute_id = self.node_ids[node]
            inst.info_cache = objects.InstanceInfoCache(
                network_info=network_model.NetworkInfo([]))
            inst.create()
        objects.InstanceMapping(
            context=self.ctxt, instance_uuid=new_uuid,
            cell_mapping=self.cell, project_id=src.project_id,
            user_id=src.user_id, queued_for_delete=False).create()
        allocations = {}
        for alloc in source["allocations"].values():
            child = MAGIC in alloc["resources"]
            target = self.rp[f"{node}-child" if child else node]
            allocations[target] = {"resources": alloc["resources"]}
        self.placement.put(f"/allocations/{new_uuid}", {
            "allocations": allocations, "consumer_generation": None,
            "project_id": source["project_id"],
            "user_id": source["user_id"]}, version="1.28")
        return new_uuid

    def template_facts(self, uuid_: str) -> tuple[Any, dict]:
        if uuid_ not in self.facts:
            with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                src = objects.Instance.get_by_uuid(
                    cctxt, uuid_,
                    expected_attrs=["flavor", "system_metadata"])
            self.facts[uuid_] = (src, self.placement.get(
                f"/allocations/{uuid_}", version="1.28").body)
        return self.facts[uuid_]

    def delete_a_node_with_an_orphan(self, node: str) -> None:
        """Its servers deleted while the allocation removal fails, then
        the node deleted (Nova drops the record, the provider stays)."""
        with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
            for inst in objects.InstanceList.get_by_host_and_node(
                    cctxt, "bench", node):
                inst.destroy()
        compute = self.computes["bench"]
        compute.driver._set_nodes(
            [n for n in compute.driver.get_available_nodes()
             if n != node])
        self._run_periodics()

    def held(self) -> tuple[int, int]:
        rps = self.placement.get("/resource_providers",
                                 version="1.14").body["resource_providers"]
        allocations = sum(len(self.placement.get(
            f"/resource_providers/{rp['uuid']}/allocations",
            version="1.0").body["allocations"]) for rp in rps)
        return len(rps), allocations
