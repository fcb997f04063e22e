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


"""The batch endpoint of the agent's notification listener.

oslo.messaging calls ``info``, ``warn`` or ``error`` with a list of
messages (``oslo_messaging/notify/dispatcher.py``
``BatchNotificationDispatcher.dispatch``: grouped by priority, each a dict
of ``ctxt``, ``publisher_id``, ``event_type``, ``payload``, ``metadata``).
The server acknowledges a batch once the callback returns, and also when
it raises (``notify/listener.py`` ``BatchNotificationServer
._process_incoming``: a requeue only with ``allow_requeue``, which the
agent leaves off), so the endpoint never raises: what it could not write,
the next reconcile writes. A batch not acknowledged (the agent killed)
goes back to the queue, to another agent of the pool.
"""
import logging
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import stamps
from nova_drain_filters.agent import metrics as metrics_mod
from nova_drain_filters.agent import writer as writer_mod
from nova_drain_filters.ironic_view import notifications

LOG = logging.getLogger(__name__)


def coalesce(messages: Sequence[Mapping[str, Any]]
             ) -> tuple[dict[str, notifications.NodeEvent],
                        dict[str, float]]:
    """Each node's last event in a batch, and its stamp; a pure function.

    A node changing five times in a batch is read, judged and written
    once, as it is when read: its last state. Events about no node
    (ports, ``.start`` of an announced action) and malformed ones are
    left out.
    """
    last: dict[str, notifications.NodeEvent] = {}
    stamp: dict[str, float] = {}
    for message in messages:
        try:
            event = notifications.parse_event(message.get("event_type"),
                                              message.get("payload"))
        except notifications.MalformedEvent as exc:
            LOG.warning("Ignoring a malformed notification: %(error)s",
                        {"error": exc})
            continue
        if event is None:
            continue
        last.pop(event.node_uuid, None)  # keep the order of last events
        last[event.node_uuid] = event
        when = stamps.epoch((message.get("metadata") or {}).get("timestamp"))
        if when is not None:
            stamp[event.node_uuid] = when
    return last, stamp


class NodeEventsEndpoint:
    """Hands each batch's nodes, once each, to the writer."""

    def __init__(self, writer: writer_mod.Writer,
                 metrics: metrics_mod.AgentMetrics) -> None:
        self.writer = writer
        self.metrics = metrics

    def info(self, messages: list[dict[str, Any]]) -> None:
        self.handle(messages)

    def warn(self, messages: list[dict[str, Any]]) -> None:
        self.handle(messages)

    def error(self, messages: list[dict[str, Any]]) -> None:
        self.handle(messages)

    def handle(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """One batch: coalesce, then write each node's verdict once."""
        self.metrics.events_received.inc(len(messages))
        try:
            last, when = coalesce(messages)
            # A node deleted from Ironic: its record is the reconcile's.
            nodes = [uuid for uuid, event in last.items()
                     if not event.deleted]
            if nodes:
                self.writer.apply_events(nodes, when)
        except Exception:
            # Acknowledged whatever happens (see the module): the next
            # reconcile repairs what this batch did not write.
            LOG.exception("A batch of %(count)d event(s) failed; the next "
                          "reconcile repairs it", {"count": len(messages)})
