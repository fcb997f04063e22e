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

"""The filters' fast paths decide exactly as the slow paths (Nova's rules)."""
import datetime
import itertools
from typing import Any

import fixtures
from nova.scheduler import host_manager

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import baremetal_availability_filter
from nova_drain_filters.filters import base
from nova_drain_filters.filters import disabled_service_filter
from nova_drain_filters.ironic_view import snapshot
from tests.unit import ironic_fakes
from tests.unit.filters import helpers

UTC = datetime.timezone.utc


class TestUpCheck(helpers.FilterTestCase):
    def services(self) -> list[dict[str, Any]]:
        beats: list[Any] = [None, helpers.ago(10), helpers.ago(60),
                            helpers.ago(61), helpers.ago(-60),
                            helpers.ago(-61), helpers.ago(10).replace(
                                tzinfo=UTC), helpers.ago(61).replace(
                                tzinfo=UTC), helpers.ago(30).strftime(
                                "%Y-%m-%dT%H:%M:%S.%f")]
        found = []
        for last, created, forced in itertools.product(
                beats, beats[:4], (False, True)):
            if created is None:
                created = helpers.ago(86400)
            found.append({"last_seen_up": last, "created_at": created,
                          "forced_down": forced, "disabled": False})
        return found

    def test_same_verdict_as_nova(self) -> None:
        filt = disabled_service_filter.DisabledServiceFilter()
        check = base.UpCheck(filt.servicegroup_api)
        self.assertIsNotNone(check.window)  # the db driver: fast path on
        for service in self.services():
            wrapped = host_manager.ReadOnlyDict(service)
            self.assertEqual(
                filt.servicegroup_api.service_is_up(wrapped),
                check(base.plain(wrapped)) and not service["forced_down"],
                service)

    def test_a_patched_servicegroup_is_asked(self) -> None:
        filt = disabled_service_filter.DisabledServiceFilter()
        self.useFixture(fixtures.MockPatchObject(
            filt.servicegroup_api, "service_is_up", return_value=False))
        check = base.UpCheck(filt.servicegroup_api)
        self.assertIsNone(check.window)
        self.assertFalse(check({"last_seen_up": helpers.ago(1)}))

    def test_fast_and_slow_paths_agree(self) -> None:
        filt = disabled_service_filter.DisabledServiceFilter()
        hosts = []
        for i, service in enumerate(self.services()):
            for disabled in (False, True):
                hosts.append(self.host(f"h{i}-{disabled}", **dict(
                    service, disabled=disabled)))
        found = filt.rejections(hosts, self.spec())
        for host in hosts:
            self.assertEqual(filt.host_reasons(host, self.spec()),
                             found.get(id(host), []), host.service)


class TestBaremetalFastPath(helpers.FilterTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.filt = baremetal_availability_filter.BaremetalAvailabilityFilter()
        nodes = {n.uuid: n for n in (
            ironic_fakes.ironic_node("free"),
            ironic_fakes.ironic_node("maint", maintenance=True,
                                     maintenance_reason="bmc"),
            ironic_fakes.ironic_node("busy", instance_uuid="i-1"))}
        self.snap = snapshot.Snapshot(
            nodes, 0.0, 0.0, 1, datetime.datetime.now(UTC))
        self.view = helpers.FakeIronicView()
        self.view.snapshot = self.snap
        self.useFixture(fixtures.MockPatchObject(
            ironic_view, "get_view", lambda: self.view))

    def test_snapshot_finds_the_unusable_once_their_reasons_on_asking(
            self) -> None:
        self.assertEqual({"maint", "busy"}, set(self.snap.unusable))
        self.assertNotIn("free", self.snap.unusable)
        self.assertIsNone(self.snap.unusable.get("free"))
        self.assertEqual(decisions.baremetal_reasons(self.snap.nodes["maint"]),
                         self.snap.unusable["maint"])
        self.assertRaises(KeyError, lambda: self.snap.unusable["free"])

    def test_listed_nodes_never_reach_the_view(self) -> None:
        hosts = [helpers.ironic_host(n) for n in ("free", "maint", "busy")]
        found = self.filt.rejections(hosts, self.spec())
        self.assertEqual({id(hosts[1]): self.snap.unusable["maint"],
                          id(hosts[2]): self.snap.unusable["busy"]}, found)
        self.assertIsNot(self.snap.unusable["maint"], found[id(hosts[1])])
        self.assertEqual([], self.view.asked)
        self.assertEqual(1, self.view.started)

    def test_unlisted_node_asks_the_view(self) -> None:
        new = helpers.ironic_host("new")
        self.assertEqual([new], self.filt.filter_all([new], self.spec()))
        self.assertEqual([("new",)], self.view.asked)

    def test_unlisted_node_counts_the_request_as_known(self) -> None:
        # The blast-radius verdict needs the listed nodes Nova offers too.
        hosts = [helpers.ironic_host(n) for n in ("free", "new", "newer")]
        self.filt.filter_all(hosts, self.spec())
        self.assertEqual(["free", "new", "newer"], self.view.observed)
        self.assertEqual([("new",), ("newer",)], self.view.asked)

    def test_all_listed_observes_nothing(self) -> None:
        self.filt.filter_all([helpers.ironic_host("free")], self.spec())
        self.assertEqual([], self.view.observed)
