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

"""Ironic nodes of the real cloud: boots aimed at one node, node states,
placement's reservation and the scheduler's summary line, with bounded
waits.

A boot names the Ironic compute as ``host`` and the node's UUID as
``hypervisor_hostname`` (microversion 2.74,
``nova/api/openstack/compute/servers.py``): Nova asks placement for that
node's provider only (``in_tree``) and runs every enabled filter on it,
so the boot goes ACTIVE on that node or ends in "No valid host".
"""

from __future__ import annotations

import time
from typing import Any

from tests.e2e import servers
from tests.functional.cloud import configs
from tests.functional.cloud import resources

NODE_FIELD = "OS-EXT-SRV-ATTR:hypervisor_hostname"
CLEANING = ("cleaning", "clean wait")
#: Nova's periodic resource update runs every 60 s
#: (``ComputeManager.update_available_resource``); one more for a busy core.
PERIODIC_TIMEOUT = 120.0


def boot(conn: Any, image: str, name: str, node: str) -> str:
    """POST one baremetal server that can only go to ``node``; its ID."""
    flavor = conn.compute.find_flavor(resources.BAREMETAL_FLAVOR,
                                      ignore_missing=False).id
    body = {"name": name, "imageRef": image, "flavorRef": flavor,
            "networks": "none", "host": configs.IRONIC_COMPUTE,
            "hypervisor_hostname": node}
    resp = conn.compute.post("/servers", json={"server": body},
                             microversion=servers.MICROVERSION)
    resp.raise_for_status()
    return str(resp.json()["server"]["id"])


def provision_state(system: Any, node: str) -> str:
    return str(system.baremetal.get_node(node).provision_state)


def end_maintenance(system: Any, node: str) -> None:
    """Take the node out of maintenance if it is in it."""
    if system.baremetal.get_node(node).is_maintenance:
        system.baremetal.unset_node_maintenance(node)


def wait_available(system: Any, node: str,
                   timeout: float = PERIODIC_TIMEOUT) -> None:
    """Wait (bounded) until the node is ``available`` (a clean ended)."""
    deadline = time.monotonic() + timeout
    while (state := provision_state(system, node)) != "available":
        if time.monotonic() > deadline:
            raise AssertionError(f"node {node} still {state} after "
                                 f"{timeout:.0f} s")
        time.sleep(1)


def reserved(conn: Any, node: str) -> int:
    """Placement's ``reserved`` of the node's CUSTOM_BAREMETAL (Nova's
    Ironic driver sets 1 for a node it finds unavailable or in use:
    ``nova/virt/ironic/driver.py`` ``IronicDriver.update_provider_tree``)."""
    resp = conn.placement.get(f"/resource_providers/{node}/inventories",
                              microversion="1.6")
    resp.raise_for_status()
    inventory = resp.json()["inventories"].get("CUSTOM_BAREMETAL", {})
    return int(inventory.get("reserved", 0))


def wait_unreserved(conn: Any, node: str,
                    timeout: float = PERIODIC_TIMEOUT) -> None:
    """Wait (bounded) until Nova no longer reserves the node: a periodic
    that ran while it was unavailable reserved it until the next one."""
    deadline = time.monotonic() + timeout
    while reserved(conn, node):
        if time.monotonic() > deadline:
            raise AssertionError(f"node {node} still reserved in placement "
                                 f"after {timeout:.0f} s")
        time.sleep(2)

