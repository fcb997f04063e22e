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

"""Event threads yield the CPU: only their own niceness changes.

The unit run may be monkey-patched by what its discovery imports, and
its threads green; what a native thread gets is asked of a fresh
interpreter (``native``).
"""
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any
from unittest import mock

import testtools

from nova_drain_filters.ironic_view import priority


def in_thread(work: Callable[[], Any]) -> tuple[Any, int, int]:
    """What ``work`` returned in a new native thread, that thread's
    niceness after it, and the calling thread's."""
    got: list[Any] = []

    def run() -> None:
        result = work()
        got.append((result, os.getpriority(
            os.PRIO_PROCESS, threading.get_native_id())))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    (result, nice), = got
    return result, nice, os.getpriority(
        os.PRIO_PROCESS, threading.get_native_id())


NATIVE = """
import json, os, sys, threading
from nova_drain_filters.ironic_view import priority
got = []
def run():
    got.append(priority.lower_this_thread(*map(int, sys.argv[1:])))
    got.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
thread = threading.Thread(target=run)
thread.start()
thread.join(10)
print(json.dumps(got + [os.getpriority(os.PRIO_PROCESS, 0)]))
"""


def native(*steps: int) -> tuple[Any, int, int]:
    """``in_thread(lower_this_thread(*steps))`` in a fresh interpreter,
    on native threads."""
    out = subprocess.run(
        [sys.executable, "-c", NATIVE, *map(str, steps)],
        capture_output=True, text=True, check=True, timeout=60)
    result, nice, caller = json.loads(out.stdout)
    return result, nice, caller


class LowerThisThreadTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def test_lowers_the_calling_thread_only(self) -> None:
        result, nice, caller = native()
        expected = min(19, self.base + priority.THREAD_NICE)
        self.assertEqual((expected, expected), (result, nice))
        self.assertEqual(self.base, caller)

    def test_never_past_19(self) -> None:
        result, nice, _ = native(40)
        self.assertEqual((19, 19), (result, nice))

    def test_a_green_thread_keeps_the_process_niceness(self) -> None:
        with mock.patch.object(priority.refresher, "green_hub",
                               return_value=object()):
            result, nice, _ = in_thread(priority.lower_this_thread)
        self.assertEqual((None, self.base), (result, nice))

    def test_zero_steps_change_nothing(self) -> None:
        with mock.patch.object(priority, "THREAD_NICE", 0):
            result, nice, _ = in_thread(priority.lower_this_thread)
        self.assertEqual((None, self.base), (result, nice))

    def test_a_refusal_is_not_raised(self) -> None:
        with mock.patch.object(priority.os, "setpriority",
                               side_effect=PermissionError(1, "denied")):
            result, nice, _ = in_thread(priority.lower_this_thread)
        self.assertEqual((None, self.base), (result, nice))
