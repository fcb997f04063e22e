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

"""Listener slots and pool names: stable per host, one per live process."""
import os
import subprocess
import sys

import fixtures
import testtools

from nova_drain_filters.ironic_view import pools


class TestSlots(testtools.TestCase):
    def test_lowest_free_slot_and_release(self) -> None:
        path = self.useFixture(fixtures.TempDir()).path
        one, two = (pools.Slot(path, "sched-1"),
                    pools.Slot(path, "sched-1"))
        self.assertEqual(0, one.acquire())
        self.assertEqual(1, two.acquire())
        one.forget()
        third = pools.Slot(path, "sched-1")
        self.assertEqual(0, third.acquire())
        other_host = pools.Slot(path, "sched-2")
        self.assertEqual(0, other_host.acquire())
        for slot in (two, third, other_host):
            slot.forget()

    def test_a_missing_lock_path_is_made(self) -> None:
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            "not", "yet")
        slot = pools.Slot(path, "h")
        self.assertEqual(0, slot.acquire())
        self.assertTrue(os.path.isdir(path))
        slot.forget()

    def test_a_forked_child_takes_its_own_slot(self) -> None:
        path = self.useFixture(fixtures.TempDir()).path
        slot = pools.Slot(path, "h")
        self.assertEqual(0, slot.acquire())
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: what EventListener.start does after a fork
            slot.forget()
            os.write(write, str(slot.acquire()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        self.assertEqual(b"1", os.read(read, 10))
        # The child's forget() did not unlock the parent's slot.
        self.assertEqual(1, pools.Slot(path, "h").acquire())
        slot.forget()

    def test_pool_names(self) -> None:
        self.assertEqual("nova-drain-filters.sched-1.3",
                         pools.pool_name("sched-1", 3))
        self.assertEqual(f"nova-drain-filters.h.pid-{os.getpid()}",
                         pools.pool_name("h", None))

    def test_slot_pools_are_this_hosts_taken_slots_in_order(self) -> None:
        path = self.useFixture(fixtures.TempDir()).path
        self.assertEqual([], pools.slot_pools(path, "sched.1"))
        held = [pools.Slot(path, "sched.1") for _ in range(11)]
        for slot in held:
            slot.acquire()
        other = pools.Slot(path, "sched-2")
        other.acquire()
        for slot in (*held[:3], other):
            slot.forget()  # a free slot's queue is still this host's
        # Not a slot's: the host's reader lock, and a stray file.
        for name in ("nova-drain-filters-reader.sched.1.lock",
                     "nova-drain-filters-events.sched.1.x"):
            open(os.path.join(path, name), "w").close()
        self.assertEqual([pools.pool_name("sched.1", n) for n in range(11)],
                         pools.slot_pools(path, "sched.1"))
        self.assertEqual([], pools.slot_pools(
            os.path.join(path, "missing"), "h"))
        for slot in held[3:]:
            slot.forget()

    def test_a_child_that_never_forgets_does_not_keep_its_parents_lock(
            self) -> None:
        # nova-scheduler's parent took the host's reader lock and forked
        # its workers while a thread of its own was parking the listener:
        # in each worker the lock's file lived on in that thread's frames,
        # which nothing runs to close. Once the parent let go, the lock
        # must be free for the children, held by none of them already.
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, "l")
        held = pools.try_lock(path)
        assert held is not None
        go_read, go_write = os.pipe()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # never closes ``held`` itself
            os.close(go_write)
            os.read(go_read, 1)  # the parent has let go
            taken = pools.try_lock(path)
            os.write(write, b"1" if taken is not None else b"0")
            os._exit(0)
        os.close(go_read)
        held.close()
        os.write(go_write, b"x")
        os.waitpid(pid, 0)
        self.assertEqual(b"1", os.read(read, 1))
        for fd in (go_write, read, write):
            os.close(fd)


#: A fresh interpreter, so that the fork hooks are registered in the order
#: nova-scheduler registers them: ``ironic_view`` (imported with the
#: filters) installs the refresher's at import, and ``pools`` is imported
#: only once a listener starts (``IronicView._start_events``), after it.
#: A worker's restart hook starts threads, and one of them may take a slot
#: before ``pools``' own hook has run in the child. Here that thread is
#: made to win (joined in the hook) instead of left to the scheduler.
_FORKED_WORKER = """
import os, sys, threading
import nova_drain_filters.ironic_view  # the refresher's fork hooks
assert "nova_drain_filters.ironic_view.pools" not in sys.modules
directory, host = sys.argv[1], sys.argv[2]
held = []

def restart_in_child():
    def connect():
        from nova_drain_filters.ironic_view import pools
        slot = pools.Slot(directory, host)
        slot.acquire()
        held.append(slot)
    thread = threading.Thread(target=connect)
    thread.start()
    thread.join()

os.register_at_fork(after_in_child=restart_in_child)
from nova_drain_filters.ironic_view import pools  # its hook comes after
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(write)
    print(held[0].number, flush=True)
    os.read(read, 1)  # live, holding the slot, until the test is done
    os._exit(0)
os.close(read)
print(pid, flush=True)
sys.stdin.read()
"""


class TestForkHookOrder(testtools.TestCase):
    def test_a_slot_a_worker_took_in_a_fork_hook_stays_its_own(
            self) -> None:
        # Issue 41: both workers of nova-scheduler read slot 0's queue and
        # the lock directory held slot 0's file alone. The slot a worker's
        # listener took while the fork hooks ran was closed by pools' own
        # hook, which took it for a copy of the parent's: the worker went
        # on reading slot 0 without its lock, and the next worker took
        # slot 0 too. RabbitMQ then gave each worker half of the events.
        path = self.useFixture(fixtures.TempDir()).path
        proc = subprocess.Popen(
            [sys.executable, "-c", _FORKED_WORKER, path, "sched"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait, 30)
        self.addCleanup(proc.stdin.close)  # type: ignore[union-attr]
        assert proc.stdout is not None
        child_pid = int(proc.stdout.readline())
        self.assertEqual("0", proc.stdout.readline().strip())
        next_worker = pools.Slot(path, "sched")
        self.addCleanup(next_worker.forget)
        # The forked worker still holds slot 0: the next one takes slot 1.
        self.assertEqual(1, next_worker.acquire(),
                         f"worker {child_pid} lost slot 0's lock")
