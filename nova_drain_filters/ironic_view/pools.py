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

"""Listener pools: one queue per host and slot, reused across restarts.

The slot is the lowest number whose lock file no live process on this host
holds. A restarted process takes its predecessor's slot, so its queue, not
a new one.
"""
import fcntl
import os
import socket
import tempfile
import weakref
from typing import IO

from oslo_config import cfg

CONF = cfg.CONF

POOL_PREFIX = "nova-drain-filters"
MAX_SLOTS = 1024


def lock_dir() -> str:
    """Where slot lock files go: ``[oslo_concurrency] lock_path`` or tmp."""
    try:
        path = CONF.oslo_concurrency.lock_path
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        path = None
    return path or tempfile.gettempdir()


def host_name() -> str:
    """Nova's ``[DEFAULT] host`` if registered, else the host name."""
    try:
        host = CONF.host
    except cfg.NoSuchOptError:
        host = None
    return str(host or socket.gethostname())


class Slot:
    """The lowest free listener slot on this host, held by a file lock.

    ``flock`` locks go with the process: the kernel frees a dead
    process's slot. A forked child shares its parent's lock, so it closes
    (never unlocks) the inherited file and takes a slot of its own.
    """

    def __init__(self, directory: str, host: str) -> None:
        self.directory = directory
        self.host = host
        self.number: int | None = None
        self._file: IO[bytes] | None = None

    def acquire(self) -> int | None:
        """Take the lowest free slot; None if every slot is taken."""
        self.forget()
        # lock_path is made only when a first external lock is taken
        # (oslo.concurrency, fasteners/process_lock.py _ensure_tree): a
        # fresh scheduler may not have taken one when the listener starts.
        os.makedirs(self.directory, exist_ok=True)
        prefix = slot_file_prefix(self.host)
        for number in range(MAX_SLOTS):
            path = os.path.join(self.directory, f"{prefix}{number}")
            handle = try_lock(path)
            if handle is None:
                continue
            self._file, self.number = handle, number
            return number
        return None

    def fileno(self) -> int | None:
        """The held slot's lock file descriptor; None if none is held."""
        handle = self._file
        return None if handle is None or handle.closed else handle.fileno()

    def forget(self) -> None:
        """Drop the slot without unlocking (a fork's parent may hold it)."""
        if self._file is not None:
            self._file.close()
        self._file, self.number = None, None


def try_lock(path: str) -> IO[bytes] | None:
    """The file at ``path``, locked (``flock``, exclusive) for as long as
    some process keeps it open; None if another holds it.

    A process forked after this closes its copy at once (``_HELD``): the
    lock stays this process's, and is free once this process (and a
    reader it passed it to on purpose) closes it.
    """
    handle = _above_stdio(open(path, "ab"))
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    _HELD[handle] = os.getpid()
    return handle


def _above_stdio(handle: IO[bytes]) -> IO[bytes]:
    """``handle``, moved above descriptors 0 to 2 if it got one of them.

    A worker forked by multiprocessing's fork context (cotyledon's, in
    nova-scheduler) closes its standard input (``multiprocessing/util.py``
    ``_close_stdin``, from ``BaseProcess._bootstrap``) while the threads
    our fork hook started already run: a lock file opened then gets
    descriptor 0. ``subprocess.Popen(stdin=DEVNULL)`` puts /dev/null there
    in the child, so a reader passed the host's lock as descriptor 0
    would not hold it, and another process could lead and start a second
    reader beside it (issue 41).
    """
    if handle.fileno() > 2:
        return handle
    moved = fcntl.fcntl(handle.fileno(), fcntl.F_DUPFD_CLOEXEC, 3)
    handle.close()
    return os.fdopen(moved, "ab")


#: The lock files ``try_lock`` opened, each with the process that opened
#: it. A ``flock`` belongs to the open file, which ``fork`` shares with the
#: child: a child that kept its copy would hold its parent's lock for as
#: long as it lives. The owners' ``forget`` closes a copy they still
#: reach, but not one held only by a thread that did not survive the
#: fork: nova-scheduler's parent took the host's reader lock, then forked
#: its workers while it was parking its listener, and each worker kept a
#: copy in that thread's frames, so no worker could ever take the lock.
_HELD: "weakref.WeakKeyDictionary[IO[bytes], int]" = (
    weakref.WeakKeyDictionary())


def _close_inherited() -> None:
    """In a forked child: close every copy of the parent's lock files
    (never unlock: the parent's lock stands), and only those.

    Hooks run in the order they were registered, and the Ironic view's
    (``refresher.install_fork_hooks``, at its import) comes before this
    module's, imported once a listener starts. The view's hook restarts
    the worker's threads, and one of them may have taken a slot or the
    host's lock by now: that file is the child's own, and closing it
    would let the lock go while the worker goes on reading its queue, so
    that the next worker takes the same slot (issue 41).
    """
    child = os.getpid()
    for handle, opener in list(_HELD.items()):
        if opener == child:
            continue
        del _HELD[handle]
        try:
            handle.close()
        except OSError:
            pass


os.register_at_fork(after_in_child=_close_inherited)


def safe(host: str) -> str:
    """The host's name as it may stand in a file's name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host)


def slot_file_prefix(host: str) -> str:
    """A slot lock file's name before its number."""
    return f"{POOL_PREFIX}-events.{safe(host)}."


def slot_pools(directory: str, host: str) -> list[str]:
    """The per-process queues of this host's slots that have ever been
    taken here: one per slot lock file in ``directory``, in slot order."""
    prefix = slot_file_prefix(host)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    slots = sorted(int(name[len(prefix):]) for name in names
                   if name.startswith(prefix)
                   and name[len(prefix):].isdigit())
    return [pool_name(host, slot) for slot in slots]


def pool_name(host: str, slot: int | str | None) -> str:
    """The queue of one listener: stable per host and slot."""
    if slot is None:
        return f"{POOL_PREFIX}.{host}.pid-{os.getpid()}"
    return f"{POOL_PREFIX}.{host}.{slot}"
