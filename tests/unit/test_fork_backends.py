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

"""The fork path on both concurrency backends, each in a process of its own.

``tests/unit/fork_worker.py`` starts the view, forks a worker the way
oslo.service's backend does, and reports. The real ``nova-scheduler`` with
forked workers is the end-to-end tier's; this is the unit of it.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import testtools

from nova_drain_filters.ironic_view import refresher as ironic_refresher

REPO = Path(__file__).resolve().parents[2]
BOTH = [ironic_refresher.REFRESH_THREAD, ironic_refresher.WATCHDOG_THREAD]


class ForkBackendTestBase(testtools.TestCase):
    """Runs the worker on ``BACKEND``; each backend's class has the test."""

    BACKEND = ""

    def report(self) -> dict:
        env = {k: v for k, v in os.environ.items()
               if k != "OS_NOVA_DISABLE_EVENTLET_PATCHING"}
        env["PYTHONPATH"] = str(REPO)
        done = subprocess.run(
            [sys.executable, "-m", "tests.unit.fork_worker", self.BACKEND],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1])

    def check_worker_lists_on_its_own_and_the_parent_parks(self) -> None:
        report = self.report()
        self.assertTrue(report["first"])
        # The worker must list although the parent's snapshot lock was
        # held by another thread as it forked.
        self.assertTrue(report["lock_held_at_fork"])
        self.assertEqual(self.BACKEND == "eventlet",
                         report["eventlet_patched"])
        self.assertEqual(0, report["worker_status"])
        worker = report["worker"]
        self.assertEqual({"listed": True, "pid": True, "threads": BOTH,
                          "restarted": True,
                          "green": self.BACKEND == "eventlet"}, worker)
        self.assertTrue(report["parent_parked"])
        self.assertEqual(0, report["parent_refreshes_while_parked"])
        self.assertEqual(BOTH, report["parent_after_request"])


class TestForkOnNativeThreads(ForkBackendTestBase):
    """Nova 34's nova-scheduler: multiprocessing's fork context."""

    BACKEND = "threading"

    def test_worker_lists_on_its_own_and_the_parent_parks(self) -> None:
        self.check_worker_lists_on_its_own_and_the_parent_parks()


class TestForkOnEventlet(ForkBackendTestBase):
    """Nova 31 to 33's: os.fork, then a new eventlet hub in the worker.

    The hub replaced after the fork hooks ran left the worker's threads
    dead until a request found their heartbeat 11 s old; the watchdog that
    should restart a dead refresher never ran.
    """

    BACKEND = "eventlet"

    def test_worker_lists_on_its_own_and_the_parent_parks(self) -> None:
        self.check_worker_lists_on_its_own_and_the_parent_parks()
