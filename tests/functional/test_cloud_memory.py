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

"""The cloud's memory sum (tests/functional/cloud/memory.py) on a fake
/proc: descendants counted once, gone processes skipped. No service."""

import os
import tempfile
from pathlib import Path

import testtools

from tests.functional.cloud import memory

ROLLUP = """\
5584f126f000-7ffe7d02d000 ---p 00000000 00:00 0                  [rollup]
Rss:                {rss} kB
Pss:                {pss} kB
Pss_Dirty:           116 kB
"""


class FakeProc:
    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, pid: int, ppid: int, pss: int | None, rss: int = 0,
            comm: str = "x") -> None:
        entry = self.root / str(pid)
        entry.mkdir()
        # A command name with spaces and ")" as the kernel writes it.
        (entry / "stat").write_text(f"{pid} ({comm}) S {ppid} 1 1 0 -1\n")
        if pss is not None:  # None: its smaps_rollup is gone already
            (entry / "smaps_rollup").write_text(
                ROLLUP.format(rss=rss, pss=pss))


class TestMemory(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        self.proc = FakeProc(self.root)
        (self.root / "self").mkdir()  # not a PID: skipped

    def test_descendants_counted_once(self) -> None:
        p = self.proc
        p.add(10, 1, pss=100, rss=300, comm="nova-scheduler")
        p.add(11, 10, pss=40, rss=280, comm="nova-scheduler: worker(0)")
        p.add(12, 10, pss=40, rss=280, comm="a) b")
        p.add(13, 12, pss=5, rss=6)
        p.add(20, 1, pss=7, rss=8)       # recorded as well as 10
        p.add(30, 1, pss=1000, rss=1000)  # not the cloud's
        used = memory.usage([10, 12, 20, 99], self.root)  # 99: gone
        self.assertEqual(memory.Usage(5, 192, 874), used)
        self.assertEqual({10, 11, 12, 13}, memory.with_descendants(
            [10], self.root))

    def test_process_gone_while_read(self) -> None:
        self.proc.add(10, 1, pss=100, rss=200)
        self.proc.add(11, 10, pss=None)
        self.assertEqual(memory.Usage(1, 100, 200),
                         memory.usage([10], self.root))

    def test_text(self) -> None:
        used = memory.Usage(3, 3 * memory.GIB // 2, 2 * memory.GIB)
        self.assertEqual("PSS 1.50 GiB, RSS 2.00 GiB, 3 processes",
                         used.text())

    def test_real_proc(self) -> None:
        """This very process: its PSS is read and at most its RSS."""
        used = memory.usage([os.getpid()])
        self.assertGreaterEqual(used.processes, 1)
        self.assertLess(0, used.pss_kib)
        self.assertLessEqual(used.pss_kib, used.rss_kib)
