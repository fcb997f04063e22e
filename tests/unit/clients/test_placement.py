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

from typing import Any

import ddt

from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement
from tests.unit import fakes

ENDPOINT = "http://placement.example"
RP = "4e8e5957-649f-477b-9e5b-f1f75b21c03c"
RP_TRAITS = f"{ENDPOINT}/resource_providers/{RP}/traits"


def traits_body(traits: set[str], generation: int) -> dict[str, Any]:
    return {"json": {"traits": sorted(traits),
                     "resource_provider_generation": generation}}


class PlacementTestCase(fakes.MockedServiceTestCase):
    CLIENT = placement.PlacementClient
    SERVICE_TYPE = "placement"
    ENDPOINT = ENDPOINT

    def puts(self) -> list[Any]:
        return [r for r in self.api_calls() if r.method == "PUT"]


class TestTraits(PlacementTestCase):
    def test_ensure_trait_created(self) -> None:
        self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=201)
        self.assertIs(True, self.client.ensure_trait("CUSTOM_A"))
        self.assertEqual("placement 1.6", self.mock.last_request.headers[
            "OpenStack-API-Version"])

    def test_ensure_trait_existed(self) -> None:
        self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=204)
        self.assertIs(False, self.client.ensure_trait("CUSTOM_A"))

    def test_ensure_trait_error(self) -> None:
        self.mock.put(ENDPOINT + "/traits/CUSTOM_A", status_code=400,
                      json={"errors": [{"detail": "bad trait"}]})
        exc = self.assertRaises(http.ApiError, self.client.ensure_trait,
                                "CUSTOM_A")
        self.assertEqual(400, exc.status)
        self.assertEqual("bad trait", exc.message)

    def test_existing_traits(self) -> None:
        self.mock.get(ENDPOINT + "/traits",
                      json={"traits": ["CUSTOM_B", "CUSTOM_UNASKED"]})
        found = self.client.existing_traits(["CUSTOM_B", "CUSTOM_A",
                                             "CUSTOM_B"])
        self.assertEqual({"CUSTOM_B"}, found)
        self.assertEqual(1, len(self.api_calls()))
        self.assertTrue(self.mock.last_request.url.endswith(
            "/traits?name=in:CUSTOM_A,CUSTOM_B"), self.mock.last_request.url)

    def test_existing_traits_empty_asks_nothing(self) -> None:
        self.assertEqual(set(), self.client.existing_traits([]))
        self.assertEqual(0, len(self.api_calls()))

    def test_provider_traits(self) -> None:
        self.mock.get(RP_TRAITS, **traits_body({"CUSTOM_A", "HW_CPU_X86_AVX"},
                                               7))
        self.assertEqual(({"CUSTOM_A", "HW_CPU_X86_AVX"}, 7),
                         self.client.provider_traits(RP))


@ddt.ddt
class TestUpdateProviderTraits(PlacementTestCase):
    def test_nothing_to_change(self) -> None:
        self.mock.get(RP_TRAITS, **traits_body({"CUSTOM_A", "HW_X"}, 3))
        self.assertIs(False, self.client.update_provider_traits(
            RP, add=["CUSTOM_A"], remove=["CUSTOM_GONE"]))
        self.assertEqual([], self.puts())

    def test_add_and_remove_keep_others(self) -> None:
        self.mock.get(RP_TRAITS, **traits_body(
            {"COMPUTE_STATUS_DISABLED", "CUSTOM_OLD", "HW_X"}, 3))
        self.mock.put(RP_TRAITS, **traits_body(set(), 4))
        self.assertIs(True, self.client.update_provider_traits(
            RP, add={"CUSTOM_NEW"}, remove=("CUSTOM_OLD",)))
        puts = self.puts()
        self.assertEqual(1, len(puts))
        self.assertEqual(
            {"traits": ["COMPUTE_STATUS_DISABLED", "CUSTOM_NEW", "HW_X"],
             "resource_provider_generation": 3}, puts[0].json())
        self.assertEqual("placement 1.6",
                         puts[0].headers["OpenStack-API-Version"])

    def test_generators_are_read_once(self) -> None:
        self.mock.get(RP_TRAITS, [traits_body(set(), 1),
                                  traits_body(set(), 2)])
        self.mock.put(RP_TRAITS, [{"status_code": 409, "json": {}},
                                  traits_body({"CUSTOM_A"}, 3)])
        self.assertTrue(self.client.update_provider_traits(
            RP, add=(t for t in ["CUSTOM_A"])))
        self.assertEqual(["CUSTOM_A"], self.puts()[1].json()["traits"])

    def test_conflict_rereads_and_keeps_concurrent_trait(self) -> None:
        self.mock.get(RP_TRAITS, [
            traits_body({"HW_X"}, 1),
            traits_body({"HW_X", "COMPUTE_STATUS_DISABLED"}, 2),
        ])
        self.mock.put(RP_TRAITS, [
            {"status_code": 409, "json": {"errors": [
                {"status": 409, "title": "Conflict",
                 "code": "placement.concurrent_update"}]}},
            traits_body(set(), 3),
        ])
        self.assertIs(True, self.client.update_provider_traits(
            RP, add=["CUSTOM_DRAIN_STALE_NODE"]))
        puts = self.puts()
        self.assertEqual(2, len(puts))
        self.assertEqual(1, puts[0].json()["resource_provider_generation"])
        self.assertEqual(
            {"traits": ["COMPUTE_STATUS_DISABLED", "CUSTOM_DRAIN_STALE_NODE",
                        "HW_X"],
             "resource_provider_generation": 2}, puts[1].json())

    def test_conflict_resolved_by_other_writer(self) -> None:
        self.mock.get(RP_TRAITS, [traits_body(set(), 1),
                                  traits_body({"CUSTOM_A"}, 2)])
        self.mock.put(RP_TRAITS, status_code=409, json={})
        self.assertIs(False, self.client.update_provider_traits(
            RP, add=["CUSTOM_A"]))
        self.assertEqual(1, len(self.puts()))

    def test_gives_up_after_max_retries(self) -> None:
        self.mock.get(RP_TRAITS, **traits_body(set(), 1))
        self.mock.put(RP_TRAITS, status_code=409, json={})
        exc = self.assertRaises(http.ApiError,
                                self.client.update_provider_traits, RP,
                                add=["CUSTOM_A"])
        self.assertEqual(409, exc.status)
        self.assertIn(str(placement.MAX_CONFLICT_RETRIES), exc.message)
        self.assertEqual(placement.MAX_CONFLICT_RETRIES, len(self.puts()))
        gets = [r for r in self.api_calls() if r.method == "GET"]
        self.assertEqual(placement.MAX_CONFLICT_RETRIES, len(gets))

    @ddt.data(("PUT", 400, "No such trait(s)", 1),
              ("GET", 404, "No resource provider", 0))
    @ddt.unpack
    def test_other_error_propagates(self, method: str, status: int,
                                    detail: str, puts: int) -> None:
        error = {"status_code": status,
                 "json": {"errors": [{"detail": detail}]}}
        self.mock.get(RP_TRAITS, **(error if method == "GET"
                                    else traits_body(set(), 1)))
        self.mock.put(RP_TRAITS, **error)
        exc = self.assertRaises(http.ApiError,
                                self.client.update_provider_traits, RP,
                                add=["CUSTOM_A"])
        self.assertEqual((method, status, detail),
                         (exc.method, exc.status, exc.message))
        self.assertEqual(puts, len(self.puts()))
