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

"""A process's or thread's ``stat`` file (proc(5)), read once."""

#: Where proc(5)'s fields land in ``fields``: its field N is ``[N - 3]``.
STATE, PPID, PGRP = 0, 1, 2
UTIME, STIME = 11, 12
NICE = 16


def fields(path: str) -> list[str] | None:
    """The fields after the command name, which may hold spaces and
    parentheses (so split after its last ")"); None if it is gone."""
    try:
        with open(path) as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
