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

import gc
import logging
import threading

import fixtures
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

import nova_drain_filters.filters  # noqa: F401  (fills OUR_FILTERS)
from nova_drain_filters import decisions
from nova_drain_filters import request_filter
from nova_drain_filters import status_hidden
from nova_drain_filters.filters import summary

RC = decisions.ReasonCode
DSF, SCNF = "DisabledServiceFilter", "StaleComputeNodeFilter"
DISABLED = decisions.Reason(RC.SERVICE_DISABLED, "maint")
DOWN = decisions.Reason(RC.SERVICE_DOWN, "never seen")
DUP = decisions.Reason(RC.DUPLICATE_NODE, "n1 is also on host b (u)")
PREFIX = "nova-drain-filters: "
Verdict, Skip = request_filter.Verdict, request_filter.Skip
ALL_FORBIDDEN = Verdict(forbidden=frozenset({"CUSTOM_A"}))
NOTHING = Verdict(skipped=frozenset({"CUSTOM_A"}), why=Skip.PLACEMENT_FAILED,
                  detail="placement GET /traits: HTTP 503: down")


class Spec:
    def __init__(self, instance_uuid: str = "inst-1") -> None:
        self.instance_uuid = instance_uuid


class TestRecord(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.enable("ComputeFilter", DSF, "ImagePropertiesFilter", SCNF)
        summary.reset()
        self.addCleanup(summary.reset)
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format="%(levelname)s %(message)s"))

    def enable(self, *names: str) -> None:
        self.conf.config(group="filter_scheduler", enabled_filters=list(names))

    def lines(self) -> list[str]:
        return [line for line in self.log.output.splitlines()
                if PREFIX in line]

    def test_our_filters_known(self) -> None:
        self.assertEqual({DSF, SCNF, "BaremetalAvailabilityFilter"},
                         summary.OUR_FILTERS)

    def test_one_line_when_last_enabled_filter_ran(self) -> None:
        spec = Spec()
        summary.record(DSF, spec, 5, 4, {"h1": [DISABLED]})
        self.assertEqual([], self.lines())
        summary.record(SCNF, spec, 4, 3, {"h2": [DUP]})
        self.assertEqual(
            ["INFO nova-drain-filters: request for instance inst-1: 5 hosts "
             "in, 3 left: DisabledServiceFilter rejected 1 (1 x service "
             "disabled: maint); StaleComputeNodeFilter rejected 1 (1 x "
             "duplicate compute node: n1 is also on host b (u))"],
            self.lines())
        self.assertEqual({}, summary._pending)
        del spec
        self.assertEqual(1, len(self.lines()))

    def test_last_enabled_follows_config_order(self) -> None:
        self.enable(SCNF, DSF)
        spec = Spec()
        summary.record(SCNF, spec, 5, 5, {})
        self.assertEqual([], self.lines())
        summary.record(DSF, spec, 5, 4, {"h1": [DOWN]})
        self.assertEqual(1, len(self.lines()))

    def test_only_enabled_filter(self) -> None:
        self.enable("ComputeFilter", DSF)
        summary.record(DSF, Spec(), 2, 1, {"h1": [DOWN]})
        self.assertEqual(1, len(self.lines()))

    def test_no_host_left_emits_at_once(self) -> None:
        spec = Spec()
        summary.record(DSF, spec, 2, 0, {"h1": [DOWN], "h2": [DOWN]})
        self.assertEqual(
            ["INFO nova-drain-filters: request for instance inst-1: 2 hosts "
             "in, 0 left: DisabledServiceFilter rejected 2 (2 x service "
             "down: never seen)"], self.lines())
        self.assertEqual({}, summary._pending)

    def test_spec_freed_early(self) -> None:
        spec = Spec("inst-2")
        summary.record(DSF, spec, 3, 2, {"h1": [DISABLED]})
        self.assertEqual([], self.lines())
        del spec
        lines = self.lines()
        self.assertEqual(1, len(lines))
        self.assertIn("instance inst-2: 3 hosts in, 2 left", lines[0])
        self.assertTrue(lines[0].endswith("; filtering stopped early"))
        self.assertEqual({}, summary._pending)

    def test_first_reason_of_each_host_counted(self) -> None:
        spec = Spec()
        summary.record(SCNF, spec, 4, 1,
                       {"h1": [DISABLED, DOWN], "h2": [DOWN], "h3": [DOWN],
                        "h4": []})
        line = self.lines()[0]
        self.assertIn("StaleComputeNodeFilter rejected 3 (2 x service down: "
                      "never seen, 1 x service disabled: maint)", line)

    def test_debug_when_nothing_rejected(self) -> None:
        spec = Spec()
        summary.record(DSF, spec, 3, 3, {})
        summary.record(SCNF, spec, 3, 3, {})
        self.assertEqual(
            ["DEBUG nova-drain-filters: request for instance inst-1: 3 hosts "
             "in, 3 left: DisabledServiceFilter rejected 0; "
             "StaleComputeNodeFilter rejected 0"], self.lines())

    def test_info_when_an_earlier_filter_rejected(self) -> None:
        spec = Spec()
        summary.record(DSF, spec, 3, 2, {"h1": [DOWN]})
        summary.record(SCNF, spec, 2, 2, {})
        self.assertTrue(self.lines()[0].startswith("INFO "))

    def test_requests_kept_apart(self) -> None:
        one, two = Spec("one"), Spec("two")
        summary.record(DSF, one, 3, 2, {"h1": [DOWN]})
        summary.record(DSF, two, 7, 7, {})
        summary.record(SCNF, two, 7, 6, {"h9": [DUP]})
        summary.record(SCNF, one, 2, 2, {})
        lines = self.lines()
        self.assertEqual(2, len(lines))
        self.assertIn("instance two: 7 hosts in, 6 left", lines[0])
        self.assertIn("instance one: 3 hosts in, 2 left", lines[1])

    def test_max_pending_bound(self) -> None:
        self.useFixture(fixtures.MockPatchObject(summary, "MAX_PENDING", 2))
        specs = [Spec(f"i{n}") for n in range(3)]
        for spec in specs:
            summary.record(DSF, spec, 1, 1, {})
        self.assertEqual(2, len(summary._pending))
        lines = self.lines()
        self.assertEqual(1, len(lines))
        self.assertIn("instance i0:", lines[0])
        self.assertTrue(lines[0].endswith("filtering stopped early"))
        del specs[0]
        self.assertEqual(1, len(self.lines()))

    def test_spec_without_weakref(self) -> None:
        spec = object()
        summary.record(DSF, spec, 2, 2, {})
        self.assertEqual(1, len(summary._pending))
        summary.record(SCNF, spec, 2, 1, {"h": [DUP]})
        self.assertIn("request for instance None: 2 hosts in, 1 left",
                      self.lines()[0])

    def test_reset_drops_pending_silently(self) -> None:
        spec = Spec()
        summary.record(DSF, spec, 2, 2, {})
        summary.reset()
        del spec
        self.assertEqual([], self.lines())
        self.assertEqual({}, summary._pending)

    def test_format_line(self) -> None:
        pending = summary._Pending("x", 4)
        pending.end = 4
        self.assertEqual("nova-drain-filters: request for instance x: 4 hosts "
                         "in, 4 left: ; filtering stopped early",
                         summary.format_line(pending, early=True))

    def test_spec_collected_inside_record_does_not_deadlock(self) -> None:
        # The cyclic GC may free a spec at any allocation, including one
        # inside record's locked section; its finalizer then runs _flush on
        # the same thread, which takes the same non-reentrant lock.
        # A fresh lock of the module's kind, so a stuck thread cannot hold
        # the real one.
        rlock_type = type(threading.RLock())
        fresh = (threading.RLock() if isinstance(summary._lock, rlock_type)
                 else threading.Lock())
        self.useFixture(fixtures.MockPatchObject(summary, "_lock", fresh))
        self.useFixture(fixtures.MockPatchObject(summary, "_pending", {}))
        cyclic = Spec("cyclic")
        cyclic.me = cyclic  # type: ignore[attr-defined]
        summary.record(DSF, cyclic, 3, 3, {})
        del cyclic
        gc.disable()
        self.addCleanup(gc.enable)
        real_pending = summary._Pending

        def pending_with_gc(*args: object) -> summary._Pending:
            gc.collect()  # what an allocation here may trigger
            return real_pending(*args)  # type: ignore[arg-type]

        self.useFixture(fixtures.MockPatchObject(summary, "_Pending",
                                                 pending_with_gc))
        worker = threading.Thread(target=summary.record,
                                  args=(DSF, Spec("next"), 3, 3, {}),
                                  daemon=True)
        worker.start()
        worker.join(2)
        self.assertFalse(worker.is_alive(),
                         "summary.record deadlocked in its own finalizer")
        self.assertIn("instance cyclic", self.log.output)


class TestPrefilterNote(testtools.TestCase):
    """The pre-filter's note joins the request's line."""

    def setUp(self) -> None:
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group="filter_scheduler",
                         enabled_filters=["ComputeFilter", DSF, SCNF])
        summary.reset()
        self.addCleanup(summary.reset)
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format="%(levelname)s %(message)s"))

    def lines(self) -> list[str]:
        return [line for line in self.log.output.splitlines()
                if PREFIX in line]

    def test_forbade_nothing_joins_the_line_at_info(self) -> None:
        spec = Spec()
        summary.record_prefilter(spec, NOTHING)
        self.assertEqual([], self.lines())
        summary.record(DSF, spec, 3, 3, {})
        summary.record(SCNF, spec, 3, 3, {})
        self.assertEqual(
            ["INFO nova-drain-filters: request for instance inst-1: 3 hosts "
             "in, 3 left: DisabledServiceFilter rejected 0; "
             "StaleComputeNodeFilter rejected 0; pre-filter forbade nothing "
             "(placement did not confirm or create them: placement GET "
             "/traits: HTTP 503: down)"], self.lines())

    def test_all_forbidden_says_nothing(self) -> None:
        spec = Spec()
        summary.record_prefilter(spec, ALL_FORBIDDEN)
        self.assertEqual({}, summary._pending)
        summary.record(DSF, spec, 3, 3, {})
        summary.record(SCNF, spec, 3, 3, {})
        self.assertNotIn("pre-filter", self.lines()[0])
        self.assertTrue(self.lines()[0].startswith("DEBUG "))

    def test_nodes_hidden_by_nova_make_the_line_info(self) -> None:
        spec = Spec()
        summary.record_prefilter(spec, Verdict(
            forbidden=ALL_FORBIDDEN.forbidden,
            hidden=status_hidden.Hidden("compute_status_filter", ("host2",))))
        summary.record(DSF, spec, 2, 2, {})
        summary.record(SCNF, spec, 2, 2, {})
        [line] = self.lines()
        self.assertTrue(line.startswith("INFO "), line)
        self.assertTrue(line.endswith(
            "hiding 1 disabled compute node(s): host2 (placement read 0s "
            "ago)"), line)

    def test_configured_empty_stays_debug(self) -> None:
        spec = Spec()
        summary.record_prefilter(spec, Verdict(why=Skip.NO_TRAITS))
        summary.record(DSF, spec, 2, 2, {})
        summary.record(SCNF, spec, 2, 2, {})
        self.assertEqual(1, len(self.lines()))
        self.assertTrue(self.lines()[0].startswith("DEBUG "))
        self.assertTrue(self.lines()[0].endswith(
            "; pre-filter forbade nothing (forbidden_traits is empty)"))

    def test_no_candidates_line_written_when_spec_freed(self) -> None:
        # Placement offered nothing: no host filter runs for this spec.
        spec = Spec("inst-9")
        summary.record_prefilter(spec, NOTHING)
        del spec
        self.assertEqual(
            ["INFO nova-drain-filters: request for instance inst-9: "
             "pre-filter forbade nothing (placement did not confirm or "
             "create them: placement GET /traits: HTTP 503: down)"],
            self.lines())

    def test_no_drain_filter_enabled_line_at_once(self) -> None:
        self.conf.config(group="filter_scheduler",
                         enabled_filters=["ComputeFilter"])
        spec = Spec()
        summary.record_prefilter(spec, NOTHING)
        self.assertEqual(1, len(self.lines()))
        self.assertIn("instance inst-1: pre-filter forbade nothing",
                      self.lines()[0])
        self.assertEqual({}, summary._pending)

    def test_never_raises(self) -> None:
        class Broken:
            notable = True

            @property
            def degraded(self) -> bool:
                raise RuntimeError("bug")

        self.conf.config(group="filter_scheduler",
                         enabled_filters=["ComputeFilter"])
        summary.record_prefilter(Spec(), Broken())
        self.assertIn("Could not record the pre-filter outcome",
                      self.log.output)
