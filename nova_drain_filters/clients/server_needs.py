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

"""Typed Nova calls for what a server needs from a host: its flavor and pin.

A client of its own, on the same compute endpoint as
:class:`~nova_drain_filters.clients.compute.ComputeClient`, because it pins
2.96 (checked once, before its first request), which only ``drain host
check`` needs: the server list embeds its flavor with its extra specs from
2.47 and shows ``pinned_availability_zone`` from 2.96
(``nova/api/openstack/compute/views/servers.py`` ``show``).
"""
import dataclasses
from collections.abc import Mapping
from typing import Any

from nova_drain_filters.clients import compute

#: 2.96: ``pinned_availability_zone``; Nova 31 (the oldest supported) goes
#: to 2.100.
NEEDS_VERSION = "2.96"


@dataclasses.dataclass(frozen=True)
class ServerNeed:
    """A server with its flavor and the zone it is pinned to."""

    uuid: str
    name: str
    status: str
    task_state: str | None
    host: str | None
    node: str | None
    vcpus: int
    ram: int
    disk: int
    ephemeral: int
    swap: int
    extra_specs: Mapping[str, str]
    #: No image: booted from a volume, so no root disk on the host.
    volume_backed: bool
    pinned_az: str | None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _need(body: dict[str, Any]) -> ServerNeed:
    flavor = body.get("flavor") or {}
    return ServerNeed(
        uuid=body["id"], name=body.get("name") or "",
        status=body.get("status", ""),
        task_state=body.get("OS-EXT-STS:task_state"),
        host=body.get("OS-EXT-SRV-ATTR:host"),
        node=body.get("OS-EXT-SRV-ATTR:hypervisor_hostname"),
        vcpus=_int(flavor.get("vcpus")), ram=_int(flavor.get("ram")),
        disk=_int(flavor.get("disk")),
        ephemeral=_int(flavor.get("ephemeral")),
        swap=_int(flavor.get("swap")),
        extra_specs={str(k): str(v) for k, v in
                     (flavor.get("extra_specs") or {}).items()},
        volume_backed=not body.get("image"),
        pinned_az=body.get("pinned_availability_zone") or None)


class NeedsClient(compute.ComputeClient):
    """Servers with their flavors, at 2.96."""

    microversion = NEEDS_VERSION

    def servers_on(self, host: str) -> list[ServerNeed]:
        """Every server Nova places on ``host``, of every project."""
        params = {"all_tenants": "1", "host": host}
        return [_need(s) for s in self._pages(
            "/servers/detail", "servers", params, NEEDS_VERSION)]
