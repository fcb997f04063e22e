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

"""The decisions of ``drain host migrate``: pure functions over facts."""
import testtools

from nova_drain_filters.migration import plan
from nova_drain_filters.migration.plan import Action
from nova_drain_filters.migration.plan import Next
from nova_drain_filters.migration.plan import Why


def server(status: str = "ACTIVE", **kw: object) -> plan.ServerFacts:
    return plan.ServerFacts("s1", "web", "h1", status, **kw)  # type: ignore


class TestPlanMove(testtools.TestCase):
    def test_by_status(self) -> None:
        for status, action, why in (
                ("ACTIVE", Action.LIVE, None), ("PAUSED", Action.LIVE, None),
                ("SHUTOFF", Action.COLD, None),
                ("SUSPENDED", Action.NONE, Why.SUSPENDED),
                ("ERROR", Action.NONE, Why.ERROR),
                ("RESCUE", Action.NONE, Why.RESCUED),
                ("SHELVED", Action.NONE, Why.SHELVED),
                ("SHELVED_OFFLOADED", Action.NONE, Why.SHELVED),
                ("VERIFY_RESIZE", Action.NONE, Why.FOREIGN_RESIZE),
                ("BUILD", Action.NONE, Why.STATE)):
            step = plan.plan_move(server(status))
            self.assertEqual((action, why), (step.action, step.why), status)
            self.assertEqual(("h1", "s1", "web"),
                             (step.host, step.server, step.name))

    def test_baremetal_first_then_task(self) -> None:
        self.assertEqual(Why.BAREMETAL, plan.plan_move(server(
            baremetal=True, task_state="migrating")).why)
        step = plan.plan_move(server(task_state="resize_prep"))
        self.assertEqual((Action.NONE, Why.TASK, "resize_prep"),
                         (step.action, step.why, step.detail))

    def test_affinity_group_stays(self) -> None:
        step = plan.plan_move(server(affinity=("pair", 1)))
        self.assertEqual((Action.NONE, Why.AFFINITY, "pair (1 other "
                          "member(s))"), (step.action, step.why, step.detail))
        # Its state is named first when that alone keeps it.
        self.assertEqual(Why.SUSPENDED, plan.plan_move(server(
            "SUSPENDED", affinity=("pair", 1))).why)
        self.assertEqual(Action.COLD, plan.plan_move(server(
            "SHUTOFF")).action)

    def test_plan_moves_order(self) -> None:
        steps = plan.plan_moves([
            plan.ServerFacts("a", "z", "h1", "SUSPENDED"),
            plan.ServerFacts("b", "y", "h1", "SHUTOFF"),
            plan.ServerFacts("c", "x", "h1", "ACTIVE"),
            plan.ServerFacts("d", "w", "h1", "ACTIVE")])
        self.assertEqual(["d", "c", "b", "a"], [s.server for s in steps])


class TestNextStep(testtools.TestCase):
    def next(self, action: Action, status: str, running_for: float | None =
             None, aborted: bool = False) -> Next:
        return plan.next_step(action, status, running_for=running_for,
                              server_timeout=10, aborted=aborted)

    def test_live(self) -> None:
        for status in ("accepted", "queued", "preparing", "post-migrating"):
            self.assertEqual(Next.WAIT, self.next(Action.LIVE, status))
        self.assertEqual(Next.WAIT, self.next(Action.LIVE, "running", 9.9))
        self.assertEqual(Next.ABORT, self.next(Action.LIVE, "running", 10))
        self.assertEqual(Next.WAIT, self.next(Action.LIVE, "running", 99,
                                              aborted=True))
        self.assertEqual(Next.VERIFY, self.next(Action.LIVE, "completed"))
        self.assertEqual(Next.RETRY, self.next(Action.LIVE, "error"))
        self.assertEqual(Next.FAIL, self.next(Action.LIVE, "failed"))
        self.assertEqual(Next.FAIL, self.next(Action.LIVE, "cancelled"))
        self.assertEqual(Next.CANCELLED, self.next(Action.LIVE, "cancelled",
                                                   aborted=True))

    def test_cold(self) -> None:
        for status in ("pre-migrating", "migrating", "post-migrating",
                       "confirming"):
            self.assertEqual(Next.WAIT, self.next(Action.COLD, status))
        self.assertEqual(Next.CONFIRM, self.next(Action.COLD, "finished"))
        self.assertEqual(Next.VERIFY, self.next(Action.COLD, "confirmed"))
        self.assertEqual(Next.RETRY, self.next(Action.COLD, "error"))
        self.assertEqual(Next.FAIL, self.next(Action.COLD, "reverted"))
        # A cold migration is never aborted, whatever its age.
        self.assertEqual(Next.WAIT, self.next(Action.COLD, "migrating", 99))


class TestSuccess(testtools.TestCase):
    def test_succeeded(self) -> None:
        self.assertTrue(plan.succeeded(Action.LIVE, "completed", "h1", "h2",
                                       None))
        self.assertTrue(plan.succeeded(Action.COLD, "confirmed", "h1", "h2",
                                       None))
        for args in (("completed", "h1", "h1", None),   # still on source
                     ("completed", "h1", "h2", "migrating"),
                     ("running", "h1", "h2", None),
                     ("completed", "h1", None, None)):
            self.assertFalse(plan.succeeded(Action.LIVE, *args), args)
        # A finished cold migration awaits its confirm: not yet.
        self.assertFalse(plan.succeeded(Action.COLD, "finished", "h1", "h2",
                                        None))

    def test_transient(self) -> None:
        self.assertTrue(plan.transient(Action.LIVE, "h1", "h1", "ACTIVE",
                                       None))
        self.assertTrue(plan.transient(Action.LIVE, "h1", "h1", "PAUSED",
                                       None))
        self.assertTrue(plan.transient(Action.COLD, "h1", "h1", "SHUTOFF",
                                       None))
        self.assertFalse(plan.transient(Action.LIVE, "h1", "h1", "ERROR",
                                        None))
        self.assertFalse(plan.transient(Action.LIVE, "h1", "h2", "ACTIVE",
                                        None))
        self.assertFalse(plan.transient(Action.LIVE, "h1", "h1", "ACTIVE",
                                        "migrating"))

    def test_host_done(self) -> None:
        self.assertTrue(plan.host_done(plan.HostLoad("h1", (), ())))
        self.assertFalse(plan.host_done(plan.HostLoad("h1", ("s1",), ())))
        self.assertFalse(plan.host_done(plan.HostLoad("h1", (), ("m1",))))
        self.assertTrue(plan.unfinished(["completed", "finished"]))
        self.assertFalse(plan.unfinished(["completed", "error", "confirmed"]))


class TestBackoff(testtools.TestCase):
    def test_retry_delay(self) -> None:
        self.assertEqual([2.0, 2.0, 4.0, 8.0, 60.0],
                         [plan.retry_delay(a) for a in (0, 1, 2, 3, 10)])

    def test_poll_delay_grows_with_quiet_time(self) -> None:
        self.assertEqual(plan.MIN_POLL, plan.poll_delay(0.0, 100))
        self.assertEqual(2.0, plan.poll_delay(10.0, 100))
        self.assertEqual(plan.MAX_POLL, plan.poll_delay(1e6, 100))
        self.assertEqual(0.5, plan.poll_delay(10.0, 0.5))
        self.assertEqual(0.0, plan.poll_delay(10.0, -1))

    def test_polls_per_wait_are_few(self) -> None:
        """A quiet wait of T costs about log(T) polls, never T/interval."""
        for wait, most in ((3.0, 12), (60.0, 28), (3600.0, 160)):
            t, polls = 0.0, 0
            while t < wait:
                t += plan.poll_delay(t, 1e9)
                polls += 1
            self.assertLessEqual(polls, most, wait)

    def test_expected_duration_is_the_mean_and_due_before_it(self) -> None:
        self.assertIsNone(plan.expected_duration([]))
        # Whole-second stamps: 3.6 s moves read as 3 or 4; the mean is 3.6,
        # and a move is due one standard deviation (0.49 s) before it.
        due, mean = plan.expected_duration([4, 3, 4, 4, 3]) or (0, 0)
        self.assertAlmostEqual(3.6, mean)
        self.assertAlmostEqual(3.6 - 0.4899, due, places=3)
        # Never due before the quickest move seen.
        self.assertEqual((10.0, 10.0), plan.expected_duration([10.0]))
        self.assertEqual(9.0, (plan.expected_duration([9, 9, 9, 21]) or
                               (0, 0))[0])

    def test_look_delay(self) -> None:
        # No estimate: the backoff of poll_delay.
        self.assertEqual(2.0, plan.look_delay(10.0, None))
        # Before it is due: sleep until then, at most MAX_POLL.
        self.assertEqual(2.5, plan.look_delay(0.0, (-2.5, 10.0)))
        self.assertEqual(plan.MAX_POLL, plan.look_delay(0.0, (-1e4, 10.0)))
        # Once due: short looks first, then half the time since it was
        # due, at most a tenth of the mean move (never under a second).
        self.assertEqual(plan.DUE_POLL, plan.look_delay(99.0, (0.1, 10.0)))
        self.assertEqual(0.5, plan.look_delay(99.0, (1.0, 10.0)))
        self.assertEqual(1.0, plan.look_delay(99.0, (10.0, 10.0)))
        self.assertEqual(1.0, plan.look_delay(99.0, (10.0, 3.0)))
        self.assertEqual(12.0, plan.look_delay(99.0, (100.0, 120.0)))
        self.assertEqual(plan.MAX_POLL, plan.look_delay(99.0, (1e6, 1e4)))

    def test_looks_once_due_are_few(self) -> None:
        """A move seen ``x`` late costs about log(x) looks while ``x`` is
        short, then one a tenth of a move: never one a second for long."""
        for mean, late, most in ((10.0, 3.0, 9), (10.0, 30.0, 36),
                                 (300.0, 60.0, 18)):
            t, looks = 0.0, 0
            while t < late:
                t += plan.look_delay(0.0, (t, mean))
                looks += 1
            self.assertLessEqual(looks, most, (mean, late))

    def test_changes_since_is_before_the_oldest_change(self) -> None:
        self.assertEqual(100.0 - plan.CLOCK_SKEW,
                         plan.changes_since([130.0, 100.0, 170.0], 200.0))
        # Nothing in flight: a margin before now.
        self.assertEqual(200.0 - plan.CLOCK_SKEW, plan.changes_since([], 200.0))

    def test_took_from_close_looks_or_nova_stamps(self) -> None:
        # Looks 0.2 s apart bracket the arrival: their middle, from POST.
        self.assertAlmostEqual(11.6, plan.took(100.0, (111.5, 111.7),
                                               (100.0, 112.0)))
        # Looks far apart: Nova's stamps, created to arrived.
        self.assertEqual(12.0, plan.took(100.0, (101.0, 111.7),
                                         (100.0, 112.0)))
        self.assertIsNone(plan.took(100.0, (101.0, 111.7), (None, 112.0)))
        # A look before the POST does not count as one that missed it.
        self.assertAlmostEqual(0.4, plan.took(100.0, (90.0, 100.8),
                                              (None, None)))
