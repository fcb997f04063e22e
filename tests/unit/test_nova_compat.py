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

from importlib import metadata
from typing import Any

import fixtures
import testtools
from nova import objects
from nova import servicegroup
from nova.scheduler import request_filter as nova_request_filter
from nova.scheduler.client import report
from nova.servicegroup.drivers import db as servicegroup_db

from nova_drain_filters import nova_compat
from nova_drain_filters import request_filter
from nova_drain_filters.filters import base
from nova_drain_filters.filters import disabled_service_filter
from tests.unit.filters import helpers

objects.register_all()


def spec(hints: dict[str, Any] | None) -> objects.RequestSpec:
    request_spec = objects.RequestSpec()
    if hints is not None:
        request_spec.scheduler_hints = hints
    return request_spec


class CompatTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        nova_compat.log_gaps_once.cache_clear()
        self.addCleanup(nova_compat.log_gaps_once.cache_clear)
        self.log = self.useFixture(fixtures.FakeLogger(
            name=nova_compat.__name__))

    def remove(self, name: str) -> None:
        """Make this Nova look like one without ``INTERNALS[name]``."""
        internal = nova_compat.INTERNALS[name]
        self.useFixture(fixtures.MonkeyPatch(
            f"{internal.module}.{internal.attribute}",
            fixtures.MonkeyPatch.delete))

    def nova_is(self, version: str) -> None:
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.nova_compat.metadata.version",
            return_value=version))


class TestThisNova(CompatTestCase):
    """The installed Nova (a supported release) has every internal."""

    def test_supported_and_intact(self) -> None:
        self.assertEqual([], nova_compat.gaps())
        major = nova_compat.nova_major()
        assert major is not None
        self.assertTrue(nova_compat.OLDEST <= major <= nova_compat.NEWEST)
        self.assertIn(major, nova_compat.SERIES)

    def test_accessors_return_novas_own(self) -> None:
        self.assertIs(nova_request_filter.ALL_REQUEST_FILTERS,
                      nova_compat.request_filters())
        self.assertIsInstance(nova_compat.servicegroup_api(),
                              servicegroup.API)
        self.assertIs(servicegroup.API, nova_compat.servicegroup_api_class())
        self.assertIs(servicegroup_db.DbDriver,
                      nova_compat.servicegroup_db_driver())
        # Calling it builds a real client from [placement]; the functional
        # tests use it through Nova's harness.
        self.assertIs(report.report_client_singleton,
                      nova_compat._lookup("report_client"))

    def test_host_state_has_every_field(self) -> None:
        self.assertEqual([], nova_compat.missing_host_state_fields())

    def test_request_is_rebuild(self) -> None:
        self.assertTrue(nova_compat.request_is_rebuild(
            spec({"_nova_check_type": ["rebuild"]})))
        self.assertFalse(nova_compat.request_is_rebuild(
            spec({"_nova_check_type": ["resize"]})))
        self.assertFalse(nova_compat.request_is_rebuild(spec(None)))
        self.assertFalse(nova_compat.request_is_rebuild(None))

    def test_every_internal_cites_a_nova_file(self) -> None:
        for internal in nova_compat.INTERNALS.values():
            path = internal.module.replace(".", "/")
            self.assertTrue(internal.nova_file.startswith(path),
                            internal)
            self.assertTrue(internal.why and internal.without, internal)

    def test_logs_once_that_it_is_supported(self) -> None:
        self.assertEqual([], nova_compat.log_gaps_once())
        nova_compat.log_gaps_once()
        self.assertEqual(1, self.log.output.count("is supported"),
                         self.log.output)


class TestMissingInternals(CompatTestCase):
    """A Nova without an internal: degrade, never raise, say so once."""

    def test_rebuild_without_novas_helper(self) -> None:
        self.remove("request_is_rebuild")
        self.assertTrue(nova_compat.request_is_rebuild(
            spec({"_nova_check_type": ["rebuild"]})))
        self.assertFalse(nova_compat.request_is_rebuild(spec({})))
        self.assertFalse(nova_compat.request_is_rebuild(None))

    def test_servicegroup_missing_counts_services_up(self) -> None:
        self.remove("servicegroup")
        api = nova_compat.servicegroup_api()
        self.assertTrue(api.service_is_up({"host": "h"}))

    def test_db_driver_missing_is_a_gap(self) -> None:
        self.remove("servicegroup_db")
        self.assertIsNone(nova_compat.servicegroup_db_driver())
        gaps = {gap.what: gap.why for gap in nova_compat.gaps()}
        self.assertIn("the same verdict, more slowly",
                      gaps["nova.servicegroup.drivers.db.DbDriver"])

    def test_no_request_filter_list(self) -> None:
        self.remove("request_filters")
        self.assertIsNone(nova_compat.request_filters())

    def test_request_filters_not_a_list(self) -> None:
        self.useFixture(fixtures.MonkeyPatch(
            "nova.scheduler.request_filter.ALL_REQUEST_FILTERS", ()))
        self.assertIsNone(nova_compat.request_filters())
        self.assertIn("nova.scheduler.request_filter.ALL_REQUEST_FILTERS",
                      [gap.what for gap in nova_compat.gaps()])

    def test_gaps_logged_once_at_start_up(self) -> None:
        self.remove("request_filters")
        self.remove("servicegroup")
        found = nova_compat.log_gaps_once()
        nova_compat.log_gaps_once()
        self.assertEqual(
            ["nova.scheduler.request_filter.ALL_REQUEST_FILTERS",
             "nova.servicegroup.API"],
            sorted(gap.what for gap in found))
        output = self.log.output
        self.assertEqual(1, output.count("ALL_REQUEST_FILTERS"), output)
        self.assertIn("the placement pre-filter is off", output)
        self.assertIn("nova/servicegroup/api.py", output)

    def test_host_state_without_service(self) -> None:
        self.useFixture(fixtures.MockPatch(
            "nova.scheduler.host_manager.HostState.update"))
        self.assertEqual(["service"], nova_compat.missing_host_state_fields())
        self.assertIn("HostState.service",
                      [gap.what for gap in nova_compat.gaps()])

    def test_check_failure_is_logged_not_raised(self) -> None:
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.nova_compat.gaps",
            side_effect=RuntimeError("boom")))
        self.assertEqual([], nova_compat.log_gaps_once())
        self.assertIn("could not check this Nova", self.log.output)


class TestReleases(CompatTestCase):
    def test_majors(self) -> None:
        self.assertEqual(31, nova_compat.nova_major("31.3.1"))
        self.assertEqual(34, nova_compat.nova_major("34.0.0.0rc1"))
        self.assertIsNone(nova_compat.nova_major("dev"))

    def test_supported_range_is_the_documented_one(self) -> None:
        self.assertEqual((31, 34), (nova_compat.OLDEST, nova_compat.NEWEST))
        self.assertEqual([31, 32, 33, 34], sorted(nova_compat.SERIES))

    def test_older_nova_is_reported(self) -> None:
        self.nova_is("30.2.1")
        found = nova_compat.log_gaps_once()
        self.assertEqual(["nova"], [gap.what for gap in found])
        self.assertIn("outside the supported 31 to 34", self.log.output)

    def test_newer_nova_is_reported(self) -> None:
        self.nova_is("35.0.0")
        self.assertEqual(["nova"], [g.what for g in nova_compat.gaps()])

    def test_nova_not_installed(self) -> None:
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.nova_compat.metadata.version",
            side_effect=metadata.PackageNotFoundError("nova")))
        self.assertIsNone(nova_compat.nova_version())
        self.assertIn("not installed", nova_compat.gaps()[0].why)


class TestFiltersWithoutInternals(helpers.FilterTestCase):
    """The call sites keep working when nova_compat degrades."""

    def remove(self, name: str) -> None:
        internal = nova_compat.INTERNALS[name]
        self.useFixture(fixtures.MonkeyPatch(
            f"{internal.module}.{internal.attribute}",
            fixtures.MonkeyPatch.delete))

    def test_service_filter_without_servicegroup(self) -> None:
        self.remove("servicegroup")
        filt = disabled_service_filter.DisabledServiceFilter()
        hosts = [self.host("up"), self.host("off", disabled=True),
                 self.host("silent", last_seen_up=helpers.ago(3600))]
        passed = filt.filter_all(hosts, self.spec())
        # Liveness is Nova's call; without it only flags are rejected.
        self.assertEqual(["up", "silent"], [h.host for h in passed])

    def test_service_filter_without_the_db_driver_asks_nova(self) -> None:
        # filters/base.py read DbDriver through nova_compat at import; a
        # Nova without it leaves UpCheck no shortcut, only Nova's verdict.
        self.useFixture(fixtures.MockPatchObject(base, "_DB_DRIVER", None))
        api = nova_compat.servicegroup_api()
        self.assertIsNone(base.UpCheck(api).window)
        filt = disabled_service_filter.DisabledServiceFilter()
        hosts = [self.host("up"), self.host("off", disabled=True),
                 self.host("silent", last_seen_up=helpers.ago(3600))]
        self.assertEqual(["up"], [h.host for h in
                                  filt.filter_all(hosts, self.spec())])

    def test_rebuild_still_skipped_without_novas_helper(self) -> None:
        self.remove("request_is_rebuild")
        filt = disabled_service_filter.DisabledServiceFilter()
        hosts = [self.host("off", disabled=True)]
        self.assertEqual(hosts, filt.filter_all(hosts, self.spec(rebuild=True)))
        self.assertEqual([], filt.filter_all(hosts, self.spec()))

    def test_prefilter_install_without_novas_list(self) -> None:
        self.remove("request_filters")
        request_filter.install()
        self.assertFalse(request_filter.uninstall())
        self.assertFalse(hasattr(nova_request_filter, "ALL_REQUEST_FILTERS"))
