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

"""PlacementClient's provider and allocation calls, against requests_mock."""
from typing import Any

from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement
from tests.unit import fakes

ENDPOINT = "http://placement.example"
RP1 = "4e8e5957-649f-477b-9e5b-000000000001"
RP2 = "4e8e5957-649f-477b-9e5b-000000000002"
CONSUMER = "c0a1b2c3-0000-4000-8000-000000000001"
ALLOC_URL = f"{ENDPOINT}/allocations/{CONSUMER}"


def consumer_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "allocations": {
            RP1: {"generation": 3, "resources": {"VCPU": 2}},
            RP2: {"generation": 9,
                  "resources": {"CUSTOM_BAREMETAL_GOLD": 1}}},
        "consumer_generation": 5, "project_id": "proj", "user_id": "user",
        "consumer_type": "INSTANCE"}
    body.update(overrides)
    return body


class AllocationTestCase(fakes.MockedServiceTestCase):
    CLIENT = placement.PlacementClient
    SERVICE_TYPE = "placement"
    ENDPOINT = ENDPOINT

    def version(self) -> str:
        return str(self.mock.last_request.headers["OpenStack-API-Version"])


class TestProviders(AllocationTestCase):
    def test_providers_all_at_1_14(self) -> None:
        rps = [{"uuid": RP1, "root_provider_uuid": RP1},
               {"uuid": RP2, "root_provider_uuid": RP1}]
        self.mock.get(ENDPOINT + "/resource_providers",
                      json={"resource_providers": rps})
        self.assertEqual(rps, self.client.providers())
        self.assertEqual("placement 1.14", self.version())
        self.assertEqual(ENDPOINT + "/resource_providers",
                         self.mock.last_request.url)

    def test_providers_required_at_1_18(self) -> None:
        self.mock.get(ENDPOINT + "/resource_providers",
                      json={"resource_providers": [{"uuid": RP1}]})
        self.assertEqual([{"uuid": RP1}],
                         self.client.providers(required="COMPUTE_NODE"))
        self.assertEqual("placement 1.18", self.version())
        self.assertTrue(self.mock.last_request.url.endswith(
            "/resource_providers?required=COMPUTE_NODE"),
            self.mock.last_request.url)

    def test_provider_allocations_keeps_only_resources(self) -> None:
        self.mock.get(f"{ENDPOINT}/resource_providers/{RP1}/allocations",
                      json={"allocations": {
                          CONSUMER: {"resources": {
                              "VCPU": 1, "CUSTOM_BAREMETAL_GOLD": 1}},
                          "other": {}},
                          "resource_provider_generation": 4})
        self.assertEqual(
            {CONSUMER: {"VCPU": 1, "CUSTOM_BAREMETAL_GOLD": 1}, "other": {}},
            self.client.provider_allocations(RP1))
        self.assertEqual("placement 1.0", self.version())

    def test_provider_allocations_missing_provider(self) -> None:
        self.mock.get(f"{ENDPOINT}/resource_providers/{RP1}/allocations",
                      status_code=404, json={"errors": [
                          {"status": 404, "detail": "no such provider"}]})
        exc = self.assertRaises(http.ApiError,
                                self.client.provider_allocations, RP1)
        self.assertEqual((404, "no such provider"), (exc.status, exc.message))

    def test_delete_provider(self) -> None:
        self.mock.delete(f"{ENDPOINT}/resource_providers/{RP1}",
                         status_code=204)
        self.client.delete_provider(RP1)
        self.assertEqual(("DELETE", "placement 1.14"),
                         (self.mock.last_request.method, self.version()))

    def test_delete_provider_in_use(self) -> None:
        self.mock.delete(f"{ENDPOINT}/resource_providers/{RP1}",
                         status_code=409, json={"errors": [
                             {"status": 409, "detail": "has allocations"}]})
        exc = self.assertRaises(http.ApiError, self.client.delete_provider, RP1)
        self.assertEqual((409, "has allocations"), (exc.status, exc.message))


class TestConsumerAllocations(AllocationTestCase):
    def test_read_at_1_38(self) -> None:
        self.mock.get(ALLOC_URL, json=consumer_body())
        self.assertEqual(consumer_body(),
                         self.client.consumer_allocations(CONSUMER))
        self.assertEqual("placement 1.38", self.version())

    def test_replace_body(self) -> None:
        self.mock.put(ALLOC_URL, status_code=204)
        current = consumer_body()
        keep = {RP2: current["allocations"][RP2]}
        self.client.replace_consumer_allocations(CONSUMER, keep, current)
        self.assertEqual("placement 1.38", self.version())
        self.assertEqual({
            "allocations": {RP2: {"resources": {"CUSTOM_BAREMETAL_GOLD": 1}}},
            "consumer_generation": 5, "project_id": "proj",
            "user_id": "user", "consumer_type": "INSTANCE"},
            self.mock.last_request.json())

    def test_replace_keeps_migration_type_and_defaults_instance(self) -> None:
        self.mock.put(ALLOC_URL, status_code=204)
        keep = {RP1: {"resources": {"VCPU": 2}}}
        self.client.replace_consumer_allocations(
            CONSUMER, keep, consumer_body(consumer_type="MIGRATION"))
        self.assertEqual("MIGRATION",
                         self.mock.last_request.json()["consumer_type"])
        current = consumer_body()
        del current["consumer_type"], current["consumer_generation"]
        self.client.replace_consumer_allocations(CONSUMER, keep, current)
        sent = self.mock.last_request.json()
        self.assertEqual(("INSTANCE", None),
                         (sent["consumer_type"], sent["consumer_generation"]))
        self.assertIn("consumer_generation", sent)

    def test_replace_of_a_consumer_nova_wrote(self) -> None:
        # Nova writes allocations below 1.38, so placement reads their type
        # back as "unknown" (placement/objects/consumer_type.py
        # NULL_CONSUMER_TYPE_ALIAS), which its PUT schema rejects (400):
        # consumer_type must match ^[A-Z0-9_]+$.
        self.mock.put(ALLOC_URL, status_code=204)
        self.client.replace_consumer_allocations(
            CONSUMER, {RP1: {"resources": {"VCPU": 2}}},
            consumer_body(consumer_type="unknown"))
        sent = self.mock.last_request.json()["consumer_type"]
        self.assertIsInstance(sent, str)
        self.assertRegex(sent, r"^[A-Z0-9_]+$")

    def test_replace_does_not_change_its_input(self) -> None:
        self.mock.put(ALLOC_URL, status_code=204)
        current = consumer_body()
        keep = dict(current["allocations"])
        self.client.replace_consumer_allocations(CONSUMER, keep, current)
        self.assertEqual(consumer_body(), current)

    def test_replace_generation_conflict(self) -> None:
        self.mock.put(ALLOC_URL, status_code=409, json={"errors": [{
            "status": 409, "code": "placement.concurrent_update",
            "detail": "consumer generation conflict"}]})
        exc = self.assertRaises(
            http.ApiError, self.client.replace_consumer_allocations, CONSUMER,
            {}, consumer_body())
        self.assertEqual((409, "consumer generation conflict"),
                         (exc.status, exc.message))

    def test_replace_expects_204(self) -> None:
        self.mock.put(ALLOC_URL, status_code=200, json={})
        exc = self.assertRaises(
            http.ApiError, self.client.replace_consumer_allocations, CONSUMER,
            {}, consumer_body())
        self.assertEqual(200, exc.status)

    def test_delete_is_an_empty_write_guarded_by_the_generation(
            self) -> None:
        # Never an unguarded DELETE: it would also remove what another
        # writer added since the caller's read.
        self.mock.put(ALLOC_URL, status_code=204)
        self.client.delete_consumer_allocations(
            CONSUMER, consumer_body(consumer_type="unknown"))
        self.assertEqual(("PUT", "placement 1.38"),
                         (self.mock.last_request.method, self.version()))
        self.assertEqual({
            "allocations": {}, "consumer_generation": 5,
            "project_id": "proj", "user_id": "user",
            "consumer_type": "INSTANCE"}, self.mock.last_request.json())
        self.assertFalse(any(r.method == "DELETE"
                             for r in self.mock.request_history))

    def test_delete_generation_conflict_is_a_conflict(self) -> None:
        self.mock.put(ALLOC_URL, status_code=409, json={"errors": [{
            "status": 409, "code": "placement.concurrent_update",
            "detail": "consumer generation conflict - expected null but "
                      "got 5"}]})
        exc = self.assertRaises(http.Conflict,
                                self.client.delete_consumer_allocations,
                                CONSUMER, consumer_body())
        self.assertEqual(409, exc.status)
        self.assertIn(f"PUT /allocations/{CONSUMER}", str(exc))
