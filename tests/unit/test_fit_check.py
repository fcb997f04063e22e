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

"""The check's engine: the picture read in bulk, then the simulation."""
import dataclasses
from typing import Any
from unittest import mock

import testtools

from nova_drain_filters import fit
from nova_drain_filters import fit_check
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import placement
from nova_drain_filters.clients import server_moves
from nova_drain_filters.clients import server_needs


def hv(uuid: str, host: str, kind: str = "QEMU") -> compute.Hypervisor:
    return compute.Hypervisor(uuid, host, kind, host, None, "up", "enabled")


def server(uuid: str, status: str = "ACTIVE", ram: int = 1024,
           specs: dict[str, str] | None = None,
           az: str | None = None) -> server_needs.ServerNeed:
    return server_needs.ServerNeed(uuid, uuid, status, None, "src", "src", 1,
                                   ram, 1, 0, 0, specs or {}, False, az)


def summary(uuid: str, ram_used: int = 0,
            traits: frozenset[str] = frozenset()) -> placement.ProviderRoom:
    return placement.ProviderRoom(uuid, {"VCPU": (8, 0), "MEMORY_MB": (
        4096, ram_used), "DISK_GB": (100, 0)}, traits)


class TestCheck(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.needs = mock.Mock(spec=server_needs.NeedsClient)
        self.moves = mock.Mock(spec=server_moves.MoveClient)
        self.placement = mock.Mock(spec=placement.PlacementClient)
        self.moves.server_groups.return_value = []
        self.placement.existing_traits.side_effect = lambda names: {
            n for n in names if n.startswith("HW_")}
        self.cloud = fit_check.Cloud(
            [hv("rp-src", "src"), hv("rp1", "h1"), hv("rp2", "h2"),
             hv("rp3", "h3")], excluded={"rp3"},
            aggregates=[compute.Aggregate(1, "a", ("h2",), "az2")],
            where={})

    def check(self) -> fit.Result:
        return fit_check.check(fit_check.Clients(
            self.needs, self.moves, self.placement), self.cloud, ["src"])

    def answer(self, offered: set[str], **summaries: Any
               ) -> placement.Candidates:
        return placement.Candidates(frozenset(offered), summaries)

    def test_one_request_per_shape_and_exclusions(self) -> None:
        self.needs.servers_on.return_value = [
            server("a"), server("b"), server("c", "SUSPENDED")]
        self.placement.allocation_candidates.return_value = self.answer(
            {"rp1", "rp2", "rp3", "rp-src"}, rp1=summary("rp1", 2048),
            rp2=summary("rp2"), rp3=summary("rp3"),
            **{"rp-src": summary("rp-src")})
        # h2 has 4096 MB free, h1 2048; after a, h2 still has more.
        result = self.check()
        self.assertEqual(1, self.placement.allocation_candidates.call_count)
        self.assertEqual(
            {"a": "h2", "b": "h2", "c": ""},
            {v.need.step.server: v.destination for v in result.verdicts})
        self.assertEqual(fit.Why.UNMOVABLE, result.verdicts[2].why)

    def test_unknown_required_trait_is_not_asked(self) -> None:
        self.needs.servers_on.return_value = [
            server("a", specs={"trait:CUSTOM_NEVER": "required",
                               "trait:HW_SEEN": "forbidden",
                               "trait:CUSTOM_UNSEEN": "forbidden"}),
            server("b", specs={"trait:CUSTOM_UNSEEN": "forbidden"},
                   az="az2")]
        self.placement.allocation_candidates.return_value = self.answer(
            {"rp1", "rp2"}, rp1=summary("rp1"), rp2=summary("rp2"))
        result = self.check()
        # Only b's shape is asked, without the trait placement lacks.
        self.placement.allocation_candidates.assert_called_once_with(
            {"DISK_GB": 1, "MEMORY_MB": 1024, "VCPU": 1}, frozenset(),
            frozenset())
        found = {v.need.step.server: (v.destination, v.why)
                 for v in result.verdicts}
        self.assertEqual({"a": ("", fit.Why.TRAIT), "b": ("h2", None)},
                         found)

    def test_anti_affinity_with_a_member_elsewhere(self) -> None:
        self.needs.servers_on.return_value = [server("a")]
        self.moves.server_groups.return_value = [server_moves.ServerGroup(
            "g", "web", "anti-affinity", ("a", "x"))]
        self.cloud = dataclasses.replace(self.cloud, where={"x": "h2",
                                                            "a": "src"})
        self.placement.allocation_candidates.return_value = self.answer(
            {"rp1", "rp2"}, rp1=summary("rp1", 2048), rp2=summary("rp2"))
        [verdict] = self.check().verdicts
        self.assertEqual("h1", verdict.destination)



class TestProviderRooms(testtools.TestCase):
    def test_one_request_per_class_merged(self) -> None:
        client = mock.Mock(spec=placement.PlacementClient)
        client.allocation_candidates.side_effect = [
            placement.Candidates(frozenset({"rp1"}), {"rp1": summary("rp1")}),
            placement.Candidates(frozenset({"rp2"}), {"rp2": summary(
                "rp2", 4096)})]
        found = fit_check.provider_rooms(client, ["VCPU", "MEMORY_MB"])
        self.assertEqual([mock.call({"VCPU": 1}), mock.call({"MEMORY_MB": 1})],
                         client.allocation_candidates.call_args_list)
        self.assertEqual((4096, 4096), found["rp2"]["MEMORY_MB"])
        self.assertEqual({"rp1", "rp2"}, set(found))
