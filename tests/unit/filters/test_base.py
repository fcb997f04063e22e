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

import datetime
from collections.abc import Sequence
from typing import Any

import fixtures

from nova_drain_filters import decisions
from nova_drain_filters.filters import base
from nova_drain_filters.filters import summary
from tests.unit import fakes
from tests.unit.filters import helpers

RC = decisions.ReasonCode
DOWN = decisions.Reason(RC.SERVICE_DOWN, "x")


class RejectNamed(base.DrainFilter):
    """Rejects hosts whose name starts with "bad"; raises on "boom"."""

    def host_reasons(self, host_state: Any, spec_obj: Any) -> list:
        if host_state.host.startswith("boom"):
            raise RuntimeError("subclass bug")
        return [DOWN] if host_state.host.startswith("bad") else []


class TestFacts(helpers.FilterTestCase):
    def test_service_facts(self) -> None:
        host = self.host(disabled=1, disabled_reason="why", forced_down=0)
        facts = base.service_facts(host, is_up=False)
        self.assertEqual(decisions.ServiceFacts(
            host="host1", disabled=True, forced_down=False, is_up=False,
            disabled_reason="why", last_seen_up=helpers.ago(10)), facts)

    def test_service_facts_string_time(self) -> None:
        host = self.host(last_seen_up="2024-05-01T11:00:00Z")
        facts = base.service_facts(host, is_up=True)
        self.assertEqual(datetime.datetime(2024, 5, 1, 11, 0,
                                           tzinfo=datetime.timezone.utc),
                         facts.last_seen_up)

    def test_service_facts_without_service(self) -> None:
        host = self.host()
        host.service = None  # type: ignore[assignment]
        facts = base.service_facts(host, is_up=False)
        self.assertFalse(facts.disabled)
        self.assertIsNone(facts.last_seen_up)

    def test_node_facts(self) -> None:
        host = fakes.FakeHostState("h1", nodename="n1", uuid="u1",
                                   updated=helpers.ago(5),
                                   hypervisor_type="ironic")
        self.assertEqual(decisions.NodeFacts(
            host="h1", nodename="n1", uuid="u1", service_up=False,
            updated_at=helpers.ago(5), hypervisor_type="ironic"),
            base.node_facts(host, service_up=False))

    def test_now_is_patchable_time(self) -> None:
        self.assertEqual(helpers.NOW.replace(tzinfo=None),
                         base.now().replace(tzinfo=None))

    def test_reasons_by_host(self) -> None:
        host = fakes.FakeHostState("h1", nodename="n1")
        self.assertEqual({"h1/n1": "service down: x; service forced down"},
                         base.reasons_by_host({host: [
                             DOWN, decisions.Reason(RC.SERVICE_FORCED_DOWN)]}))


class TestDrainFilter(helpers.FilterTestCase):
    def test_defaults(self) -> None:
        filt = base.DrainFilter()
        self.assertIs(False, filt.RUN_ON_REBUILD)
        self.assertIs(True, filt.run_filter_once_per_request)
        hosts = [self.host("bad1")]
        self.assertEqual(hosts, filt.filter_all(hosts, self.spec()))

    def test_filter_all_never_none(self) -> None:
        filt = RejectNamed()
        self.assertEqual([], filt.filter_all([], self.spec()))
        self.assertEqual([], filt.filter_all([self.host("bad")], self.spec()))
        self.assertEqual([], filt.filter_all(iter([]), self.spec()))

    def test_host_passes(self) -> None:
        filt = RejectNamed()
        self.assertTrue(filt.host_passes(self.host("good"), self.spec()))
        self.assertFalse(filt.host_passes(self.host("bad"), self.spec()))

    def test_host_reasons_raising_passes_that_host(self) -> None:
        hosts = [self.host("good"), self.host("boom"), self.host("bad")]
        passed = RejectNamed().filter_all(hosts, self.spec())
        self.assertEqual(hosts[:2], passed)
        self.assertRegex(self.log.output,
                         r"RejectNamed failed on \(boom, boom\)[^\n]*; "
                         r"passing it")
        self.assertIn("subclass bug", self.log.output)

    def test_rejections_raising_passes_every_host(self) -> None:
        class Broken(base.DrainFilter):
            def rejections(self, hosts: Sequence[Any], spec: Any) -> Any:
                raise KeyError("whole-list bug")

        hosts = [self.host("a"), self.host("b")]
        self.assertEqual(hosts, Broken().filter_all(hosts, self.spec()))
        self.assertIn("Broken failed; passing every host", self.log.output)

    def test_rebuild_check_raising_passes_every_host(self) -> None:
        hosts = [self.host("bad")]
        self.assertEqual(hosts, RejectNamed().filter_all(hosts, object()))
        self.assertIn("RejectNamed failed; passing every host",
                      self.log.output)

    def test_summary_failure_does_not_matter(self) -> None:
        self.useFixture(fixtures.MockPatchObject(
            summary, "record", side_effect=RuntimeError("log bug")))
        hosts = [self.host("good"), self.host("bad")]
        self.assertEqual(hosts[:1], RejectNamed().filter_all(hosts,
                                                             self.spec()))
        self.assertIn("RejectNamed could not log its summary", self.log.output)

    def test_summary_recorded(self) -> None:
        calls: list[tuple] = []
        self.useFixture(fixtures.MockPatchObject(
            summary, "record", lambda *a: calls.append(a)))
        good, bad = self.host("good"), self.host("bad")
        spec = self.spec()
        RejectNamed().filter_all([good, bad], spec)
        self.assertEqual([("RejectNamed", spec, 2, 1, {bad: [DOWN]})], calls)

    def test_rebuild_not_recorded(self) -> None:
        record = self.useFixture(fixtures.MockPatchObject(summary, "record"))
        RejectNamed().filter_all([self.host("bad")], self.spec(rebuild=True))
        self.assertFalse(record.mock.called)

    def test_duplicate_host_objects_by_identity(self) -> None:
        a, b = self.host("bad"), self.host("bad")
        found = RejectNamed().rejections([a, b], self.spec())
        self.assertEqual({id(a), id(b)}, set(found))

    def test_bare_reason_from_subclass_does_not_escape(self) -> None:
        # A subclass that returns a Reason instead of a list of them is a
        # bug in the subclass; it must not reach the scheduler.
        class Bare(base.DrainFilter):
            def host_reasons(self, host_state: Any, spec_obj: Any) -> Any:
                return DOWN

        hosts = [self.host("a")]
        result = Bare().filter_all(hosts, self.spec())
        self.assertIsInstance(result, list)

    def test_rejections_returning_none_passes_every_host(self) -> None:
        class NoneFilter(base.DrainFilter):
            def rejections(self, hosts: Sequence[Any], spec: Any) -> Any:
                return None

        hosts = [self.host("a"), self.host("b")]
        self.assertEqual(hosts, NoneFilter().filter_all(hosts, self.spec()))
