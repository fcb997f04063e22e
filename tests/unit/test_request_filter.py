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

import os
import threading
from typing import Any

import fixtures
import testtools
from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import filters as drain_filters
from nova_drain_filters import request_filter
from nova_drain_filters import traits
from tests.unit import fakes

A, B, C = "CUSTOM_A", "CUSTOM_B", "CUSTOM_C"
RECHECK = request_filter.RECHECK_SECONDS
RETRY = request_filter.RETRY_SECONDS


class TestTraitGuard(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.clock = fakes.FakeClock()
        self.client = fakes.FakePlacement(existing=(B,))
        self.factory_calls = 0
        self.guard = request_filter.TraitGuard(self.factory, clock=self.clock)

    def factory(self) -> Any:
        self.factory_calls += 1
        return self.client

    def test_first_call_ensures_all(self) -> None:
        self.assertEqual({A, B}, self.guard.usable([B, A]))
        self.assertEqual([A, B], self.client.calls)
        self.assertIn("Created the forbidden traits ['CUSTOM_A']",
                      self.log.output)

    def test_empty_wanted(self) -> None:
        self.assertEqual(frozenset(), self.guard.usable([]))

    def test_no_call_within_recheck(self) -> None:
        self.guard.usable([A])
        self.clock.advance(RECHECK - 1)
        self.assertEqual({A}, self.guard.usable([A]))
        self.assertEqual([A], self.client.calls)
        self.assertEqual(1, self.factory_calls)

    def test_recheck_after_interval(self) -> None:
        self.guard.usable([A])
        self.clock.advance(RECHECK)
        self.assertEqual({A}, self.guard.usable([A]))
        self.assertEqual([A, A], self.client.calls)
        self.assertEqual(1, self.factory_calls)

    def test_changed_list_triggers_check(self) -> None:
        self.guard.usable([A])
        self.assertEqual({A, C}, self.guard.usable([A, C]))
        self.assertEqual([A, A, C], self.client.calls)
        self.assertEqual({C}, self.guard.usable([C]))
        self.assertEqual([A, A, C, C], self.client.calls)

    def test_failure_keeps_known_and_waits_retry(self) -> None:
        self.guard.usable([A, B])
        self.clock.advance(RECHECK)
        self.client.error = RuntimeError("placement down")
        self.assertEqual({A, B}, self.guard.usable([A, B]))
        self.assertIn("placement down", self.log.output)
        calls = len(self.client.calls)
        self.clock.advance(RETRY - 1)
        self.assertEqual({A, B}, self.guard.usable([A, B]))
        self.assertEqual(calls, len(self.client.calls))
        self.client.error = None
        self.clock.advance(1)
        self.assertEqual({A, B}, self.guard.usable([A, B]))
        self.assertEqual(calls + 2, len(self.client.calls))

    def test_first_failure_waits_retry(self) -> None:
        self.client.error = RuntimeError("placement down")
        self.assertEqual(frozenset(), self.guard.usable([A]))
        self.assertEqual(1, len(self.client.calls))
        # Within RETRY_SECONDS placement must not be asked again, or every
        # scheduling request pays for a down placement.
        self.clock.advance(1)
        self.assertEqual(frozenset(), self.guard.usable([A]))
        self.assertEqual(1, len(self.client.calls))
        self.client.error = None
        self.clock.advance(RETRY)
        self.assertEqual({A}, self.guard.usable([A]))

    def test_factory_failure_is_retried(self) -> None:
        def broken() -> Any:
            raise ValueError("no [placement] auth")

        guard = request_filter.TraitGuard(broken, clock=self.clock)
        self.assertEqual(frozenset(), guard.usable([A]))
        self.assertIn("no [placement] auth", self.log.output)

    def test_known_traits_limited_to_wanted(self) -> None:
        self.guard.usable([A, B])
        self.client.error = RuntimeError("down")
        self.assertEqual({A}, self.guard.usable([A, C]))

    def test_single_flight(self) -> None:
        entered, release = threading.Event(), threading.Event()

        def block() -> None:
            entered.set()
            release.wait(10)

        self.client.before_call = block
        results: list[frozenset[str]] = []
        worker = threading.Thread(
            target=lambda: results.append(self.guard.usable([A])))
        worker.start()
        self.addCleanup(worker.join, 10)
        self.addCleanup(release.set)
        self.assertTrue(entered.wait(10))
        self.assertEqual(frozenset(), self.guard.usable([A]))
        self.assertEqual(0, len(self.client.calls))
        release.set()
        worker.join(10)
        self.assertEqual([frozenset([A])], results)
        self.assertEqual([A], self.client.calls)


class PrefilterTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        objects.register_all()
        drain_conf.register_opts(cfg.CONF)
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.log = self.useFixture(fixtures.FakeLogger())
        request_filter.uninstall()
        self.addCleanup(request_filter.uninstall)
        self.client = fakes.FakePlacement()
        self.guard = request_filter.TraitGuard(lambda: self.client)
        self.useFixture(fixtures.MockPatchObject(request_filter, "_guard",
                                                 self.guard))


class TestDrainTraitsFilter(PrefilterTestCase):
    def test_adds_to_real_request_spec(self) -> None:
        spec = objects.RequestSpec()
        spec.root_forbidden.add("COMPUTE_STATUS_DISABLED")
        self.assertIs(True, request_filter.drain_traits_filter(None, spec))
        self.assertEqual({"COMPUTE_STATUS_DISABLED",
                          *traits.DEFAULT_FORBIDDEN},
                         set(spec.root_forbidden))

    def test_configured_traits(self) -> None:
        self.conf.config(group="drain_filters", forbidden_traits=[A])
        spec = objects.RequestSpec()
        self.assertTrue(request_filter.drain_traits_filter(None, spec))
        self.assertEqual({A}, set(spec.root_forbidden))

    def test_option_off(self) -> None:
        self.conf.config(group="drain_filters", placement_prefilter=False)
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        self.assertEqual([], self.client.calls)

    def test_empty_list(self) -> None:
        self.conf.config(group="drain_filters", forbidden_traits=[])
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))

    def test_placement_down_leaves_request(self) -> None:
        self.client.error = RuntimeError("down")
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))

    def test_never_raises(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            self.guard, "usable", side_effect=RuntimeError("bug")))
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        self.assertIn("request left unchanged", self.log.output)
        self.assertEqual([], self.client.calls)
        self.assertIs(False, request_filter.drain_traits_filter(None, object()))


class TestInstall(PrefilterTestCase):
    def count(self) -> int:
        return nova_request_filter.ALL_REQUEST_FILTERS.count(
            request_filter.drain_traits_filter)

    def test_install_uninstall_idempotent(self) -> None:
        before = list(nova_request_filter.ALL_REQUEST_FILTERS)
        self.assertIs(True, request_filter.install())
        self.assertIs(False, request_filter.install())
        self.assertEqual(1, self.count())
        self.assertIs(request_filter.drain_traits_filter,
                      nova_request_filter.ALL_REQUEST_FILTERS[-1])
        self.assertIs(True, request_filter.uninstall())
        self.assertIs(False, request_filter.uninstall())
        self.assertEqual(before, nova_request_filter.ALL_REQUEST_FILTERS)

    def test_install_if_enabled(self) -> None:
        conf = cfg.ConfigOpts()
        self.assertIs(True, request_filter.install_if_enabled(conf))
        self.assertEqual(1, self.count())
        self.assertIs(False, request_filter.install_if_enabled(conf))
        self.assertEqual(1, self.count())

    def test_install_if_disabled(self) -> None:
        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf.set_override("placement_prefilter", False, "drain_filters")
        self.assertIs(False, request_filter.install_if_enabled(conf))
        self.assertEqual(0, self.count())


class TestAllFilters(PrefilterTestCase):
    def test_returns_classes_and_installs_once(self) -> None:
        first = drain_filters.all_filters()
        second = drain_filters.all_filters()
        self.assertEqual(["DisabledServiceFilter", "StaleComputeNodeFilter",
                          "BaremetalAvailabilityFilter"],
                         [cls.__name__ for cls in first])
        self.assertEqual(first, second)
        self.assertEqual(1, nova_request_filter.ALL_REQUEST_FILTERS.count(
            request_filter.drain_traits_filter))

    def test_prefilter_off(self) -> None:
        self.conf.config(group="drain_filters", placement_prefilter=False)
        self.assertEqual(3, len(drain_filters.all_filters()))
        self.assertNotIn(request_filter.drain_traits_filter,
                         nova_request_filter.ALL_REQUEST_FILTERS)

    def test_bad_option_stops_loading(self) -> None:
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, "n.conf")
        with open(path, "w") as f:
            f.write("[drain_filters]\nforbidden_traits = FOO\n")
        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf(args=[], default_config_files=[path])
        self.useFixture(fixtures.MockPatchObject(drain_filters, "CONF", conf))
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_filters.all_filters)
        self.assertIn("[drain_filters] forbidden_traits", str(exc))
        self.assertNotIn(request_filter.drain_traits_filter,
                         nova_request_filter.ALL_REQUEST_FILTERS)
