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

"""The benchmarks' and the demo's runner of one harness case."""
import logging
import time
import unittest
import warnings

import fixtures
import testtools

from tests.functional import harness_run

ERROR = "nova GET /servers/detail: HTTP 500: Unexpected API Error"


def case_of(sleep: float, error: str | None) -> unittest.TestCase:
    """A case that fails as a Nova API request does when the harness's
    timeout hits it; made here so that no loader collects it."""

    class Case(unittest.TestCase):
        def runTest(self) -> None:
            time.sleep(sleep)
            if error is not None:
                raise RuntimeError(error)

    return Case()


class RunQuietlyTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.EnvironmentVariable("OS_TEST_TIMEOUT"))
        root = logging.getLogger()
        self.addCleanup(setattr, root, "handlers", list(root.handlers))
        self.addCleanup(logging.captureWarnings, False)
        catcher = warnings.catch_warnings()
        catcher.__enter__()
        self.addCleanup(catcher.__exit__, None, None, None)

    def run_case(self, sleep: float, error: str | None,
                 timeout: int) -> str | None:
        return harness_run.run_quietly(case_of(sleep, error), lambda: "",
                                       timeout=timeout)

    def test_a_failure_at_the_timeout_says_it_was_the_timeout(self) -> None:
        error = self.run_case(1.05, ERROR, timeout=1)
        assert error is not None
        self.assertIn("the harness's timeout ended the run after 1 s "
                      "(OS_TEST_TIMEOUT)", error)
        self.assertIn("HTTP 500", error)

    def test_a_failure_before_the_timeout_is_itself(self) -> None:
        self.assertEqual(
            "RuntimeError: nova GET /servers/detail: HTTP 500: "
            "Unexpected API Error",
            self.run_case(0.0, ERROR, timeout=600))

    def test_a_run_that_passes_has_no_error(self) -> None:
        self.assertIsNone(self.run_case(0.0, None, timeout=1))

    def test_a_timeout_set_already_is_the_one_used(self) -> None:
        self.useFixture(fixtures.EnvironmentVariable("OS_TEST_TIMEOUT", "0"))
        error = self.run_case(1.05, ERROR, timeout=1)
        assert error is not None
        self.assertNotIn("timeout", error)

    def test_a_timeout_that_is_no_number_is_one_line(self) -> None:
        self.useFixture(fixtures.EnvironmentVariable("OS_TEST_TIMEOUT",
                                                     "ten"))
        self.assertEqual(
            "OS_TEST_TIMEOUT='ten' is not a number of seconds",
            self.run_case(0.0, None, timeout=1))
