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

"""IronicView: the cached snapshot, its failure policy and its thread."""
import datetime
import threading

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from tests.unit import ironic_fakes
from tests.unit.ironic_view import helpers

RC = decisions.ReasonCode
UTC = datetime.timezone.utc
CLEAN = helpers.CLEAN
FREE = helpers.FREE
THREAD = helpers.THREAD
ViewTestCase = helpers.ViewTestCase


class TestRefresh(ViewTestCase):
    def test_success_swaps_the_snapshot(self) -> None:
        self.client.hook = lambda: self.clock.advance(7)
        before = datetime.datetime.now(UTC)
        self.assertIs(True, self.view.refresh())
        after = datetime.datetime.now(UTC)
        snap = self.view.trusted()
        assert snap is not None
        self.assertEqual({"clean": CLEAN, "free": FREE}, snap.nodes)
        self.assertEqual((1000.0, 1007.0), (snap.started_at, snap.finished_at))
        self.assertEqual(3, snap.requests)
        self.assertTrue(before <= snap.started_wall <= after)
        self.assertEqual([500], self.client.page_sizes)
        self.assertIsNone(self.view.last_error)
        self.assertEqual(1, self.view.refreshes)
        self.assertIn("Ironic snapshot refreshed: 2 nodes in 3 requests",
                      self.log.output)
        self.client.nodes = [FREE]
        self.assertIs(True, self.view.refresh())
        self.assertIsNot(snap, self.view.trusted())
        self.assertEqual({"free": FREE}, self.view.trusted().nodes)

    def test_requests_are_per_refresh_and_client_made_once(self) -> None:
        self.client.requests = 40
        self.view.refresh()
        self.view.refresh()
        self.assertEqual(3, self.view.trusted().requests)
        self.assertEqual(1, self.made)
        self.assertEqual(2, self.view.refreshes)

    def test_failure_keeps_the_last_snapshot(self) -> None:
        self.view.refresh()
        snap = self.view.trusted()
        self.clock.advance(30)
        self.assertIs(False, self.fail_refresh())
        self.assertIs(snap, self.view.trusted())
        self.assertEqual("ironic GET /v1/nodes: HTTP 503: Service Unavailable",
                         self.view.last_error)
        self.assertEqual(1, self.view.refreshes)
        self.assertIn("Ironic node refresh failed, keeping the snapshot from "
                      "30s ago: ironic GET /v1/nodes: HTTP 503",
                      self.log.output)
        self.client.error = None
        self.assertIs(True, self.view.refresh())
        self.assertIsNone(self.view.last_error)

    def test_any_error_is_caught(self) -> None:
        for exc in (RuntimeError("bug"), ValueError("garbage"), KeyError("x")):
            self.assertIs(False, self.fail_refresh(exc))
            self.assertEqual(str(exc), self.view.last_error)
        self.assertIn("snapshot from never (no snapshot yet)", self.log.output)

    def test_client_factory_failure(self) -> None:
        view = ironic_view.IronicView(self._broken_factory, self.clock)
        self.assertIs(False, view.refresh())
        self.assertEqual("no [ironic] auth", view.last_error)

    @staticmethod
    def _broken_factory() -> ironic_fakes.FakeIronicClient:
        raise RuntimeError("no [ironic] auth")

    def test_trusted_until_max_age(self) -> None:
        self.assertIsNone(self.view.trusted())
        self.view.refresh()
        self.clock.advance(120)
        self.assertIsNotNone(self.view.trusted())
        self.clock.advance(1)
        self.assertIsNone(self.view.trusted())
        self.view.refresh()
        self.assertIsNotNone(self.view.trusted())

    def test_single_flight(self) -> None:
        self.client.block = threading.Event()
        results: list[bool] = []
        first = threading.Thread(target=lambda: results.append(
            self.view.refresh()))
        first.start()
        self.addCleanup(first.join, 10)
        self.addCleanup(self.client.block.set)
        self.assertTrue(self.client.entered.wait(10))
        self.assertIs(False, self.view.refresh())
        self.assertEqual(1, len(self.client.page_sizes))
        self.client.block.set()
        first.join(10)
        self.assertEqual([True], results)
        self.assertIs(True, self.view.refresh())
        self.assertEqual(2, len(self.client.page_sizes))


class TestAvailabilityReasons(ViewTestCase):
    def test_trusted_and_listed(self) -> None:
        self.mode(drain_conf.FAIL_REJECT)
        self.view.refresh()
        self.assertEqual(decisions.baremetal_reasons(CLEAN),
                         self.view.availability_reasons("clean"))
        self.assertEqual(["baremetal: provision_state=clean wait"],
                         [str(r) for r in
                          self.view.availability_reasons("clean")])
        self.assertEqual([], self.view.availability_reasons("free"))

    def test_trusted_and_unlisted_passes(self) -> None:
        self.mode(drain_conf.FAIL_REJECT)
        self.view.refresh()
        self.view.observe(["clean", "free", "new-node"])
        self.assertEqual([], self.view.availability_reasons("new-node"))

    def test_no_snapshot_yet_is_the_failure_policy(self) -> None:
        # No warm-up pass: without a listing nothing is known about a node.
        self.mode(drain_conf.FAIL_REJECT)
        self.assertEqual([RC.BAREMETAL_UNKNOWN], [
            r.code for r in self.view.availability_reasons("clean")])
        self.mode(drain_conf.FAIL_PASS)
        self.assertEqual([], self.view.availability_reasons("clean"))
        self.assertEqual(1, len(self.policy_lines()))

    def test_failure_within_max_age_uses_the_snapshot(self) -> None:
        self.mode(drain_conf.FAIL_REJECT)
        self.view.refresh()
        self.clock.advance(100)
        self.fail_refresh()
        self.assertEqual([], self.view.availability_reasons("free"))
        self.assertEqual(1, len(self.view.availability_reasons("clean")))
        self.assertEqual([], self.policy_lines())

    def test_untrusted_after_error_mode_pass(self) -> None:
        self.mode(drain_conf.FAIL_PASS)
        self.view.refresh()
        self.clock.advance(121)
        self.fail_refresh()
        self.assertEqual([], self.view.availability_reasons("clean"))
        self.assertEqual([], self.view.availability_reasons("free"))
        lines = self.policy_lines()
        self.assertEqual(1, len(lines))
        self.assertIn("last good: 121s ago", lines[0])
        self.assertIn("HTTP 503: Service Unavailable", lines[0])
        self.assertIn("baremetal_failure_mode=pass", lines[0])

    def test_untrusted_after_error_mode_reject(self) -> None:
        self.mode(drain_conf.FAIL_REJECT)
        self.fail_refresh()
        self.assertEqual(
            [decisions.Reason(RC.BAREMETAL_UNKNOWN, "no Ironic snapshot since "
                              "never (no snapshot yet)")],
            self.view.availability_reasons("free"))
        self.client.error = None
        self.view.refresh()
        self.clock.advance(200)
        self.fail_refresh()
        reasons = self.view.availability_reasons("free")
        self.assertEqual(
            ["baremetal state unknown: no Ironic snapshot since 200s ago"],
            [str(r) for r in reasons])
        self.assertIn("baremetal_failure_mode=reject", self.policy_lines()[0])

    def test_stale_snapshot_without_error(self) -> None:
        # A refresh that hangs (no [ironic] timeout) leaves last_error None;
        # a stale snapshot must still fall to the failure policy.
        self.mode(drain_conf.FAIL_REJECT)
        self.view.refresh()
        self.clock.advance(121)
        self.assertIsNone(self.view.trusted())
        self.assertEqual([RC.BAREMETAL_UNKNOWN],
                         [r.code for r in self.view.availability_reasons("free")])

    def test_policy_logged_once_per_refresh_interval(self) -> None:
        self.fail_refresh()
        for _ in range(5):
            self.view.availability_reasons("free")
        self.assertEqual(1, len(self.policy_lines()))
        self.clock.advance(14)
        self.view.availability_reasons("free")
        self.assertEqual(1, len(self.policy_lines()))
        self.clock.advance(1)
        self.view.availability_reasons("free")
        self.view.availability_reasons("clean")
        self.assertEqual(2, len(self.policy_lines()))
        self.conf.config(group="drain_filters", baremetal_refresh_interval=60)
        self.clock.advance(59)
        self.view.availability_reasons("free")
        self.assertEqual(2, len(self.policy_lines()))


class TestMissingReason(ViewTestCase):
    def setUp(self) -> None:
        super().setUp()
        # Nova knows the listed nodes too: one unlisted node is believed.
        self.view.observe(["clean", "free"])

    def refresh_later(self) -> None:
        self.clock.advance(5)
        self.assertIs(True, self.view.refresh())
        self.clock.advance(5)

    def test_seen_before_listing_started(self) -> None:
        self.assertIsNone(self.view.missing_reason("gone"))
        self.refresh_later()
        self.assertEqual(decisions.missing_from_ironic_reason("gone"),
                         self.view.missing_reason("gone"))

    def test_first_seen_after_listing_started(self) -> None:
        self.refresh_later()
        self.assertIsNone(self.view.missing_reason("new"))
        self.assertIsNone(self.view.missing_reason("new"))
        self.assertEqual(1010.0, self.view.seen("new"))
        self.refresh_later()
        self.assertEqual(RC.IRONIC_NODE_MISSING,
                         self.view.missing_reason("new").code)

    def test_seen_as_the_listing_started_waits(self) -> None:
        self.view.seen("new")
        self.view.refresh()
        self.assertIsNone(self.view.missing_reason("new"))

    def test_record_older_than_the_listing(self) -> None:
        self.conf.config(group="drain_filters",
                         ironic_missing_max_fraction=1.0)
        self.refresh_later()
        hour = datetime.timedelta(hours=1)
        aware = datetime.datetime.now(UTC) - hour
        naive = aware.replace(tzinfo=None)
        self.assertEqual("a", self.view.missing_reason("a", aware).detail)
        self.assertEqual("n", self.view.missing_reason("n", naive).detail)
        later = datetime.datetime.now(UTC) + hour
        self.assertIsNone(self.view.missing_reason("b", later))

    def test_listed_node_is_not_missing(self) -> None:
        self.view.seen("free")
        self.refresh_later()
        old = datetime.datetime(2020, 1, 1)
        self.assertIsNone(self.view.missing_reason("free", old))

    def test_no_trusted_snapshot(self) -> None:
        old = datetime.datetime(2020, 1, 1)
        self.assertIsNone(self.view.missing_reason("gone", old))
        self.refresh_later()
        self.clock.advance(121)
        self.fail_refresh()
        self.assertIsNone(self.view.missing_reason("gone", old))
