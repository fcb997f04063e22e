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

"""One server's move as ``drain host migrate``'s runner tracks it, and its events.

The runner (:mod:`nova_drain_filters.migration.runner`) fills these in;
the CLI renders the events and the outcomes.
"""
import dataclasses
import enum
from collections.abc import Callable

from nova_drain_filters.clients import server_moves
from nova_drain_filters.migration import plan

MAX_DETAIL = 200


class Event(str, enum.Enum):
    """What happened to a move (the CLI prints one line each)."""

    STARTED = "started"
    RESUMED = "resumed"
    RUNNING = "running"
    CONFIRMING = "confirming"
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTING = "aborting"
    ABORTED = "aborted"


@dataclasses.dataclass(frozen=True)
class Options:
    concurrency: int
    timeout: float
    server_timeout: float
    retries: int


@dataclasses.dataclass
class Move:
    """One server being moved, as far as this run knows."""

    step: plan.Step
    #: Migration ids of the server seen before this attempt's POST.
    known: set[int] = dataclasses.field(default_factory=set)
    record: server_moves.MigrationRecord | None = None
    attempts: int = 0
    started_here: bool = False
    posted_at: float = 0.0
    #: When this run last saw it change (posted, or a new status).
    changed_at: float = 0.0
    running_since: float | None = None
    aborted: bool = False
    confirm_sent: bool = False
    not_before: float = 0.0
    outcome: plan.Outcome | None = None
    destination: str = ""
    detail: str = ""


Listener = Callable[[Event, Move, str], None]


def tail(text: str, limit: int = MAX_DETAIL) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else "..." + line[-limit:]
