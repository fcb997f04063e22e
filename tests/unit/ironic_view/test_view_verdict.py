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

"""IronicView: the blast-radius rule and the wait for the first listing."""
import threading
import time

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import known
from tests.unit import ironic_fakes
from tests.unit.ironic_view import helpers

RC = decisions.ReasonCode
VERDICT = "Not believing the Ironic listing"
STARTUP = "No Ironic listing"


def nodes(count: int, prefix: str = "n") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


class TestListingVerdict(helpers.ViewTestCase):
    def listing(self, listed: list[str]) -> None:
        self.client.nodes = [ironic_fakes.ironic_node(u) for u in listed]
        self.clock.advance(5)
        self.assertTrue(self.view.refresh())
        self.clock.advance(5)

    def verdict_lines(self) -> list[str]:
        return [x for x in self.log.output.splitlines() if VERDICT in x]

    def test_empty_listing_is_not_believed(self) -> None:
        # Issue 14: "3 hosts in, 0 left: StaleComputeNodeFilter rejected 3".
        known = nodes(3)
        self.view.observe(known)
        self.listing([])
        for uuid in known:
            self.assertIsNone(self.view.missing_reason(uuid))
            self.assertEqual([], self.view.availability_reasons(uuid))
        lines = self.verdict_lines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn("lacks 3 of the 3 Ironic compute nodes Nova knows "
                      "(at most 1 may be missing)", lines[0])
        self.assertIn("ironic_missing_max_fraction", lines[0])
        self.assertIn("baremetal_failure_mode=pass", lines[0])

    def test_partial_listing_follows_the_failure_mode(self) -> None:
        # Credentials that see only their own nodes: 4 of 10 listed.
        known = nodes(10)
        self.view.observe(known)
        self.listing(known[:4])
        self.mode(drain_conf.FAIL_REJECT)
        self.assertIsNone(self.view.missing_reason(known[9]))
        reasons = self.view.availability_reasons(known[9])
        self.assertEqual([RC.BAREMETAL_UNKNOWN], [r.code for r in reasons])
        self.assertIn("lacks 6 of the 10", reasons[0].detail)
        # What the listing does say about a listed node is still used.
        self.assertEqual([], self.view.availability_reasons(known[0]))
        self.mode(drain_conf.FAIL_PASS)
        self.assertEqual([], self.view.availability_reasons(known[9]))

    def test_a_few_deleted_nodes_are_believed(self) -> None:
        known = nodes(10)
        self.view.observe(known)
        self.listing(known[1:])
        self.assertEqual(decisions.missing_from_ironic_reason(known[0]),
                         self.view.missing_reason(known[0]))
        self.assertEqual([], self.verdict_lines())

    def test_fraction_option_is_read(self) -> None:
        known = nodes(10)
        self.view.observe(known)
        self.listing(known[3:])
        self.assertIsNone(self.view.missing_reason(known[0]))
        self.conf.config(group="drain_filters",
                         ironic_missing_max_fraction=0.3)
        self.listing(known[3:])
        self.assertIsNotNone(self.view.missing_reason(known[0]))

    def test_logged_once_per_snapshot(self) -> None:
        self.view.observe(nodes(3))
        self.listing([])
        for uuid in nodes(3) * 3:
            self.view.missing_reason(uuid)
        self.assertEqual(1, len(self.verdict_lines()))
        self.listing([])
        self.view.missing_reason("n0")
        self.assertEqual(2, len(self.verdict_lines()))

    def test_known_nodes_expire(self) -> None:
        # A node Nova deleted long ago no longer counts as known.
        self.view.observe(nodes(5, "old"))
        self.clock.advance(known.KNOWN_WINDOW + 1)
        self.view.observe(nodes(5))
        self.clock.advance(known.KNOWN_WINDOW + 1)
        self.view.observe(nodes(5))
        self.listing(nodes(5))
        verdict = self.view.listing_verdict(self.view.trusted())
        self.assertEqual((5, 0), (verdict.known, verdict.missing))


class TestStartupWait(helpers.ViewTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.conf.config(group="drain_filters", baremetal_startup_wait=5)

    def startup_lines(self) -> list[str]:
        return [x for x in self.log.output.splitlines() if STARTUP in x]

    def test_waits_for_the_first_listing(self) -> None:
        self.client.block = threading.Event()
        self.addCleanup(self.client.block.set)
        threading.Timer(0.2, self.client.block.set).start()
        self.view.wait_until_ready()
        self.assertIsNotNone(self.view.trusted())
        self.assertEqual([], self.startup_lines())
        self.assertEqual(1, len(self.client.page_sizes))

    def test_bounded_then_failure_mode_logged_once(self) -> None:
        self.conf.config(group="drain_filters", baremetal_startup_wait=1)
        self.mode(drain_conf.FAIL_REJECT)
        self.client.block = threading.Event()
        self.addCleanup(self.client.block.set)
        began = time.monotonic()
        self.view.wait_until_ready()
        self.assertGreaterEqual(time.monotonic() - began, 0.9)
        self.assertEqual([RC.BAREMETAL_UNKNOWN], [
            r.code for r in self.view.availability_reasons("free")])
        # Past the deadline (the fake clock moved): no more waiting.
        self.clock.advance(1)
        self.view.wait_until_ready()
        self.view.wait_until_ready()
        lines = self.startup_lines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn("up to 1s after the refresher started", lines[0])
        self.assertIn("baremetal_failure_mode=reject", lines[0])

    def test_zero_never_waits(self) -> None:
        self.conf.config(group="drain_filters", baremetal_startup_wait=0)
        self.client.block = threading.Event()
        self.addCleanup(self.client.block.set)
        self.view.wait_until_ready()
        self.assertEqual(1, len(self.startup_lines()))

    def test_a_failed_first_listing_ends_the_wait(self) -> None:
        self.client.error = RuntimeError("401 Unauthorized")
        began = time.monotonic()
        self.view.wait_until_ready()
        self.assertLess(time.monotonic() - began, 4)
        self.assertIn("401 Unauthorized", self.startup_lines()[0])

    def test_a_trusted_snapshot_never_waits(self) -> None:
        self.view.refresh()
        self.client.block = threading.Event()
        self.addCleanup(self.client.block.set)
        self.view.ensure_running()
        self.view.wait_until_ready()
        self.assertEqual([], self.startup_lines())
