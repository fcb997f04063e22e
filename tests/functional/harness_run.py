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

"""Run one Nova functional-harness case from a script, quietly.

Shared by the demo (``tests/functional/demo``) and the benchmarks
(``tests/functional/bench``): Nova's harness is made for test runners, and
these scripts print their own report instead.
"""
import argparse
import logging
import os
import time
import unittest
import warnings
from collections.abc import Callable
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_quietly(case: unittest.TestCase, log: Callable[[], str],
                timeout: int = 600) -> str | None:
    """Run ``case``; return None, or a one-line error.

    :param log: returns the harness's captured log, for the last ERROR line
        when Nova exits on a start-up error.
    :param timeout: seconds the harness lets the case run
        (``OS_TEST_TIMEOUT``, unless set already). The harness ends a case
        that outlives it by raising in whatever runs at that moment, often
        inside a Nova API request, which then answers 500; the error then
        says that it was the timeout.
    """
    # The harness warns on import (eventlet); inside it, Nova's
    # WarningsFixture turns DeprecationWarnings back on, so route every
    # warning to logging, which the harness captures.
    warnings.simplefilter("ignore")
    logging.captureWarnings(True)
    logging.getLogger().handlers[:] = [logging.NullHandler()]
    os.environ.setdefault("OS_TEST_TIMEOUT", str(timeout))
    try:
        allowed = int(os.environ["OS_TEST_TIMEOUT"])
    except ValueError:  # the harness's own reading fails on it too
        given = os.environ["OS_TEST_TIMEOUT"]
        return f"OS_TEST_TIMEOUT={given!r} is not a number of seconds"
    result = unittest.TestResult()
    started = time.monotonic()
    try:
        case.run(result)
    except SystemExit as exc:  # Nova exits on some start-up errors
        errors = [line for line in log().splitlines() if " ERROR " in line]
        return f"sys.exit({exc.code})" + (f" after: {errors[-1]}" if errors else "")
    for _test, text in result.errors + result.failures:
        lines = [line for line in text.splitlines() if line.strip()]
        error = lines[-1] if lines else "unknown error"
        if allowed > 0 and time.monotonic() - started >= allowed:
            error = (f"the harness's timeout ended the run after {allowed} s "
                     f"(OS_TEST_TIMEOUT); what it interrupted: {error}")
        return error
    return None
