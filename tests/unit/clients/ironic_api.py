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

"""Ironic API bodies for requests_mock, and the IronicClient test case."""
import json
from typing import Any
from urllib import parse

from nova_drain_filters import traits
from nova_drain_filters.clients import ironic
from tests.unit import fakes

ENDPOINT = "http://ironic.example"
NODES = ENDPOINT + "/v1/nodes"
NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
NODE_TRAITS = f"{NODES}/{NODE}/traits"
TRAIT_URL = f"{NODE_TRAITS}/{traits.BAREMETAL_UNAVAILABLE}"


def uuids(count: int, start: int = 0) -> list[str]:
    return [f"00000000-0000-0000-0000-{i:012d}"
            for i in range(start, start + count)]


def page(ids: list[str], next_link: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"nodes": [
        {"uuid": u, "provision_state": "available", "power_state": "power off",
         "maintenance": False, "traits": []} for u in ids]}
    if next_link:
        body["next"] = (f"{NODES}?limit={len(ids)}&marker={ids[-1]}"
                        "&fields=uuid")
    return body


def ironic_error(message: str) -> dict[str, Any]:
    """Ironic's double-encoded error body."""
    return {"error_message": json.dumps(
        {"faultstring": message, "faultcode": "Client", "debuginfo": None})}


def query(request: Any) -> dict[str, str]:
    return dict(parse.parse_qsl(parse.urlsplit(request.url).query))


class IronicTestCase(fakes.MockedServiceTestCase):
    CLIENT = ironic.IronicClient
    SERVICE_TYPE = "baremetal"
    ENDPOINT = ENDPOINT

    def serve(self, pages: list[dict[str, Any]]) -> None:
        """Answer GET /v1/nodes from ``pages``, chosen by the marker."""
        by_marker = {None: pages[0]}
        for prev, nxt in zip(pages, pages[1:], strict=False):
            by_marker[prev["nodes"][-1]["uuid"]] = nxt

        def answer(request: Any, context: Any) -> dict[str, Any]:
            return by_marker[query(request).get("marker")]

        self.mock.get(NODES, json=answer)

    def sent(self) -> list[dict[str, str]]:
        return [query(r) for r in self.api_calls()]
