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

"""Servers with their flavors and pins, and placement's candidates."""
from urllib import parse

from nova_drain_filters.clients import placement
from nova_drain_filters.clients import server_needs
from tests.unit import fakes
from tests.unit.clients import nova_api
from tests.unit.clients.nova_api import ENDPOINT
from tests.unit.clients.nova_api import SRV1


class TestNeeds(nova_api.NovaTestCase):
    CLIENT = server_needs.NeedsClient

    def test_servers_on_a_host_with_flavor_and_pin(self) -> None:
        self.mock.get(ENDPOINT + "/servers/detail", json={"servers": [{
            "id": SRV1, "name": "web", "status": "ACTIVE",
            "OS-EXT-SRV-ATTR:host": "c1", "image": "",
            "pinned_availability_zone": "az1",
            "flavor": {"vcpus": 2, "ram": 512, "disk": 10, "ephemeral": 0,
                       "swap": "", "extra_specs": {
                           "trait:CUSTOM_X": "required"}}}]})
        [found] = self.client.servers_on("c1")
        self.assertEqual((2, 512, 10, 0, True, "az1",
                          {"trait:CUSTOM_X": "required"}),
                         (found.vcpus, found.ram, found.disk, found.swap,
                          found.volume_backed, found.pinned_az,
                          dict(found.extra_specs)))
        last = self.mock.last_request
        self.assertEqual("compute 2.96",
                         last.headers["OpenStack-API-Version"])
        self.assertEqual(["c1"], parse.parse_qs(
            parse.urlparse(last.url).query)["host"])


PLACEMENT = "http://placement.example"


class TestCandidates(fakes.MockedServiceTestCase):
    CLIENT = placement.PlacementClient
    SERVICE_TYPE = "placement"
    ENDPOINT = PLACEMENT

    def test_one_request_with_forbidden_traits(self) -> None:
        self.mock.get(PLACEMENT + "/allocation_candidates", json={
            "allocation_requests": [
                {"allocations": {"rp1": {"resources": {"VCPU": 1}}}}],
            "provider_summaries": {
                "rp1": {"resources": {"VCPU": {"capacity": 16, "used": 3}},
                        "traits": ["HW_CPU_X86_AVX2"]},
                "rp2": {"resources": {"VCPU": {"capacity": 4, "used": 4}},
                        "traits": []}}})
        found = self.client.allocation_candidates(
            {"VCPU": 1, "MEMORY_MB": 512}, ["HW_CPU_X86_AVX2"], ["CUSTOM_Y"])
        self.assertEqual(frozenset({"rp1"}), found.offered)
        self.assertEqual({"VCPU": (16, 3)}, found.summaries["rp1"].resources)
        self.assertEqual(frozenset({"HW_CPU_X86_AVX2"}),
                         found.summaries["rp1"].traits)
        query = parse.parse_qs(parse.urlparse(
            self.mock.last_request.url).query)
        self.assertEqual((["MEMORY_MB:512,VCPU:1"],
                          ["HW_CPU_X86_AVX2,!CUSTOM_Y"]),
                         (query["resources"], query["required"]))
        self.assertEqual("placement 1.22", self.mock.last_request.headers[
            "OpenStack-API-Version"])
