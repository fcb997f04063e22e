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
import sys
import threading
import types
from typing import Any
from unittest import mock

import fixtures
import testtools
from nova import objects
from nova.conf import scheduler as nova_scheduler_conf
from nova.scheduler import request_filter as nova_request_filter
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import filters as drain_filters
from nova_drain_filters import request_filter
from nova_drain_filters import status_hidden
from nova_drain_filters import trait_store
from nova_drain_filters import traits
from nova_drain_filters.clients import placement
from nova_drain_filters.filters import summary
from tests.unit import fakes

A, B, C = "CUSTOM_A", "CUSTOM_B", "CUSTOM_C"
RECHECK = request_filter.RECHECK_SECONDS
RETRY = request_filter.RETRY_SECONDS
QUIET = request_filter.QUIET_SECONDS
Skip = request_filter.Skip


class FakeStore:
    """A TraitStore over a set; ``calls`` lists each trait asked about."""

    def __init__(self, existing: tuple[str, ...] = ()) -> None:
        self.existing = set(existing)
        self.calls: list[str] = []
        self.error: Exception | None = None
        self.create_error: Exception | None = None
        self.before_call: Any = None
        self.watched: list[Any] = []
        self.request_ids: list[str | None] = []

    def existing_traits(self, names: Any, global_request_id: Any = None,
                        ) -> set[str]:
        if self.before_call is not None:
            self.before_call()
        self.calls.extend(names)
        self.request_ids.append(global_request_id)
        if self.error is not None:
            raise self.error
        return self.existing & set(names)

    def create_trait(self, name: str, global_request_id: Any = None) -> None:
        if self.create_error is not None:
            raise self.create_error
        self.existing.add(name)

    def watch(self, handler: Any) -> None:
        self.watched.append(handler)


class TestTraitGuard(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.clock = fakes.FakeClock()
        self.client = FakeStore(existing=(B,))
        self.factory_calls = 0
        self.guard = request_filter.TraitGuard(self.factory, clock=self.clock)

    def factory(self) -> Any:
        self.factory_calls += 1
        return self.client

    def test_first_call_ensures_all(self) -> None:
        self.assertEqual({A, B}, self.guard.usable([B, A], "req-g"))
        self.assertEqual([A, B], self.client.calls)
        self.assertEqual(["req-g"], self.client.request_ids)
        self.assertEqual({A, B}, self.client.existing)
        self.assertIn("Created the forbidden traits ['CUSTOM_A']",
                      self.log.output)
        self.assertEqual([self.guard], self.client.watched)

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
        self.assertIsNone(self.guard.last_error)

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

    def test_creation_refused_forbids_what_exists(self) -> None:
        self.client.create_error = RuntimeError("HTTP 403")
        self.assertEqual({B}, self.guard.usable([A, B]))
        self.assertEqual("HTTP 403", self.guard.last_error)
        self.assertIn("forbidding only ['CUSTOM_B']", self.log.output)
        # Retried after RETRY_SECONDS, not before.
        self.clock.advance(RETRY - 1)
        self.guard.usable([A, B])
        self.assertEqual([A, B], self.client.calls)
        self.client.create_error = None
        self.clock.advance(1)
        self.assertEqual({A, B}, self.guard.usable([A, B]))

    def test_outcome(self) -> None:
        self.assertEqual(request_filter.Verdict(why=Skip.NO_TRAITS),
                         self.guard.verdict([], frozenset()))
        usable = self.guard.usable([A, B])
        self.assertEqual(request_filter.Verdict(forbidden=frozenset({A, B})),
                         self.guard.verdict([A, B], usable))
        self.assertFalse(self.guard.verdict([A, B], usable).notable)
        self.assertEqual(
            request_filter.Verdict(frozenset({A, B}), frozenset({C}),
                                   Skip.UNCONFIRMED),
            self.guard.verdict([A, B, C], usable))
        self.client.create_error = RuntimeError("HTTP 403")
        usable = self.guard.usable([A, B, C])
        outcome = self.guard.verdict([A, B, C], usable)
        self.assertEqual(Skip.PLACEMENT_FAILED, outcome.why)
        self.assertTrue(outcome.degraded)
        self.assertEqual("pre-filter forbade CUSTOM_A, CUSTOM_B but not "
                         "CUSTOM_C (placement did not confirm or create "
                         "them: HTTP 403)", str(outcome))

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


class TestRepair(testtools.TestCase):
    """A failed candidate query makes the guard re-check at once."""

    def setUp(self) -> None:
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.clock = fakes.FakeClock()
        self.store = FakeStore()
        self.guard = request_filter.TraitGuard(lambda: self.store,
                                               clock=self.clock)
        self.assertEqual({A, B}, self.guard.usable([A, B]))
        self.store.calls.clear()

    def test_deleted_trait_is_recreated_and_counted(self) -> None:
        self.store.existing.discard(A)  # someone deleted it
        self.guard.repair("req-1")
        self.assertEqual(1, self.guard.repairs)
        self.assertEqual({A, B}, self.store.existing)
        self.assertEqual([A, B], self.store.calls)
        self.assertIn("Placement no longer had the forbidden traits "
                      "['CUSTOM_A'] (deleted?); re-created them",
                      self.log.output)
        self.assertEqual({A, B}, self.guard.usable([A, B]))

    def test_nothing_lost_is_no_repair_and_quiet_for_a_while(self) -> None:
        self.guard.repair()
        self.assertEqual(0, self.guard.repairs)
        self.assertEqual(2, len(self.store.calls))
        # Other failures (placement overloaded) do not double the requests.
        self.clock.advance(QUIET / 2)
        self.guard.repair()
        self.assertEqual(2, len(self.store.calls))
        self.clock.advance(QUIET)
        self.store.existing.discard(B)
        self.guard.repair()
        self.assertEqual(1, self.guard.repairs)

    def test_placement_unreachable_forgets_everything(self) -> None:
        self.store.error = RuntimeError("ConnectFailure")
        self.guard.repair()
        self.assertEqual(0, self.guard.repairs)
        # Better a query that forbids nothing than NoValidHost for all.
        self.assertEqual(frozenset(), self.guard.usable([A, B]))
        self.assertEqual("ConnectFailure", self.guard.last_error)

    def test_recreation_refused_forgets_that_trait(self) -> None:
        self.store.existing.discard(A)
        self.store.create_error = RuntimeError("HTTP 403")
        self.guard.repair()
        self.assertEqual(0, self.guard.repairs)
        self.assertEqual({B}, self.guard.usable([A, B]))

    def test_nothing_known_nothing_asked(self) -> None:
        guard = request_filter.TraitGuard(lambda: self.store,
                                          clock=self.clock)
        guard.repair()
        self.assertEqual([], self.store.calls)

    def test_waits_for_a_check_under_way(self) -> None:
        self.store.existing.discard(A)
        self.assertTrue(self.guard._lock.acquire())
        self.useFixture(fixtures.MockPatchObject(
            request_filter, "REPAIR_WAIT_SECONDS", 0.01))
        self.guard.repair()  # gives up waiting: no call, no crash
        self.guard._lock.release()
        self.assertEqual([], self.store.calls)
        self.guard.repair()
        self.assertEqual(1, self.guard.repairs)


class TestOwnPlacementTraits(testtools.TestCase):
    def test_uses_the_placement_client(self) -> None:
        client = mock.Mock(spec=placement.PlacementClient)
        client.existing_traits.return_value = {A}
        store = trait_store.OwnPlacementTraits(client)
        self.assertEqual({A}, store.existing_traits([A, B], "req-1"))
        client.existing_traits.assert_called_once_with([A, B])
        store.create_trait(B)
        client.ensure_trait.assert_called_once_with(B)
        store.watch(object())  # nothing to watch without Nova

    def test_default_store_is_novas_client_when_nova_is_there(self) -> None:
        from nova_drain_filters.clients import nova_report
        self.assertIsInstance(trait_store.default_store(),
                              nova_report.NovaPlacementTraits)

    def test_default_store_without_nova(self) -> None:
        adapter = object()
        from_conf = self.useFixture(fixtures.MockPatchObject(
            trait_store.http, "adapter_from_conf",
            return_value=adapter)).mock
        # An import of a module set to None in sys.modules fails, as
        # importing Nova does where it is not installed.
        self.useFixture(fixtures.MockPatchObject(sys, "modules", {
            **sys.modules, "nova_drain_filters.clients.nova_report": None}))
        store = trait_store.default_store()
        self.assertIsInstance(store, trait_store.OwnPlacementTraits)
        assert isinstance(store, trait_store.OwnPlacementTraits)
        self.assertIs(adapter, store.client.adapter)
        from_conf.assert_called_once_with(cfg.CONF, "placement", "placement")


class PrefilterTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        objects.register_all()
        drain_conf.register_opts(cfg.CONF)
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.log = self.useFixture(fixtures.FakeLogger())
        request_filter.uninstall()
        self.addCleanup(request_filter.uninstall)
        self.client = FakeStore()
        self.guard = request_filter.TraitGuard(lambda: self.client)
        self.useFixture(fixtures.MockPatchObject(request_filter, "_guard",
                                                 self.guard))
        self.notes: list[tuple[Any, Any]] = []
        self.useFixture(fixtures.MockPatchObject(
            request_filter, "_recorder",
            lambda spec, note: self.notes.append((spec, note))))
        #: Root providers placement says carry COMPUTE_STATUS_DISABLED.
        self.disabled: list[str] = []
        self.useFixture(fixtures.MockPatchObject(
            request_filter, "_hidden", status_hidden.HiddenNodes(
                lambda: types.SimpleNamespace(
                    roots_with_trait=lambda name, rid=None: self.disabled))))


class TestDrainTraitsFilter(PrefilterTestCase):
    def test_adds_to_real_request_spec(self) -> None:
        spec = objects.RequestSpec()
        spec.root_forbidden.add("COMPUTE_STATUS_DISABLED")
        self.assertIs(True, request_filter.drain_traits_filter(None, spec))
        self.assertEqual({"COMPUTE_STATUS_DISABLED",
                          *traits.DEFAULT_FORBIDDEN},
                         set(spec.root_forbidden))

    def test_notes_what_novas_own_disabled_trait_hid(self) -> None:
        self.disabled = ["host2"]
        spec = objects.RequestSpec()
        request_filter.drain_traits_filter(None, spec)
        self.assertIsNone(self.notes[-1][1].hidden)  # not forbidden here
        spec.root_forbidden.add("COMPUTE_STATUS_DISABLED")
        request_filter.drain_traits_filter(None, spec)
        note = self.notes[-1][1]
        self.assertTrue(note.notable and note.hides and not note.degraded)
        self.assertEqual(
            "pre-filter forbade " + ", ".join(sorted(traits.DEFAULT_FORBIDDEN))
            + "; Nova's compute_status_filter forbade COMPUTE_STATUS_DISABLED,"
            " hiding 1 disabled compute node(s): host2 (placement read 0s"
            " ago)", str(note))

    def test_configured_traits(self) -> None:
        self.conf.config(group="drain_filters", forbidden_traits=[A])
        spec = objects.RequestSpec()
        self.assertTrue(request_filter.drain_traits_filter(None, spec))
        self.assertEqual({A}, set(spec.root_forbidden))

    def test_passes_the_global_request_id(self) -> None:
        ctxt = mock.Mock(global_id="req-global")
        request_filter.drain_traits_filter(ctxt, objects.RequestSpec())
        self.assertEqual(["req-global"], self.client.request_ids)

    def test_records_a_note_for_the_summary(self) -> None:
        spec = objects.RequestSpec()
        request_filter.drain_traits_filter(None, spec)
        self.assertEqual([(spec, request_filter.Verdict(
            forbidden=frozenset(traits.DEFAULT_FORBIDDEN)))], self.notes)

    def test_option_off(self) -> None:
        self.conf.config(group="drain_filters", placement_prefilter=False)
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        self.assertEqual([], self.client.calls)
        self.assertEqual(Skip.OFF, self.notes[0][1].why)

    def test_empty_list(self) -> None:
        self.conf.config(group="drain_filters", forbidden_traits=[])
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        self.assertEqual("pre-filter forbade nothing (forbidden_traits is "
                         "empty)", str(self.notes[0][1]))
        self.assertFalse(self.notes[0][1].degraded)

    def test_placement_down_leaves_request(self) -> None:
        self.client.error = RuntimeError("down")
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        note = self.notes[0][1]
        self.assertEqual("pre-filter forbade nothing (placement did not "
                         "confirm or create them: down)", str(note))
        self.assertTrue(note.degraded)

    def test_never_raises(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            self.guard, "usable", side_effect=RuntimeError("bug")))
        spec = objects.RequestSpec()
        self.assertIs(False, request_filter.drain_traits_filter(None, spec))
        self.assertEqual(set(), set(spec.root_forbidden))
        self.assertIn("request left unchanged", self.log.output)
        self.assertEqual([], self.client.calls)
        self.assertEqual(Skip.ERROR, self.notes[0][1].why)
        self.assertIs(False, request_filter.drain_traits_filter(None, object()))
        self.assertEqual(Skip.ERROR, self.notes[1][1].why)


class TestRecorder(testtools.TestCase):
    def test_the_filters_package_sends_outcomes_to_the_summary(self) -> None:
        # request_filter does not import the filters package above it; the
        # package wires the summary in when it is imported (drain_filters).
        self.assertIsNotNone(drain_filters.FILTER_CLASSES)
        self.assertIs(summary.record_prefilter, request_filter._recorder)

    def test_without_a_recorder_the_outcome_goes_nowhere(self) -> None:
        self.addCleanup(request_filter.set_recorder, request_filter._recorder)
        request_filter.set_recorder(None)
        self.useFixture(fixtures.MockPatchObject(
            summary, "record_prefilter", lambda *a: self.fail("recorded")))
        conf = self.useFixture(config_fixture.Config(cfg.CONF))
        drain_conf.register_opts(cfg.CONF)
        conf.config(group="drain_filters", placement_prefilter=False)
        self.assertIs(False, request_filter.drain_traits_filter(
            None, objects.RequestSpec()))


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

    def load_conf(self, text: str) -> cfg.ConfigOpts:
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, "n.conf")
        with open(path, "w") as f:
            f.write(text)
        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf(args=[], default_config_files=[path])
        self.useFixture(fixtures.MockPatchObject(drain_filters, "CONF", conf))
        return conf

    def test_bad_option_stops_loading(self) -> None:
        self.load_conf("[drain_filters]\nforbidden_traits = FOO\n")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_filters.all_filters)
        self.assertIn("[drain_filters] forbidden_traits", str(exc))
        self.assertNotIn(request_filter.drain_traits_filter,
                         nova_request_filter.ALL_REQUEST_FILTERS)

    def warning_after_loading(self, text: str) -> str:
        log = self.useFixture(fixtures.FakeLogger())
        conf = self.load_conf(text)
        nova_scheduler_conf.register_opts(conf)  # enabled_filters
        self.assertEqual(3, len(drain_filters.all_filters()))
        lines = [line for line in log.output.splitlines()
                 if "Placement still offers" in line]
        self.assertLessEqual(len(lines), 1)
        return lines[0] if lines else ""

    def test_defaults_leave_no_mark_on_offer(self) -> None:
        self.assertEqual("", self.warning_after_loading(""))

    def test_typo_in_forbidden_traits_warns(self) -> None:
        line = self.warning_after_loading(
            "[drain_filters]\nforbidden_traits = CUSTOM_DRAIN_STALE_NODE,"
            "CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE,CUSTOM_DRAN_HOST\n")
        self.assertIn("Placement still offers providers marked "
                      "CUSTOM_DRAIN_HOST: [drain_filters] forbidden_traits "
                      "leaves them out", line)
        # The pre-filter still runs, with what was configured.
        self.assertIn(request_filter.drain_traits_filter,
                      nova_request_filter.ALL_REQUEST_FILTERS)

    def test_empty_forbidden_traits_warns(self) -> None:
        line = self.warning_after_loading(
            "[drain_filters]\nforbidden_traits =\n")
        self.assertIn(", ".join(traits.DEFAULT_FORBIDDEN), line)

    def test_prefilter_off_warns(self) -> None:
        line = self.warning_after_loading(
            "[drain_filters]\nplacement_prefilter = false\n")
        self.assertIn(", ".join(traits.DEFAULT_FORBIDDEN) + ": "
                      "[drain_filters] placement_prefilter is off", line)

    def test_empty_value_stops_loading(self) -> None:
        # It used to read as None and make StaleComputeNodeFilter raise on
        # every request, passing every host.
        self.load_conf("[drain_filters]\nstale_node_max_age =\n")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_filters.all_filters)
        self.assertEqual(
            "[drain_filters] stale_node_max_age: empty value; give one, or "
            "remove the line to get the default (0)", str(exc))
