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

"""Event mode: Ironic's versioned notifications keep the Ironic view current.

Each scheduler process (and each forked worker) listens on a pool of its
own, so every process hears every event. A worker thread applies each
event to the view: a node event whose payload carries every field the
view reads (Ironic's ``NodePayload`` 1.14 and later) is applied as it is,
with no request, so Ironic's load does not grow with the number of
scheduler processes; any other event (an older payload, an allocation
event) makes it re-read the node with one ``GET /v1/nodes/{uuid}``. A
``delete.end`` takes the node out. Events for the same node that arrive
while it waits are applied once, the last one; the events waiting
together are applied as one batch, so that an event storm costs O(1) per
event (``snapshot.py`` says how).
Ironic may announce a transition only by its ``.start`` (a ``manage``
gives ``provision_set.start`` in ``verifying`` and no ``.end``); the node
then stays in that unusable state, which excludes it, until the next
listing (``baremetal_refresh_interval``) reads where it went.

Pool names are stable, one queue per host and slot (``pools.py``). On
RabbitMQ our own consumer reads the pool's queue in batches and acks each
batch once it is applied (``consumer.py``); any other transport gets
oslo.messaging's batch listener on the same queue (``listening.py``).

Health: while the listener's connection is down (or before it ever came
up), the view is listed every ``baremetal_notifications_fallback_interval``
seconds; one warning says so and one message says when events flow again,
followed by one listing to catch up on what was missed. While it is up and
caught up, each look stamps ``healthy_at``, which keeps the view's snapshot
trusted in a cloud that sends no events.

Nothing here raises into the scheduler: a bad event, a failed read or a
broker outage is logged and dropped.
"""
import os
import threading
import time
from collections.abc import Callable
from typing import Any
from typing import Protocol
from typing import cast

from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import decisions
from nova_drain_filters.clients import ironic
from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import event_queue
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import pools
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import reader
from nova_drain_filters.ironic_view import refresher
from nova_drain_filters.ironic_view import snapshot

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How long a first connection may take before we call the broker down.
CONNECT_GRACE = 5.0
#: How often the watcher looks at the connection.
WATCH_INTERVAL = 0.5


class View(Protocol):
    """What the listener needs of the view it keeps current (``IronicView``)."""

    def trusted(self) -> snapshot.Snapshot | None: ...

    def refresh(self) -> bool: ...

    def update_node(self, facts: decisions.IronicNodeFacts,
                    read_at: float) -> bool: ...

    def mark_deleted(self, node_uuid: str, at: float) -> bool: ...

    #: The current snapshot and its batches (``IronicView.patches``).
    patches: snapshot.Patches


class EventListener:
    """One process's listener, re-reader and fallback poller for a view."""

    def __init__(
        self,
        view: View,
        client_factory: Callable[[], ironic.IronicClient],
        clock: Callable[[], float] = time.monotonic,
        transport_factory: Callable[[str | None], Any] | None = None,
    ) -> None:
        self.view = view
        self._client_factory = client_factory
        self._client: ironic.IronicClient | None = None
        self._clock = clock
        self._transport_factory = (transport_factory
                                   or listening.notification_transport)
        self._pid: int | None = None
        #: The eventlet hub the threads run on (``green_hub``).
        self._hub: object | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._slot = pools.Slot(pools.lock_dir(), pools.host_name())
        self._server: Any = None
        self._transport: Any = None
        #: What waits for the apply thread.
        self.queue = event_queue.EventQueue()
        self.pool: str | None = None
        #: up / down as last logged; None before the first verdict.
        self.broker_up: bool | None = None
        self.received = self.applied = self.dropped = 0
        #: Events applied by re-reading the node (no full payload).
        self.reread = 0
        self.fallback_listings = 0
        self._error_logged = False
        #: Set when the broker came (back): a listing must start after it.
        self._catch_up_since: float | None = None
        #: The server's reader as last seen (``listening.generation``).
        self._generation = 0
        #: When the connection was last seen up and caught up (``settled``):
        #: until then events reached the view, so the view counts its
        #: snapshot's age from here (``IronicView.trusted``).
        self.healthy_at: float | None = None

    # life cycle ------------------------------------------------------------

    def start(self) -> None:
        """Start in this process; after a fork, start afresh in the child.

        The parent's listener threads did not survive the fork and its
        connection is the parent's: both are left alone, not closed.
        """
        pid = os.getpid()
        hub = refresher.green_hub()
        if self._pid == pid and self._hub is hub and any(
                t.is_alive() for t in self._threads):
            return
        # A worker oslo.service's eventlet backend forked gets a new hub
        # after the fork (refresher.green_hub): what ran on the old
        # one is as lost as a parent's threads.
        if self._pid is not None and (self._pid != pid or self._hub is not hub):
            # A reader process (reader.py) is the parent's: this copy of
            # its socket must not keep it alive.
            forget = getattr(self._server, "forget_after_fork", None)
            if forget is not None:
                forget()
            self._server = self._transport = self._client = None
            self._slot.forget()
            self.broker_up = None
            self.healthy_at = None
            # A lock another thread held at the fork stays held in the child.
            self.queue.reset()
            self._stop = threading.Event()
        self._pid = pid
        self._hub = hub
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._watch, name="drain-ironic-events",
                             daemon=True),
            threading.Thread(target=self._apply_loop,
                             name="drain-ironic-events-apply", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop listening and release the slot (tests and shutdown)."""
        self._stop.set()
        self.queue.wake_all()
        server, self._server = self._server, None
        if server is not None:
            try:
                server.stop()
                server.wait()
            except Exception:  # shutting down; nothing to decide
                LOG.debug("Stopping the Ironic event listener failed",
                          exc_info=True)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.cleanup()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._slot.forget()

    def park(self) -> None:
        """Stop, in the background: called from a fork hook of a parent
        that forked its workers (``IronicView._park_events``), which must
        not wait there. A request would start it again."""
        threading.Thread(target=self.stop, name="drain-ironic-events-park",
                         daemon=True).start()

    @property
    def settled(self) -> bool:
        """Listening, and a listing has started since the broker came."""
        return self.broker_up is True and self._catch_up_since is None

    # listening -------------------------------------------------------------

    def _connect(self) -> None:
        """Create and start the listener; blocks while the broker is down."""
        try:
            group = CONF.drain_filters
            self._slot.acquire()
            self.pool = pools.pool_name(self._slot.host, self._slot.number)
            if self._slot.number is None:
                LOG.warning("No free listener slot in %(dir)s; listening as "
                            "%(pool)s, a queue only a broker policy removes",
                            {"dir": self._slot.directory, "pool": self.pool})
            own = self.pool
            self._transport = self._transport_factory(
                group.baremetal_notifications_url)
            election = self._election()
            shared = pools.pool_name(self._slot.host, host_reader.POOL_SLOT)
            # The host's queues of the other mode, which nobody reads now
            # (an upgrade that turned the host's reader on, or an operator
            # who turned it off): the reader deletes those left unused.
            unread = tuple(pools.slot_pools(
                self._slot.directory, self._slot.host)) if election else (
                    shared,)
            server = listening.consume(
                self._transport, own, self.on_event, self.on_batch,
                self.on_parsed, election=election, shared_pool=shared,
                unread=unread, alone_pool=pools.pool_name(
                    self._slot.host, None), slot_lock=self._slot.fileno)
            self.pool = getattr(server, "pool", own)
            try:
                server.start()  # returns once connected
            except Exception as exc:
                if not isinstance(server, reader.ReaderProcess):
                    raise
                # No reader (no interpreter to run it, a broken install):
                # read here, as before readers, rather than not at all.
                LOG.warning("Cannot start the Ironic event reader process "
                            "(%s); reading Ironic's notifications in this "
                            "process instead", exc)
                if election is not None:
                    election.forget()
                self.pool = own  # never the host's queue: it has one reader
                server = listening.consume(
                    self._transport, own, self.on_event,
                    self.on_batch, self.on_parsed, in_process=True)
                server.start()
            if self._stop.is_set():  # stopped while we waited for it
                server.stop()
                server.wait()
                return
            self._server = server
        except Exception as exc:  # a bad URL, a driver that will not load
            LOG.error("Cannot listen to Ironic's notifications (%(error)s); "
                      "listing Ironic every %(n)s s instead",
                      {"error": exc,
                       "n": CONF.drain_filters.
                       baremetal_notifications_fallback_interval})
            self._server = None

    def _election(self) -> host_reader.Election | None:
        """The host's reader election, when the processes share one."""
        if not CONF.drain_filters.baremetal_notifications_host_reader:
            return None
        election = host_reader.Election(self._slot.directory,
                                        self._slot.host)
        if not election.usable:
            LOG.warning("The host's Ironic event reader cannot listen at "
                        "%(path)s (a Unix socket's path has at most "
                        "%(max)d bytes): each scheduler process reads on "
                        "its own; set a shorter [oslo_concurrency] "
                        "lock_path", {"path": election.socket_path,
                                      "max": host_reader.MAX_PATH})
            return None
        return election

    def connected(self) -> bool:
        """True while the listener's own broker connection is up."""
        return listening.is_connected(self._server)

    def _watch(self) -> None:
        """Connect, then judge the connection and poll while it is down."""
        started = self._clock()
        connector = threading.Thread(target=self._connect, daemon=True,
                                     name="drain-ironic-events-connect")
        connector.start()
        last_listing = started
        fallback = CONF.drain_filters.baremetal_notifications_fallback_interval
        while not self._stop.wait(WATCH_INTERVAL):
            try:
                last_listing = self._watch_once(started, last_listing, fallback)
            except Exception:  # the watcher must outlive any surprise
                LOG.exception("Ironic event watcher failed; going on")

    def _watch_once(self, started: float, last_listing: float,
                    fallback: int) -> float:
        """One look at the connection; returns when it last listed."""
        now = self._clock()
        up = self.connected()
        generation = listening.generation(self._server)
        if up and self.broker_up is True and generation != self._generation:
            # Another reader since the last look, maybe too quickly for
            # it to look down: what it missed is listed, as after a gap.
            LOG.info("The Ironic event reader was replaced; listing Ironic "
                     "once to catch up")
            self._catch_up_since = now
        self._generation = generation
        if up and self.broker_up is not True:
            LOG.info("Listening to Ironic's notifications as pool "
                     "%(pool)s%(back)s", {"pool": getattr(
                         self._server, "pool", self.pool), "back": (
                         "; events flow again" if self.broker_up is False
                         else "")})
            self._catch_up_since = now
            self.broker_up = True
        elif not up and (self.broker_up is True or (
                self.broker_up is None
                and now - started >= CONNECT_GRACE)):
            LOG.warning("Ironic's notifications cannot be received (the "
                        "broker is unreachable); listing Ironic every "
                        "%(n)s s until it is back", {"n": fallback})
            self.broker_up = False
            last_listing = min(last_listing, now - fallback)
        if self._catch_up_since is not None:
            # Events sent before the queue was bound were missed.
            snap = self.view.trusted()
            if (snap is not None
                    and snap.started_at >= self._catch_up_since
                    or self.view.refresh()):
                self._catch_up_since = None
        if self.broker_up is False and now - last_listing >= fallback:
            last_listing = now
            self.fallback_listings += 1
            self.view.refresh()
        if self.settled and self.connected():
            self.healthy_at = now
        return last_listing

    # events ----------------------------------------------------------------

    def on_event(self, event_type: Any, payload: Any) -> None:
        """Queue the node an event names for a re-read; never raises."""
        event = self._parse(event_type, payload)
        if event is not None:
            self.queue.put({event.node_uuid: notifications.pending(event)}, 1)

    def on_batch(self, messages: list[consumer.Message]
                 ) -> Callable[[], bool]:
        """Queue a consumer's batch; return whether it is applied yet.

        Returns at once, with a check that never blocks: the consumer
        reads on while the batch waits for its apply, and acks it once
        the check says it is applied, so a crash before the apply leaves
        it for the broker to send again. The batch is queued under one
        hold of the lock and with one wakeup of the apply thread, not one
        per event: in a scheduler each wakeup is a fight for the GIL with
        the request thread. Never raises.
        """
        latest: dict[str, notifications.Pending] = {}
        count = 0
        for event_type, payload in messages:
            event = self._parse(event_type, payload)
            if event is not None:  # a node's later event replaces it
                latest[event.node_uuid] = notifications.pending(event)
                count += 1
        return self.queue.applied(self.queue.put(latest, count))

    def on_parsed(self, latest: dict[str, notifications.Pending],
                  events: int, received: int, dropped: int
                  ) -> Callable[[], bool]:
        """Queue a reader's batch, parsed there (``reader.py``): each
        node's latest of ``events`` node events; return whether it is
        applied yet, as ``on_batch``. Takes ``latest`` over. Never
        raises."""
        self.received += received
        self.dropped += dropped
        return self.queue.applied(self.queue.put(latest, events))

    def _parse(self, event_type: Any, payload: Any
               ) -> notifications.NodeEvent | None:
        """The node event a notification carries; None if it carries
        none or cannot be used (counted and logged as dropped)."""
        try:
            event = notifications.parse_event(event_type, payload)
        except notifications.MalformedEvent as exc:
            self.dropped += 1
            LOG.warning("Dropped a malformed Ironic notification: %s", exc)
            return None
        except Exception:
            self.dropped += 1
            LOG.exception("Dropped an Ironic notification")
            return None
        self.received += 1
        return event

    def _apply_loop(self) -> None:
        # Below the requests: every worker of the host applies every
        # event, and the one answering a request should not wait for them.
        priority.lower_this_thread()
        while True:
            taken = self.queue.take(self._stop, self.view.patches.hold)
            if taken is None:
                return
            batch, covered = taken
            try:
                self.apply_batch(batch)
            except Exception:  # never let one batch stop the loop
                self.dropped += len(batch)
                LOG.exception("Could not apply %d Ironic events", len(batch))
            self.queue.done(covered)

    def apply_batch(self, batch: event_queue.Batch) -> None:
        """Apply each node's latest event: payloads as one batch, then
        re-reads, so the order between the two kinds does not matter."""
        read_at = self._clock()
        rereads = [value for value in batch.values()
                   if isinstance(value, notifications.NodeEvent)]
        changes = cast(snapshot.PackedChanges, batch)
        if rereads:
            changes = {uuid: value for uuid, value in changes.items()
                       if not isinstance(value, notifications.NodeEvent)}
        if changes:
            self.view.patches.apply_packed(changes, read_at)
            self.applied += len(changes)
        for event in rereads:
            try:
                self.apply(event)
            except Exception:  # one bad re-read must not stop the others
                self.dropped += 1
                LOG.exception("Could not apply %s", event)

    def apply(self, event: notifications.NodeEvent) -> None:
        """Update the view from the event's payload, or re-read the node."""
        read_at = self._clock()
        if event.deleted:
            self.view.mark_deleted(event.node_uuid, read_at)
            self.applied += 1
            return
        if event.facts is not None:
            self.view.update_node(event.facts, read_at)
            self.applied += 1
            return
        self.reread += 1
        try:
            if self._client is None:
                self._client = self._client_factory()
            facts = self._client.get_node(event.node_uuid)
        except Exception as exc:
            self.dropped += 1
            if not self._error_logged:
                self._error_logged = True
                LOG.warning("Cannot re-read Ironic node %(node)s after "
                            "%(event)s (%(error)s); the next listing will "
                            "catch up. Logged once until a read succeeds.",
                            {"node": event.node_uuid,
                             "event": event.event_type, "error": exc})
            return
        self._error_logged = False
        snap = self.view.trusted()
        if facts is None:
            if snap is not None and event.node_uuid in snap.nodes:
                self.view.mark_deleted(event.node_uuid, read_at)
                self.applied += 1
                return
            self.dropped += 1
            LOG.info("Dropped %(event)s for node %(node)s, which Ironic "
                     "does not have", {"event": event.event_type,
                                       "node": event.node_uuid})
            return
        self.view.update_node(facts, read_at)
        self.applied += 1
        LOG.debug("Ironic node %(node)s re-read after %(event)s",
                  {"node": event.node_uuid, "event": event.event_type})
