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

"""Event work yields the CPU to the scheduler's requests.

The reader process runs ``READER_NICE`` steps above its scheduler
(``reader.py``). What is left of an event in a scheduler process, taking
the reader's batch in and applying it to the view, runs in threads of
its own, and those run ``THREAD_NICE`` steps above the process's other
threads. In a burst, every worker of a host applies every event, so without
this the other workers' event threads take CPUs from the worker that is
answering ``select_destinations``. With it the kernel runs the requests
first and the events in what is left: the calls wait less for a CPU
during a burst (``select_burst``, figures in ``doc/source/testing.rst``).

A niceness is the thread's own on Linux (sched(7), "the nice value is a
per-thread attribute"). It counts against the threads of the same
autogroup or cgroup: the scheduler's workers, which share a session or
a systemd unit. On eventlet (Nova 31 to 33) every green thread is the
process's one OS thread, which must keep its niceness, so nothing is
changed there. Nor on a kernel that has no per-thread niceness.

A thread that holds the GIL while it waits for a CPU makes its
process's request thread wait as well. The event threads hold it in
short steps (one batch's apply, one batch's decode), and in
``select_burst`` "the rest" of a call's time, where such waits show, did
not grow with them lowered.
"""
import os
import sys
import threading

from oslo_log import log as logging

from nova_drain_filters.ironic_view import refresher

LOG = logging.getLogger(__name__)

#: The reader process's niceness above its scheduler's: it shortens the
#: calls' slowdown during a burst (``select_burst``). Not +19: when every
#: CPU is busy with requests, a process at +19 beside a busy one gets
#: almost none of a CPU (sched(7)'s weights, 15 against 1,024), and the
#: view would fall further behind.
READER_NICE = 10
#: A scheduler process's event threads' niceness above its others', for
#: the same reasons.
THREAD_NICE = 10


def lower_this_thread(steps: int | None = None) -> int | None:
    """Raise the calling thread's niceness by ``steps`` (default
    ``THREAD_NICE``); return its niceness now, or None if unchanged.

    Only a native thread on Linux; never raises (a container may forbid
    it, and the thread works the same at its old niceness).
    """
    steps = THREAD_NICE if steps is None else steps
    if steps <= 0 or not sys.platform.startswith("linux"):
        return None
    if refresher.green_hub() is not None:
        return None  # a green thread: this would lower the whole process
    tid = threading.get_native_id()
    try:
        return _raise_to(tid, os.getpriority(os.PRIO_PROCESS, tid) + steps)
    except OSError as exc:
        LOG.debug("Could not lower the priority of thread %(name)s: "
                  "%(error)s", {"name": threading.current_thread().name,
                                "error": exc})
        return None


def lower_below_parent(steps: int) -> None:
    """Run this process ``steps`` niceness steps above its parent process
    (the reader, ``READER_NICE``).

    Above the parent process's own niceness (its main thread's), not the
    niceness this process started with: a reader started again from the
    parent's event thread, which runs at ``THREAD_NICE`` above its
    process, starts at that thread's niceness, and adding the steps to it
    would give the reader both. Never raises: a niceness is a preference,
    and a reader that keeps its own reads the same.
    """
    try:
        _raise_to(0, os.getpriority(os.PRIO_PROCESS, os.getppid()) + steps)
    except OSError:
        pass


def _raise_to(tid: int, nice: int) -> int:
    """Set thread ``tid``'s niceness (0: the caller's) to ``nice``, at
    most 19, unless it is already that high or higher (going back down
    takes a privilege); return it."""
    nice, now = min(19, nice), os.getpriority(os.PRIO_PROCESS, tid)
    if nice <= now:
        return now
    os.setpriority(os.PRIO_PROCESS, tid, nice)
    return nice
