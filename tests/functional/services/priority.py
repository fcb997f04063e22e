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

"""The lowest CPU priority, for the benchmarks' stand-ins for other
machines (the broker, Ironic's conductors).

A niceness alone does not give it. With the kernel's autogroups
(``/proc/sys/kernel/sched_autogroup_enabled``, on here and on most
distributions' kernels), every session is a group of its own, and the
scheduler shares the CPUs between groups first, by each group's own
niceness (``/proc/PID/autogroup``); a process's niceness counts only
against the processes of its group. A process started in a new session
(``start_new_session=True``) at nice 19 still takes a whole group's share
from a benchmark's scheduler: on one CPU beside a nice 0 loop in another
session, here, it had 2.14 s of 3 against 0.75 (sched(7), "The autogroup
feature"). So the group's niceness is set too.

The reader of the drain filters is not in a session of its own: its
niceness (``nova_drain_filters.ironic_view.priority``) counts against
the scheduler's, as do its event threads'.
"""
from __future__ import annotations

import os

LOWEST = 19


def lowest(pid: int = 0) -> str:
    """Give process group ``pid`` (0: this process's) nice 19, and its
    autogroup too; what was done, for the benchmark's header."""
    os.setpriority(os.PRIO_PGRP, pid, LOWEST)
    path = f"/proc/{pid or 'self'}/autogroup"
    try:
        with open(path, "w") as autogroup:
            autogroup.write(str(LOWEST))
    except FileNotFoundError:
        return "nice 19 (the kernel has no autogroups)"
    except OSError as e:
        return f"nice 19, but not its autogroup ({path}: {e.strerror})"
    return "nice 19, in an autogroup at nice 19"
