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

import fixtures

from nova_drain_filters import decisions
from nova_drain_filters.filters import disabled_service_filter
from tests.unit.filters import helpers

RC = decisions.ReasonCode


class TestDisabledServiceFilter(helpers.FilterTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.filt = disabled_service_filter.DisabledServiceFilter()

    def reasons(self, host: object) -> list[decisions.Reason]:
        return self.filt.rejections([host], self.spec()).get(id(host), [])

    def test_flags(self) -> None:
        self.assertIs(True, self.filt.run_filter_once_per_request)
        self.assertIs(False, self.filt.RUN_ON_REBUILD)
        self.assertTrue(self.filt.run_filter_for_index(0))
        self.assertFalse(self.filt.run_filter_for_index(1))

    def test_healthy_host_passes(self) -> None:
        host = self.host()
        self.assertEqual([], self.reasons(host))
        self.assertTrue(self.filt.host_passes(host, self.spec()))
        self.assertEqual([host], self.filt.filter_all([host], self.spec()))

    def test_disabled(self) -> None:
        host = self.host(disabled=True, disabled_reason="rack swap")
        self.assertEqual([decisions.Reason(RC.SERVICE_DISABLED, "rack swap")],
                         self.reasons(host))
        self.assertFalse(self.filt.host_passes(host, self.spec()))

    def test_disabled_without_reason(self) -> None:
        host = self.host(disabled=True)
        self.assertEqual([decisions.Reason(RC.SERVICE_DISABLED)],
                         self.reasons(host))

    def test_forced_down(self) -> None:
        host = self.host(forced_down=True)
        self.assertEqual([decisions.Reason(RC.SERVICE_FORCED_DOWN)],
                         self.reasons(host))

    def test_down(self) -> None:
        host = self.host(last_seen_up=helpers.ago(3600))
        self.assertEqual(
            [decisions.Reason(RC.SERVICE_DOWN,
                              "last seen 2024-05-01T11:00:00Z, 3600s ago")],
            self.reasons(host))

    def test_down_time_follows_service_down_time(self) -> None:
        self.conf.config(service_down_time=7200)
        filt = disabled_service_filter.DisabledServiceFilter()
        host = self.host(last_seen_up=helpers.ago(3600))
        self.assertEqual([host], filt.filter_all([host], self.spec()))

    def test_heartbeat_as_string(self) -> None:
        host = self.host(last_seen_up="2024-05-01T11:00:00.000000")
        reasons = self.reasons(host)
        self.assertEqual([RC.SERVICE_DOWN], [r.code for r in reasons])
        self.assertIn("3600s ago", reasons[0].detail)

    def test_never_heartbeated(self) -> None:
        host = self.host(last_seen_up=None, created_at=helpers.ago(3600))
        self.assertEqual([decisions.Reason(RC.SERVICE_DOWN, "never seen")],
                         self.reasons(host))

    def test_disabled_and_down(self) -> None:
        host = self.host(disabled=True, disabled_reason="x",
                         last_seen_up=helpers.ago(600))
        self.assertEqual([RC.SERVICE_DISABLED, RC.SERVICE_DOWN],
                         [r.code for r in self.reasons(host)])

    def test_stubbed_servicegroup(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            self.filt.servicegroup_api, "service_is_up", return_value=False))
        host = self.host()
        self.assertEqual([RC.SERVICE_DOWN],
                         [r.code for r in self.reasons(host)])

    def test_filter_all_keeps_order_and_logs_summary(self) -> None:
        hosts = [self.host("h1"), self.host("h2", disabled=True),
                 self.host("h3"), self.host("h4", forced_down=True),
                 self.host("h5")]
        spec = self.spec()
        passed = self.filt.filter_all(iter(hosts), spec)
        self.assertEqual([hosts[0], hosts[2], hosts[4]], passed)
        # The host as Nova's HostState.__repr__ shows it, then the reason.
        self.assertRegex(self.log.output,
                         r"\(h2, h2\) ram: [^\n]* rejected by "
                         r"DisabledServiceFilter: service disabled")
        # Not the last of our enabled filters: the summary waits for the
        # others, or for the request spec to be freed.
        self.assertNotIn("nova-drain-filters:", self.log.output)
        del spec
        self.assertIn("5 hosts in, 3 left: DisabledServiceFilter rejected 2 "
                      "(1 x service disabled, 1 x service forced down); "
                      "filtering stopped early", self.log.output)

    def test_summary_when_last_enabled(self) -> None:
        self.conf.config(group="filter_scheduler",
                         enabled_filters=["DisabledServiceFilter"])
        hosts = [self.host("h1", disabled=True), self.host("h2")]
        self.filt.filter_all(hosts, self.spec())
        self.assertIn(
            f"INFO nova-drain-filters: request for instance "
            f"{helpers.INSTANCE}: 2 hosts in, 1 left: DisabledServiceFilter "
            f"rejected 1 (1 x service disabled)", self.log.output)

    def test_rebuild_passes_everything(self) -> None:
        hosts = [self.host("h1", disabled=True),
                 self.host("h2", forced_down=True),
                 self.host("h3", last_seen_up=helpers.ago(9999))]
        self.assertEqual(hosts, self.filt.filter_all(hosts,
                                                     self.spec(rebuild=True)))

    def test_every_host_rejected(self) -> None:
        hosts = [self.host("h1", disabled=True)]
        self.assertEqual([], self.filt.filter_all(hosts, self.spec()))
        self.assertIn("1 hosts in, 0 left", self.log.output)
