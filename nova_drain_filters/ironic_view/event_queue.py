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

"""Events waiting for the view's apply thread, and how many are applied.

Whoever reads the events (the reader process's batches, our consumer,
oslo.messaging's listener) puts each node's latest event here; the apply
thread takes them in batches. Events for a node that arrive while it
waits replace each other, so a storm applies each node once. One object
a node waits (``notifications.Pending``), so that a burst adds as little
as it can to the scheduler's garbage collections (``wire.py`` says why).

Counts say what a batch's sender may ack: ``put`` returns how many events
are queued once its batch is in, and ``applied(target)`` turns true once
the apply thread has applied (or replaced by a later event it applied)
that many. No I/O here; nothing blocks but ``take``.
"""
import itertools
import threading
import time
from collections.abc import Callable

from nova_drain_filters.ironic_view import notifications

#: The most nodes applied as one batch (one lock hold, at most one copy).
BATCH_MAX = 5000

#: Each node's latest event, oldest first.
Batch = dict[str, notifications.Pending]


class EventQueue:
    """Each node's latest event not yet applied, and the counts to ack by."""

    def __init__(self) -> None:
        self._pending: Batch = {}
        self._wake = threading.Condition()
        #: Events queued so far, and how many of them are applied (or
        #: replaced by a later one for the same node that is applied).
        self._queued = self._done = 0

    def reset(self) -> None:
        """Empty, with a new lock: after a fork, another thread may have
        held the parent's."""
        self._pending = {}
        self._wake = threading.Condition()
        self._queued = self._done = 0

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def waiting(self) -> Batch:
        """The nodes waiting, oldest first (tests and logs; do not change)."""
        return self._pending

    def put(self, latest: Batch, events: int) -> int:
        """Queue each node's latest of ``events`` events, taking
        ``latest`` over; how many events are queued now."""
        with self._wake:
            pending = self._pending
            if not pending:
                self._pending = latest
            else:
                for uuid, value in latest.items():
                    # A later event replaces an earlier one for the node.
                    pending.pop(uuid, None)
                    pending[uuid] = value
            self._queued += events
            if latest:
                self._wake.notify()
            return self._queued

    def applied(self, target: int) -> Callable[[], bool]:
        """A check that never blocks: are ``target`` events applied yet."""
        def check() -> bool:
            return self._done >= target
        return check

    def take(self, stop: threading.Event, hold: Callable[[], float]
             ) -> tuple[Batch, int] | None:
        """The next batch and the count it covers once applied; None once
        ``stop`` is set. Waits for an event, then for ``hold()`` seconds
        more, so that events arriving meanwhile join a batch that would
        copy the snapshot (``snapshot.Patches.hold``)."""
        with self._wake:
            while not self._pending and not stop.is_set():
                self._wake.wait(1.0)
            if stop.is_set():
                return None
            # Each new event notifies, so wait out the whole hold.
            until = time.monotonic() + hold()
            while not stop.is_set() and time.monotonic() < until:
                self._wake.wait(until - time.monotonic())
            pending = self._pending
            if len(pending) <= BATCH_MAX:
                self._pending = {}
                return pending, self._queued
            batch = {uuid: pending.pop(uuid)
                     for uuid in list(itertools.islice(pending, BATCH_MAX))}
            return batch, self._done

    def done(self, covered: int) -> None:
        """Mark a taken batch applied (``take``'s count)."""
        with self._wake:
            self._done = max(self._done, covered)
            self._wake.notify_all()

    def wake_all(self) -> None:
        """Wake a ``take`` that waits, to see its stop."""
        with self._wake:
            self._wake.notify_all()
