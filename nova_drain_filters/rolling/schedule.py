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


"""The decisions of a rolling run: plain facts in, verdicts out.

A host's progress comes from two places. Nova says whether its service is
disabled and by whom (``drain.ours``), and placement whether it is
marked; the journal (``journal.Progress``) says what only this run knows:
whether the run itself drained it, whether COMMAND ran and how it ended,
and whether it was put back. Neither alone can tell "COMMAND succeeded"
from "never started", and nothing else has to be trusted.
"""
import dataclasses
import enum
import shlex
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import drain

#: What stands for the host in COMMAND.
PLACEHOLDER = "{host}"


class Next(str, enum.Enum):
    """What a host needs next."""

    #: Drain it (mark, disable), move its servers, run COMMAND.
    DRAIN = "drain"
    #: Its COMMAND runs still (started by an earlier run): wait for it.
    WAIT_COMMAND = "wait for command"
    #: Run COMMAND (again: the last one failed, or was cut off).
    COMMAND = "run command"
    #: COMMAND succeeded: wait for the host, then put it back.
    WAIT_UP = "wait until up"
    #: Nothing: this run finished it.
    NOTHING = "nothing"
    #: Never touched: someone else disabled it, for a reason of theirs.
    FOREIGN = "skip"


class Outcome(str, enum.Enum):
    """How a host's part of a run ended."""

    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    REFUSED = "refused"
    NOT_REACHED = "not reached"
    PLANNED = "planned"


@dataclasses.dataclass(frozen=True)
class Progress:
    """What the journal holds about one host."""

    #: The run marked or disabled it (so it puts it back); None: not yet.
    changed: bool | None = None
    #: The detached COMMAND last started: its process and files.
    started: dict[str, object] | None = None
    #: Exit status of the last COMMAND (None: none ended yet).
    rc: int | None = None
    #: Came back after a successful COMMAND.
    up: bool = False
    #: Put back (or left as it was): this host is finished.
    finished: bool = False


def validate(command: str, batch: int, hook_timeout: float,
             wait_up: float) -> str | None:
    """What is wrong with the options, in one line; None if nothing."""
    if PLACEHOLDER not in command:
        return (f"--run {command!r}: must contain {PLACEHOLDER}, which "
                "stands for each host")
    if batch < 1:
        return f"--batch {batch}: must be a whole number of 1 or more"
    if hook_timeout <= 0:
        return f"--hook-timeout {hook_timeout:g}: must be more than 0 seconds"
    if wait_up <= 0:
        return f"--wait-up {wait_up:g}: must be more than 0 seconds"
    return None


def batches(hosts: Sequence[str], size: int) -> list[list[str]]:
    """The hosts in a stable order (sorted), ``size`` at a time."""
    ordered = sorted(set(hosts))
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def foreign(service: decisions.ServiceFacts) -> bool:
    """Disabled by someone else, for a reason of theirs (not a drain)."""
    return service.disabled and not drain.ours(service)


def next_step(progress: Progress, facts: drain.HostFacts) -> Next:
    """What ``facts.host`` needs next, from its journal and from Nova.

    A host the journal does not know, disabled by someone else, is never
    touched. One this run drained stays this run's whatever its service
    says now.
    """
    if progress.finished:
        return Next.NOTHING
    if progress.rc == 0:
        return Next.WAIT_UP
    if progress.started is not None and progress.rc is None:
        return Next.WAIT_COMMAND
    if progress.rc is not None or progress.changed is not None:
        # COMMAND failed, or never ran after the drain: the host is ours.
        return Next.COMMAND
    if facts.service is not None and foreign(facts.service):
        return Next.FOREIGN
    return Next.DRAIN


def command_for(command: str, host: str) -> str:
    """COMMAND with the host in place of each ``{host}``.

    The name is quoted for the shell; a host name is a DNS name, but the
    operator's own inventory may hold anything.
    """
    return command.replace(PLACEHOLDER, shlex.quote(host))
