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

"""Nova API bodies for requests_mock, and the ComputeClient test case."""
from typing import Any
from urllib import parse

from nova_drain_filters.clients import compute
from tests.unit import fakes

ENDPOINT = "http://nova.example/v2.1"
HV1 = "5a0f5a54-1e28-4b0b-9d3c-000000000001"
HV2 = "5a0f5a54-1e28-4b0b-9d3c-000000000002"
HV3 = "5a0f5a54-1e28-4b0b-9d3c-000000000003"
SVC = "0c2d4f7e-2b1a-4f0e-8f7a-0000000000aa"
SRV1 = "8f3c1d2e-0000-4000-8000-000000000001"
SRV2 = "8f3c1d2e-0000-4000-8000-000000000002"
MIG1 = "6d5e4f3a-0000-4000-8000-000000000001"
MIG2 = "6d5e4f3a-0000-4000-8000-000000000002"
NEXT = [{"rel": "next", "href": ENDPOINT + "/whatever?marker=x"}]


def hv_body(uuid: str, name: str, host: str = "c1", state: str = "up",
            htype: str | None = "ironic") -> dict[str, Any]:
    return {"id": uuid, "hypervisor_hostname": name, "hypervisor_type": htype,
            "state": state, "status": "enabled",
            "service": {"host": host, "id": SVC, "disabled_reason": None}}


def server_body(uuid: str, host: str | None = "c1",
                node: str | None = "n1") -> dict[str, Any]:
    return {"id": uuid, "status": "ACTIVE", "tenant_id": "proj",
            "OS-EXT-SRV-ATTR:host": host,
            "OS-EXT-SRV-ATTR:hypervisor_hostname": node}


def mig_body(uuid: str, status: str, mid: int) -> dict[str, Any]:
    return {"id": mid, "uuid": uuid, "instance_uuid": SRV1, "status": status,
            "source_node": "n1", "dest_node": "n2"}


def page(key: str, items: list[Any], more: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {key: items}
    if more:
        body[f"{key}_links"] = NEXT
    return {"json": body}


class NovaTestCase(fakes.MockedServiceTestCase):
    CLIENT = compute.ComputeClient
    SERVICE_TYPE = "compute"
    ENDPOINT = ENDPOINT

    def queries(self) -> list[dict[str, list[str]]]:
        return [parse.parse_qs(parse.urlparse(r.url).query)
                for r in self.api_calls()]
