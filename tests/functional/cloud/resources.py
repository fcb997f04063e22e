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

"""What the cloud holds once its services run: flavors, a tiny image and
the Ironic nodes; all idempotent."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.functional.services.ironic_client import FAKE_HARDWARE

IMAGE = "ndf-tiny"
FLAVOR = "ndf.tiny"
BAREMETAL_FLAVOR = "ndf.baremetal"
BAREMETAL_CLASS = "baremetal"  # providers get CUSTOM_BAREMETAL
IRONIC_NODES = ("bm-0", "bm-1", "bm-2")


def flavors(conn: Any) -> None:
    """``ndf.tiny`` (1 vCPU, 64 MiB, 1 GB) for the fake computes and
    ``ndf.baremetal`` (one CUSTOM_BAREMETAL, nothing else) for Ironic."""
    if conn.compute.find_flavor(FLAVOR) is None:
        conn.compute.create_flavor(name=FLAVOR, vcpus=1, ram=64, disk=1)
    if conn.compute.find_flavor(BAREMETAL_FLAVOR) is None:
        flavor = conn.compute.create_flavor(name=BAREMETAL_FLAVOR, vcpus=1,
                                            ram=64, disk=1)
        conn.compute.create_flavor_extra_specs(flavor, {
            "resources:CUSTOM_BAREMETAL": "1", "resources:VCPU": "0",
            "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"})


def image(conn: Any) -> str:
    """A 1 MiB raw image in Glance's file store; its ID."""
    found = conn.image.find_image(IMAGE)
    if found is not None and found.status == "active":
        return str(found.id)
    if found is not None:
        conn.image.delete_image(found)
    created = conn.image.create_image(
        name=IMAGE, data=b"\0" * (1 << 20), disk_format="raw",
        container_format="bare", visibility="public", use_import=False)
    return str(created.id)


def ironic_nodes(connect: Callable[[], Any],
                 timeout: float = 120.0) -> list[str]:
    """Fake-hardware nodes, powered off and ``available`` (through manage
    and provide, as an operator enrols them); their UUIDs. ``connect``
    makes a system-scoped connection, as Ironic's policy wants: one per
    node, since the nodes are enrolled side by side (each state change is
    a wait on Ironic's conductor, not work on this machine).

    Each node has automated cleaning off (``automated_clean = False``,
    ironic/conductor/utils.py skip_automated_cleaning): the cloud's fake
    clean step sleeps ``configs.CLEAN_SECONDS``, which provide would wait
    for. A test turns it on for the node it cleans.
    """
    with ThreadPoolExecutor(len(IRONIC_NODES)) as pool:
        futures = [pool.submit(_enrol, connect(), name, timeout)
                   for name in IRONIC_NODES]
        return [future.result() for future in futures]


def _enrol(conn: Any, name: str, timeout: float) -> str:
    bm = conn.baremetal
    node = bm.find_node(name)
    if node is None:
        node = bm.create_node(
            name=name, driver=FAKE_HARDWARE,
            resource_class=BAREMETAL_CLASS,
            properties={"cpus": 2, "memory_mb": 4096, "local_gb": 10},
            is_automated_clean_enabled=False)
    if node.provision_state == "enroll":
        bm.set_node_provision_state(node, "manage", wait=True,
                                    timeout=timeout)
        node = bm.get_node(node.id)
    if node.power_state != "power off":
        bm.set_node_power_state(node, "power off", wait=True,
                                timeout=timeout)
    if node.provision_state == "manageable":
        bm.set_node_provision_state(node, "provide", wait=True,
                                    timeout=timeout)
    return str(node.id)


def wait_providers(conn: Any, count: int, timeout: float) -> bool:
    """Wait (bounded) until placement has ``count`` resource providers;
    True if so. A compute creates its node's record and then its provider
    (nova/compute/resource_tracker.py ``_init_compute_node``, ``_update``),
    so a provider means a record that ``discover_hosts`` can map."""
    deadline = time.monotonic() + timeout
    while True:
        resp = conn.placement.get("/resource_providers")
        if resp.ok and len(resp.json()["resource_providers"]) >= count:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(1)


def wait_hypervisors(conn: Any, count: int, timeout: float) -> int:
    """Wait (bounded) until Nova lists ``count`` hypervisors; how many."""
    deadline = time.monotonic() + timeout
    found = 0
    while time.monotonic() < deadline:
        found = len(list(conn.compute.hypervisors()))
        if found >= count:
            break
        time.sleep(2)
    return found
