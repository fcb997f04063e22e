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
import itertools

import ddt
import testtools

from nova_drain_filters import decisions
from nova_drain_filters import traits

RC = decisions.ReasonCode
UTC = datetime.timezone.utc
NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def svc(disabled: bool = False, forced_down: bool = False, is_up: bool = True,
        **kw: object) -> decisions.ServiceFacts:
    return decisions.ServiceFacts(host="h1", disabled=disabled,
                                  forced_down=forced_down, is_up=is_up,
                                  **kw)  # type: ignore[arg-type]


def node(host: str, name: str = "n1", up: bool = True,
         updated: datetime.datetime | None = None,
         uuid: str | None = None) -> decisions.NodeFacts:
    return decisions.NodeFacts(host=host, nodename=name, uuid=uuid or host,
                               service_up=up, updated_at=updated)


def codes(reasons: list[decisions.Reason]) -> list[RC]:
    return [r.code for r in reasons]


class TestReason(testtools.TestCase):
    def test_str_with_and_without_detail(self) -> None:
        self.assertEqual("service disabled: maintenance",
                         str(decisions.Reason(RC.SERVICE_DISABLED,
                                              "maintenance")))
        self.assertEqual("service forced down",
                         str(decisions.Reason(RC.SERVICE_FORCED_DOWN)))

    def test_every_code_has_a_label(self) -> None:
        for code in RC:
            reason = decisions.Reason(code)
            self.assertTrue(reason.label)
            self.assertEqual(reason.label, str(reason))

    def test_trait(self) -> None:
        self.assertEqual(traits.STALE_NODE,
                         decisions.Reason(RC.DUPLICATE_NODE).trait)
        self.assertEqual(traits.STALE_NODE,
                         decisions.Reason(RC.NODE_TOO_OLD).trait)
        for code in (RC.SERVICE_DISABLED, RC.SERVICE_FORCED_DOWN,
                     RC.SERVICE_DOWN):
            self.assertIsNone(decisions.Reason(code).trait)
        for code in RC:
            trait = decisions.Reason(code).trait
            if trait is not None:
                self.assertIn(trait, traits.MANAGED)

    def test_codes_are_stable_strings(self) -> None:
        self.assertEqual("service_disabled", RC.SERVICE_DISABLED.value)
        self.assertEqual("service_forced_down", RC.SERVICE_FORCED_DOWN.value)
        self.assertEqual("service_down", RC.SERVICE_DOWN.value)
        self.assertEqual("duplicate_node", RC.DUPLICATE_NODE.value)
        self.assertEqual("node_too_old", RC.NODE_TOO_OLD.value)
        self.assertEqual("service_down", RC.SERVICE_DOWN)

    def test_summarize(self) -> None:
        self.assertEqual("", decisions.summarize([]))
        self.assertEqual(
            "service disabled: x; service forced down",
            decisions.summarize([decisions.Reason(RC.SERVICE_DISABLED, "x"),
                                 decisions.Reason(RC.SERVICE_FORCED_DOWN)]))


@ddt.ddt
class TestServiceReasons(testtools.TestCase):
    def test_up_and_enabled(self) -> None:
        self.assertEqual([], decisions.service_reasons(svc(), NOW))

    def test_disabled_with_reason(self) -> None:
        reasons = decisions.service_reasons(
            svc(disabled=True, disabled_reason="rack swap"), NOW)
        self.assertEqual([decisions.Reason(RC.SERVICE_DISABLED, "rack swap")],
                         reasons)

    @ddt.data(None, "")
    def test_disabled_without_reason(self, why: str | None) -> None:
        reasons = decisions.service_reasons(
            svc(disabled=True, disabled_reason=why), NOW)
        self.assertEqual([decisions.Reason(RC.SERVICE_DISABLED)], reasons)
        self.assertEqual("service disabled", str(reasons[0]))

    @ddt.data(False, True)
    def test_forced_down(self, is_up: bool) -> None:
        # Nova's servicegroup counts forced_down as down: one reason only.
        reasons = decisions.service_reasons(
            svc(forced_down=True, is_up=is_up), NOW)
        self.assertEqual([RC.SERVICE_FORCED_DOWN], codes(reasons))

    def test_down_with_last_seen(self) -> None:
        seen = NOW - datetime.timedelta(seconds=125)
        reasons = decisions.service_reasons(
            svc(is_up=False, last_seen_up=seen), NOW)
        self.assertEqual([RC.SERVICE_DOWN], codes(reasons))
        self.assertEqual("last seen 2024-05-01T11:57:55Z, 125s ago",
                         reasons[0].detail)

    def test_down_with_naive_last_seen(self) -> None:
        seen = datetime.datetime(2024, 5, 1, 11, 59, 0)
        reasons = decisions.service_reasons(
            svc(is_up=False, last_seen_up=seen), NOW)
        self.assertIn("60s ago", reasons[0].detail)

    def test_down_never_seen(self) -> None:
        reasons = decisions.service_reasons(svc(is_up=False), NOW)
        self.assertEqual([decisions.Reason(RC.SERVICE_DOWN, "never seen")],
                         reasons)

    def test_disabled_and_down(self) -> None:
        reasons = decisions.service_reasons(
            svc(disabled=True, disabled_reason="x", is_up=False), NOW)
        self.assertEqual([RC.SERVICE_DISABLED, RC.SERVICE_DOWN],
                         codes(reasons))

    def test_disabled_and_forced_down(self) -> None:
        reasons = decisions.service_reasons(
            svc(disabled=True, forced_down=True, is_up=False), NOW)
        self.assertEqual([RC.SERVICE_DISABLED, RC.SERVICE_FORCED_DOWN],
                         codes(reasons))


class TestDuplicateReasons(testtools.TestCase):
    def test_distinct_names_untouched(self) -> None:
        nodes = [node("a", "n1"), node("b", "n2"), node("c", "n3", up=False)]
        self.assertEqual({}, decisions.duplicate_reasons(nodes))
        self.assertEqual({}, decisions.duplicate_reasons([]))

    def test_live_service_wins_over_newer_record(self) -> None:
        live = node("a", updated=NOW - datetime.timedelta(days=3))
        dead = node("b", up=False, updated=NOW)
        found = decisions.duplicate_reasons([live, dead])
        self.assertEqual({("b", "n1")}, set(found))
        reason = found[("b", "n1")]
        self.assertEqual(RC.DUPLICATE_NODE, reason.code)
        self.assertEqual("n1 is also on host a (a)", reason.detail)

    def test_newest_record_wins_when_both_up(self) -> None:
        old = node("a", updated=NOW - datetime.timedelta(seconds=1))
        new = node("b", updated=NOW)
        self.assertEqual({("a", "n1")},
                         set(decisions.duplicate_reasons([old, new])))
        self.assertEqual({("a", "n1")},
                         set(decisions.duplicate_reasons([new, old])))

    def test_never_updated_is_oldest(self) -> None:
        never = node("z", updated=None)
        dated = node("a", updated=datetime.datetime(2000, 1, 1))
        self.assertEqual({("z", "n1")},
                         set(decisions.duplicate_reasons([never, dated])))

    def test_naive_and_aware_compare(self) -> None:
        naive = node("a", updated=datetime.datetime(2024, 5, 1, 13, 0))
        aware = node("b", updated=NOW)
        self.assertEqual({("b", "n1")},
                         set(decisions.duplicate_reasons([naive, aware])))

    def test_tie_break_is_deterministic(self) -> None:
        group = [node("a", uuid="u1", updated=NOW),
                 node("b", uuid="u2", updated=NOW),
                 node("b2", uuid="u0", updated=NOW)]
        results = {frozenset(decisions.duplicate_reasons(order))
                   for order in itertools.permutations(group)}
        self.assertEqual(1, len(results))
        self.assertEqual(2, len(results.pop()))

    def test_three_way_duplicate(self) -> None:
        group = [node("a", up=False, updated=NOW),
                 node("b", updated=NOW - datetime.timedelta(hours=1)),
                 node("c", updated=None)]
        found = decisions.duplicate_reasons(group + [node("x", "other")])
        self.assertEqual({("a", "n1"), ("c", "n1")}, set(found))
        for reason in found.values():
            self.assertEqual("n1 is also on host b (b)", reason.detail)
            self.assertEqual(traits.STALE_NODE, reason.trait)

    def test_accepts_a_generator(self) -> None:
        found = decisions.duplicate_reasons(
            node(h, updated=NOW) for h in ("a", "b"))
        self.assertEqual(1, len(found))


class TestAgeReason(testtools.TestCase):
    def test_zero_is_off(self) -> None:
        ancient = node("a", updated=datetime.datetime(1999, 1, 1, tzinfo=UTC))
        self.assertIsNone(decisions.age_reason(ancient, NOW, 0))

    def test_never_updated_is_left_alone(self) -> None:
        self.assertIsNone(decisions.age_reason(node("a"), NOW, 60))

    def test_exactly_at_limit_passes(self) -> None:
        at = node("a", updated=NOW - datetime.timedelta(seconds=60))
        self.assertIsNone(decisions.age_reason(at, NOW, 60))

    def test_over_limit(self) -> None:
        over = node("a", updated=NOW - datetime.timedelta(seconds=61))
        reason = decisions.age_reason(over, NOW, 60)
        assert reason is not None
        self.assertEqual(RC.NODE_TOO_OLD, reason.code)
        self.assertEqual(
            "last updated 2024-05-01T11:58:59Z, 61s ago (limit 60s)",
            reason.detail)
        self.assertEqual(traits.STALE_NODE, reason.trait)

    def test_naive_node_aware_now(self) -> None:
        naive = node("a", updated=datetime.datetime(2024, 5, 1, 11, 0))
        self.assertIsNotNone(decisions.age_reason(naive, NOW, 3599))
        self.assertIsNone(decisions.age_reason(naive, NOW, 3600))

    def test_aware_node_naive_now(self) -> None:
        aware = node("a", updated=NOW - datetime.timedelta(seconds=100))
        naive_now = NOW.replace(tzinfo=None)
        self.assertIsNotNone(decisions.age_reason(aware, naive_now, 99))
        self.assertIsNone(decisions.age_reason(aware, naive_now, 100))

    def test_other_timezone(self) -> None:
        plus2 = datetime.timezone(datetime.timedelta(hours=2))
        updated = datetime.datetime(2024, 5, 1, 13, 59, 0, tzinfo=plus2)
        self.assertIsNone(decisions.age_reason(node("a", updated=updated),
                                               NOW, 60))
        reason = decisions.age_reason(node("a", updated=updated), NOW, 59)
        assert reason is not None
        self.assertIn("60s ago", reason.detail)

    def test_other_timezone_is_printed_in_utc(self) -> None:
        # The detail ends its timestamp with "Z", so it must be UTC.
        plus2 = datetime.timezone(datetime.timedelta(hours=2))
        updated = datetime.datetime(2024, 5, 1, 13, 59, 0, tzinfo=plus2)
        reason = decisions.age_reason(node("a", updated=updated), NOW, 59)
        assert reason is not None
        self.assertEqual(
            "last updated 2024-05-01T11:59:00Z, 60s ago (limit 59s)",
            reason.detail)

    def test_future_record_passes(self) -> None:
        future = node("a", updated=NOW + datetime.timedelta(hours=1))
        self.assertIsNone(decisions.age_reason(future, NOW, 60))

    def test_node_key(self) -> None:
        self.assertEqual(("a", "n9"), node("a", "n9").key)
