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

"""A small typed Ironic API client that drives fake-hardware test nodes."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tests.functional.services.process import JsonTestClient
from tests.functional.services.process import given

IRONIC_API_VERSION = "1.82"
"""Ironic API microversion the test client pins (1.82 adds node shards)."""

FAKE_HARDWARE = "fake-hardware"
"""The hardware type of every test node, the only one the server enables."""

# Provision states from which a node does not move on by itself.
FAILED_PROVISION_STATES = frozenset(
    {
        "adopt failed",
        "clean failed",
        "deploy failed",
        "error",
        "inspect failed",
        "rescue failed",
        "service failed",
        "unrescue failed",
    }
)

# Provision verb -> stable provision state the node ends in.
_VERB_TARGETS: Mapping[str, str] = {
    "manage": "manageable",
    "provide": "available",
    "active": "active",
    "deleted": "available",
    "clean": "manageable",
}

# A manual clean step every fake-hardware node supports and which needs
# no arguments.
DEFAULT_CLEAN_STEPS: list[dict[str, Any]] = [
    {"interface": "bios", "step": "cache_bios_settings"},
]


class ProvisionStateError(AssertionError):
    """A node failed, or did not reach a provision state in time."""


class IronicTestClient(JsonTestClient):
    """Minimal typed Ironic API client for driving fake-hardware nodes."""

    prefix = "/v1"

    def __init__(
        self,
        url: str,
        api_version: str = IRONIC_API_VERSION,
        timeout: float = 10.0,
        poll_interval: float = 0.05,
    ):
        super().__init__(
            url, {"X-OpenStack-Ironic-API-Version": api_version}, timeout)
        self.poll_interval = poll_interval

    # Nodes -----------------------------------------------------------------

    def create_node(
        self,
        name: str | None = None,
        uuid: str | None = None,
        resource_class: str = "baremetal",
        **fields: Any,
    ) -> dict[str, Any]:
        """Create a fake-hardware node (state ``enroll``) and return it."""
        body = {"driver": FAKE_HARDWARE, "resource_class": resource_class,
                **fields, **given(name=name, uuid=uuid)}
        return self.request("POST", "/nodes", body, (201,)).json()

    def get_node(self, uuid: str) -> dict[str, Any]:
        """Return the node as Ironic reports it."""
        return self.request("GET", f"/nodes/{uuid}").json()

    def list_nodes(self, **filters: str) -> list[dict[str, Any]]:
        """Return detailed node records matching the query ``filters``."""
        return self.request("GET", "/nodes/detail", params=filters).json()["nodes"]

    def update_node(self, uuid: str, **fields: Any) -> dict[str, Any]:
        """Set top-level node fields with a JSON patch and return the node."""
        patch = [{"op": "add", "path": f"/{k}", "value": v} for k, v in fields.items()]
        return self.request("PATCH", f"/nodes/{uuid}", patch).json()

    def delete_node(self, uuid: str) -> None:
        """Delete the node."""
        self.request("DELETE", f"/nodes/{uuid}", expected=(204,))

    # Provisioning ----------------------------------------------------------

    def set_provision_state(self, uuid: str, verb: str, **extra: Any) -> None:
        """Request a provision state change (``manage``, ``active``, ...)."""
        self.request(
            "PUT", f"/nodes/{uuid}/states/provision", {"target": verb, **extra}, (202,)
        )

    def _provision(
        self, uuid: str, verb: str, wait: bool, **extra: Any
    ) -> dict[str, Any]:
        self.set_provision_state(uuid, verb, **extra)
        if wait:
            return self.wait_for_provision_state(uuid, _VERB_TARGETS[verb])
        return self.get_node(uuid)

    def manage(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """enroll / available / clean failed -> manageable."""
        return self._provision(uuid, "manage", wait)

    def provide(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """manageable -> cleaning -> available."""
        return self._provision(uuid, "provide", wait)

    def deploy(
        self, uuid: str, instance_uuid: str | None = None, wait: bool = True
    ) -> dict[str, Any]:
        """available -> deploying -> active, optionally for an instance."""
        if instance_uuid is not None:
            self.update_node(uuid, instance_uuid=instance_uuid)
        return self._provision(uuid, "active", wait)

    def undeploy(self, uuid: str, wait: bool = True) -> dict[str, Any]:
        """active -> deleting -> cleaning -> available."""
        return self._provision(uuid, "deleted", wait)

    def clean_manual(
        self,
        uuid: str,
        clean_steps: list[dict[str, Any]] | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """manageable -> cleaning -> manageable, running ``clean_steps``."""
        steps = DEFAULT_CLEAN_STEPS if clean_steps is None else clean_steps
        return self._provision(uuid, "clean", wait, clean_steps=steps)

    def fail_cleaning(self, uuid: str) -> dict[str, Any]:
        """manageable -> cleaning -> clean failed, via an unknown step.

        The conductor accepts the request, then rejects the step while
        cleaning, which is a real cleaning failure (``last_error`` set).
        """
        self.set_provision_state(
            uuid,
            "clean",
            clean_steps=[{"interface": "deploy", "step": "ndf_no_such_step"}],
        )
        return self.wait_for_provision_state(uuid, "clean failed")

    def make_available_node(self, **fields: Any) -> dict[str, Any]:
        """Create a node (``create_node``'s arguments), make it available."""
        node = self.create_node(**fields)
        self.manage(node["uuid"])
        return self.provide(node["uuid"])

    def wait_for_provision_state(
        self, uuid: str, target: str, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Poll until the node rests in ``target``; return the node.

        A node rests in a state when ``target_provision_state`` is unset
        (failure states keep it set, so for them reaching the state is
        enough).  Raises :class:`ProvisionStateError` at once if the node
        lands in a different failure state, or after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            node = self.get_node(uuid)
            state = node["provision_state"]
            if state == target and (
                node["target_provision_state"] is None
                or target in FAILED_PROVISION_STATES
            ):
                return node
            if state in FAILED_PROVISION_STATES and state != target:
                raise ProvisionStateError(
                    f"node {uuid} is in {state!r} while waiting for "
                    f"{target!r}: {node.get('last_error')}"
                )
            if time.monotonic() >= deadline:
                raise ProvisionStateError(
                    f"node {uuid} is in {state!r} (target "
                    f"{node['target_provision_state']!r}) after {timeout} s "
                    f"waiting for {target!r}; last_error: "
                    f"{node.get('last_error')}"
                )
            time.sleep(self.poll_interval)

    # Power -----------------------------------------------------------------

    def set_power_state(
        self, uuid: str, target: str, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Set ``power on`` / ``power off`` and wait until it is reported.

        Fake-hardware nodes start with power_state None and the fake deploy
        does not power them on, so tests that care set it explicitly.
        """
        self.request("PUT", f"/nodes/{uuid}/states/power", {"target": target}, (202,))
        deadline = time.monotonic() + timeout
        while True:
            node = self.get_node(uuid)
            if node["power_state"] == target and node["target_power_state"] is None:
                return node
            if time.monotonic() >= deadline:
                raise ProvisionStateError(
                    f"node {uuid} power is {node['power_state']!r} after "
                    f"{timeout} s waiting for {target!r}"
                )
            time.sleep(self.poll_interval)

    # Maintenance and traits ------------------------------------------------

    def set_maintenance(
        self, uuid: str, on: bool, reason: str | None = None
    ) -> dict[str, Any]:
        """Turn maintenance mode on (with ``reason``) or off; return node."""
        path = f"/nodes/{uuid}/maintenance"
        if on:
            body = {"reason": reason} if reason is not None else None
            self.request("PUT", path, body, (202,))
        else:
            self.request("DELETE", path, expected=(202,))
        return self.get_node(uuid)

    def get_traits(self, uuid: str) -> list[str]:
        """Return the node's traits."""
        return self.request("GET", f"/nodes/{uuid}/traits").json()["traits"]

    def add_trait(self, uuid: str, trait: str) -> None:
        """Add one trait to the node."""
        self.request("PUT", f"/nodes/{uuid}/traits/{trait}", expected=(204,))

    def remove_trait(self, uuid: str, trait: str) -> None:
        """Remove one trait from the node."""
        self.request("DELETE", f"/nodes/{uuid}/traits/{trait}", expected=(204,))
