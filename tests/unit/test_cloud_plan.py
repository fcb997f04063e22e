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

"""tools/cloud.sh up's step runner: needs first, waits side by side."""
import threading
from collections.abc import Callable

import testtools

from tests.functional.cloud import plan
from tests.functional.cloud.plan import Step
from tests.functional.services.process import ServiceStartError


class TestCheck(testtools.TestCase):
    def test_unknown_need(self) -> None:
        e = self.assertRaises(ValueError, plan.check,
                              [Step("a", lambda: None, ("b",))])
        self.assertIn("a needs unknown ['b']", str(e))

    def test_loop(self) -> None:
        e = self.assertRaises(ValueError, plan.check, [
            Step("a", lambda: None, ("b",)), Step("b", lambda: None, ("a",)),
            Step("c", lambda: None)])
        self.assertIn("a loop among ['a', 'b']", str(e))

    def test_two_steps_with_one_name(self) -> None:
        self.assertRaises(ValueError, plan.check,
                          [Step("a", lambda: None), Step("a", lambda: None)])


class TestRun(testtools.TestCase):
    def test_a_step_runs_after_its_needs_only(self) -> None:
        order: list[str] = []
        lock = threading.Lock()

        def record(name: str) -> Callable[[], None]:
            def step() -> None:
                with lock:
                    order.append(name)
            return step

        timings = plan.run([Step("c", record("c"), ("a", "b")),
                            Step("a", record("a")),
                            Step("b", record("b"), ("a",))])
        self.assertEqual(["a", "b", "c"], order)
        self.assertEqual(["a", "b", "c"], [t.name for t in timings])

    def test_independent_steps_overlap(self) -> None:
        # Each waits for the other to have started: they deadlock (and the
        # barrier breaks after 5 s) unless they run at the same time.
        barrier = threading.Barrier(2, timeout=5)
        plan.run([Step("a", barrier.wait), Step("b", barrier.wait)])
        self.assertFalse(barrier.broken)

    def test_a_failure_names_its_step_and_starts_nothing_after(self) -> None:
        ran: list[str] = []

        def boom() -> None:
            raise KeyError("x")

        e = self.assertRaises(ServiceStartError, plan.run, [
            Step("bad", boom), Step("after", lambda: ran.append("after"),
                                    ("bad",))])
        self.assertEqual("bad: KeyError: 'x'", str(e))
        self.assertEqual([], ran)

    def test_a_service_start_error_is_raised_as_it_is(self) -> None:
        def fails() -> None:
            raise ServiceStartError("keystone did not answer; see k.log")

        e = self.assertRaises(ServiceStartError, plan.run,
                              [Step("Keystone", fails)])
        self.assertEqual("keystone did not answer; see k.log", str(e))

    def test_running_steps_finish_before_the_failure_is_raised(self) -> None:
        release = threading.Event()
        finished: list[str] = []

        def slow() -> None:
            release.wait(5)
            finished.append("slow")

        def fails() -> None:
            release.set()
            raise RuntimeError("no")

        self.assertRaises(ServiceStartError, plan.run,
                          [Step("slow", slow), Step("fails", fails)])
        self.assertEqual(["slow"], finished)
