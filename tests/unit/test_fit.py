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

"""Will it fit: the packing, as pure functions over facts."""
from typing import Any

import testtools

from nova_drain_filters import fit
from nova_drain_filters.fit import Why
from nova_drain_filters.migration import plan


def room(host: str, vcpu: int = 8, ram: int = 8192, used_vcpu: int = 0,
         used_ram: int = 0, **kw: Any) -> fit.HostRoom:
    return fit.HostRoom(host, {"VCPU": vcpu, "MEMORY_MB": ram},
                        {"VCPU": used_vcpu, "MEMORY_MB": used_ram}, **kw)


def need(server: str, vcpu: int = 1, ram: int = 1024, host: str = "src",
         action: plan.Action = plan.Action.LIVE, **kw: Any) -> fit.Need:
    return fit.Need(plan.Step(host, server, server, action),
                    {"VCPU": vcpu, "MEMORY_MB": ram}, **kw)


def placed(result: fit.Result) -> dict[str, tuple[str, Why | None]]:
    return {v.need.step.server: (v.destination, v.why)
            for v in result.verdicts}


class TestPacking(testtools.TestCase):
    def test_spreads_by_free_ram(self) -> None:
        result = fit.simulate([need("a", ram=1024), need("b", ram=1024)],
                              [room("h1", used_ram=1024), room("h2")])
        # h2 has more free RAM; after a lands there both have 7168 free
        # and the tie goes to the first by name.
        self.assertEqual({"a": ("h2", None), "b": ("h1", None)},
                         placed(result))

    def test_servers_compete_for_the_same_room(self) -> None:
        result = fit.simulate([need("a", ram=6000), need("b", ram=6000)],
                              [room("h1")])
        self.assertEqual({"a": ("h1", None), "b": ("", Why.NO_ROOM)},
                         placed(result))
        self.assertEqual("MEMORY_MB: needs 6000, at most 2192 free on any "
                         "host", result.verdicts[1].detail)
        self.assertEqual(["b"], [v.need.step.server for v in result.homeless])

    def test_exact_fit(self) -> None:
        result = fit.simulate([need("a", vcpu=2, ram=2048)],
                              [room("h1", vcpu=4, ram=4096, used_vcpu=2,
                                    used_ram=2048)])
        self.assertEqual({"a": ("h1", None)}, placed(result))
        ram = {c.resource_class: c for c in result.summary}["MEMORY_MB"]
        self.assertEqual((4096, 2048, 0, 0.5, 0.0),
                         (ram.capacity, ram.free_before, ram.free_after,
                          ram.fraction_before, ram.fraction_after))

    def test_one_short_does_not_fit(self) -> None:
        result = fit.simulate([need("a", ram=2049)],
                              [room("h1", ram=4096, used_ram=2048)])
        self.assertEqual({"a": ("", Why.NO_ROOM)}, placed(result))

    def test_larger_than_any_host(self) -> None:
        result = fit.simulate([need("big", vcpu=64)],
                              [room("h1"), room("h2", vcpu=16)])
        verdict = result.verdicts[0]
        self.assertEqual((False, Why.TOO_BIG, 0),
                         (verdict.fits, verdict.why, verdict.candidates))
        self.assertEqual("VCPU: needs 64, at most 16 on any host",
                         verdict.detail)

    def test_migrate_order_live_before_cold(self) -> None:
        cold = need("a-cold", ram=6000, action=plan.Action.COLD)
        live = need("z-live", ram=6000)
        result = fit.simulate([cold, live], [room("h1")])
        self.assertEqual({"z-live": ("h1", None),
                          "a-cold": ("", Why.NO_ROOM)}, placed(result))

    def test_unmovable_is_not_packed(self) -> None:
        stays = fit.Need(plan.Step("src", "s", "s", plan.Action.NONE,
                                   plan.Why.AFFINITY, "g (1 other member(s))"),
                         {"MEMORY_MB": 1024})
        result = fit.simulate([stays], [room("h1")])
        self.assertEqual({"s": ("", Why.UNMOVABLE)}, placed(result))
        self.assertEqual([], result.homeless)

    def test_no_host_left(self) -> None:
        self.assertEqual({"a": ("", Why.NO_HOST)},
                         placed(fit.simulate([need("a")], [])))

    def test_candidates_count_the_hosts_that_could_take_it(self) -> None:
        result = fit.simulate([need("a", ram=4096)],
                              [room("h1"), room("h2"),
                               room("h3", used_ram=8000)])
        self.assertEqual(2, result.verdicts[0].candidates)

    def test_placement_offer_restricts(self) -> None:
        result = fit.simulate([need("a", offered=frozenset({"h1"})),
                               need("b", offered=frozenset())],
                              [room("h1"), room("h2")])
        self.assertEqual({"a": ("h1", None), "b": ("", Why.PLACEMENT)},
                         placed(result))


class TestPinsAndTraits(testtools.TestCase):
    def test_az_pin(self) -> None:
        rooms = [room("h1", az="az1"), room("h2", az="az2")]
        result = fit.simulate([need("a", az="az2"), need("b", az="az3")],
                              rooms)
        self.assertEqual({"a": ("h2", None), "b": ("", Why.AZ)},
                         placed(result))
        self.assertEqual("pinned to az3", result.verdicts[1].detail)

    def test_required_and_forbidden_traits(self) -> None:
        rooms = [room("h1", traits=frozenset({"HW_CPU_X86_AVX2"})),
                 room("h2", traits=frozenset({"CUSTOM_GOLD"}))]
        result = fit.simulate([
            need("avx", required=frozenset({"HW_CPU_X86_AVX2"})),
            need("plain", forbidden=frozenset({"HW_CPU_X86_AVX2"}),
                 ram=2048),
            need("gpu", required=frozenset({"CUSTOM_GPU"}))], rooms)
        self.assertEqual({"avx": ("h1", None), "plain": ("h2", None),
                          "gpu": ("", Why.TRAIT)}, placed(result))
        gpu = result.verdicts[1]
        self.assertEqual("no host left with required CUSTOM_GPU", gpu.detail)


class TestAntiAffinity(testtools.TestCase):
    def test_members_never_share_a_host(self) -> None:
        group = fit.Group("web", frozenset({"a", "b", "c"}))
        result = fit.simulate([need("a"), need("b"), need("c")],
                              [room("h1"), room("h2")], [group],
                              {"a": "src", "b": "src", "c": "src"})
        self.assertEqual({"a": ("h1", None), "b": ("h2", None),
                          "c": ("", Why.ANTI_AFFINITY)}, placed(result))
        self.assertEqual("group web: at most 1 member(s) a host",
                         result.verdicts[2].detail)

    def test_members_living_elsewhere_count(self) -> None:
        group = fit.Group("web", frozenset({"a", "other"}))
        result = fit.simulate([need("a")], [room("h1", used_ram=4096),
                                            room("h2")], [group],
                              {"a": "src", "other": "h2"})
        # h2 has more free RAM but holds a member already.
        self.assertEqual({"a": ("h1", None)}, placed(result))

    def test_max_server_per_host(self) -> None:
        group = fit.Group("web", frozenset({"a", "b", "c", "other"}),
                          max_per_host=2)
        result = fit.simulate([need("a"), need("b"), need("c")],
                              [room("h1"), room("h2", used_ram=4096)],
                              [group], {"other": "h1"})
        self.assertEqual({"a": ("h1", None), "b": ("h2", None),
                          "c": ("h2", None)}, placed(result))

    def test_max_server_per_host_full(self) -> None:
        group = fit.Group("web", frozenset({"a", "x", "y"}), max_per_host=2)
        result = fit.simulate([need("a")], [room("h1")], [group],
                              {"x": "h1", "y": "h1"})
        self.assertEqual({"a": ("", Why.ANTI_AFFINITY)}, placed(result))


class TestFlavor(testtools.TestCase):
    def test_resources_as_nova_builds_them(self) -> None:
        self.assertEqual(
            {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 23},
            fit.flavor_resources(2, 2048, 20, 2, 513, {}, False))
        self.assertEqual(
            {"VCPU": 2, "MEMORY_MB": 2048},
            fit.flavor_resources(2, 2048, 20, 0, 0, {}, True))

    def test_resources_overrides(self) -> None:
        self.assertEqual(
            {"MEMORY_MB": 1024, "DISK_GB": 1, "CUSTOM_BAREMETAL_GOLD": 1},
            fit.flavor_resources(1, 1024, 1, 0, 0, {
                "resources:VCPU": "0", "resources:CUSTOM_BAREMETAL_GOLD": "1",
                "hw:cpu_policy": "shared"}, False))

    def test_traits(self) -> None:
        self.assertEqual(
            (frozenset({"CUSTOM_A"}), frozenset({"CUSTOM_B"})),
            fit.flavor_traits({"trait:CUSTOM_A": "required",
                               "trait:CUSTOM_B": "forbidden",
                               "trait1:CUSTOM_C": "required"}))


class TestReasonOrder(testtools.TestCase):
    def test_no_room_is_named_before_placement(self) -> None:
        # Placement offers nothing because there is no room: the reason
        # is the room, with its tightest class.
        result = fit.simulate([need("a", ram=9000, offered=frozenset())],
                              [room("h1", ram=16384, used_ram=8192)])
        self.assertEqual(Why.NO_ROOM, result.verdicts[0].why)
