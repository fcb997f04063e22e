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

"""The benchmarks' lowest priority reaches a session's autogroup."""
import os
import subprocess
import sys

import testtools

from tests.functional.services import priority


class LowestTest(testtools.TestCase):
    def child(self) -> subprocess.Popen[bytes]:
        """A sleeping process in a session (and autogroup) of its own."""
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            start_new_session=True)
        self.addCleanup(proc.wait, 10)
        self.addCleanup(proc.kill)
        return proc

    def test_the_niceness_and_the_autogroups(self) -> None:
        proc = self.child()
        said = priority.lowest(proc.pid)
        self.assertEqual(19, os.getpriority(os.PRIO_PROCESS, proc.pid))
        path = f"/proc/{proc.pid}/autogroup"
        if not os.path.exists(path):
            self.assertEqual("nice 19 (the kernel has no autogroups)", said)
            return
        with open(path) as autogroup:
            self.assertTrue(autogroup.read().rstrip().endswith(" nice 19"))
        self.assertEqual("nice 19, in an autogroup at nice 19", said)
        # This process's own group is untouched.
        with open("/proc/self/autogroup") as mine:
            self.assertFalse(mine.read().rstrip().endswith(" nice 19"))
