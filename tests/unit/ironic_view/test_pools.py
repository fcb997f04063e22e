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
