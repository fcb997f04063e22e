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

"""Our own consumer of a listener pool's queue, on oslo.messaging's connection.

oslo.messaging's notification listener costs most of an event's CPU in
its transport, per message: one ``Connection.consume`` and ``ensure``
each, a kombu message object, two JSON decodes and one ``basic.ack``
(doc/source/testing.rst, "One listener's CPU per event"). This consumer
keeps what operators configure in oslo.messaging: the transport URL, the
``[oslo_messaging_rabbit]`` options (TLS, heartbeats, quorum queues, HA,
prefetch) and the reconnect with its backoff, by taking the rabbit
driver's own ``Connection``. It declares the same queue with the same
arguments and bindings as the listener would for the pool, so the two can
share it and an upgrade reuses it. What it changes is the loop: it drains
every message waiting (up to ``BATCH_MAX``, and for at most
``BATCH_TIMEOUT`` after the first) per wakeup, decodes each with
one JSON decode of the envelope and one of its message, and hands the
batch over. It goes on reading while batches are applied, and acks every
batch applied so far with one ``basic.ack`` (``multiple``) for the last
delivery tag among them. A crash before a batch is applied leaves it
unacked, and the broker delivers it again.

Reading does not wait for the apply: the listener holds a batch back
while a request reads the snapshot (``snapshot.Patches.hold``), and a
reader that stopped meanwhile would turn each hold into a stall, a few
events per quarter second in a busy scheduler. At most ``MAX_UNACKED``
messages are read ahead of the apply.

It depends on impl_rabbit's ``Connection`` and ``Consumer``
(oslo_messaging/_drivers/impl_rabbit.py), which are not public:
``supports`` says whether a transport is that driver, and ``listening``
falls back to oslo.messaging's listener when it is not.
"""
import collections
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import kombu.compression
from amqp import exceptions as amqp_exceptions
from oslo_log import log as logging
from oslo_messaging._drivers import common as rpc_common
from oslo_messaging._drivers import impl_rabbit

from nova_drain_filters import stamps
from nova_drain_filters.ironic_view import priority

LOG = logging.getLogger(__name__)

#: The most messages one wakeup drains before it hands them over.
BATCH_MAX = 1000
#: How long a batch may gather after its first message (as ``listening``'s
#: batch_timeout: oslo_messaging/_drivers/base.py ``batch_poll_helper``
#: counts it from the batch's start, not from the last message).
BATCH_TIMEOUT = 0.02
#: The most messages read but not yet applied; past it, reading waits.
MAX_UNACKED = 5 * BATCH_MAX
#: How long a read waits while batches are being applied, so that they
#: are acked soon after.
ACK_POLL = 0.05
#: Bytes asked of the socket per read, so that one read brings many
#: messages (``read_ahead``).
READ_AHEAD = 256 * 1024
#: Bytes handed to py-amqp per call at most, from what a read brought
#: (``read_ahead``): its buffer is copied whole at each of a message's
#: nine reads, so it must stay small.
HAND_OVER = 8 * 1024
#: A batch whose oldest message was sent longer ago than this is late:
#: the filters decide on node states that old (``LagWatch``).
LAG_WARNING = 30.0
#: At most one warning about late events in this many seconds.
LAG_WARNING_EVERY = 60.0
#: The priorities ``listening.Endpoint`` answers, so the bindings that
#: oslo.messaging's listener makes for it (notify/dispatcher.py
#: ``supported_priorities``, amqpdriver.py ``listen_for_notifications``).
PRIORITIES = ("info", "warn", "error", "critical")

#: One message as the listener's endpoint sees it: event type, payload.
Message = tuple[Any, Any]
#: Queues one batch for its apply and returns without waiting; what it
#: returns says (without blocking) whether that batch is applied yet.
OnBatch = Callable[[list[Message]], Callable[[], bool]]

def read_ahead(amqp_transport: Any) -> None:
    """Make py-amqp's transport read the socket in large pieces.

    py-amqp reads exactly what a frame needs (amqp/transport.py ``_read``:
    ``recv(n - len(rbuf))``): the header, the payload and the end of each
    of a message's three frames, nine reads a message. Each read lets go
    of the GIL, and in a scheduler whose request thread holds it, each
    costs the listener up to a switch interval (5 ms) to get it back:
    a few dozen messages a second. So the socket is read ``READ_AHEAD``
    bytes at a time.

    What a read brings is kept here and handed to py-amqp at most
    ``HAND_OVER`` bytes a call. ``_read`` keeps what it gets beyond what
    it asked for in a bytes buffer and slices that buffer at each read
    (``rbuf[n:]``), a copy of all it holds, so handed a whole large read
    it copies it again at each of a message's reads; handed small pieces
    it copies little (``tools/bench.sh read_ahead``, figures in
    ``doc/source/testing.rst``). A bytearray gives its head away without
    a copy.
    Idempotent; a transport without ``_quick_recv`` (another py-amqp) is
    left alone.
    """
    recv = getattr(amqp_transport, "_quick_recv", None)
    if recv is None or getattr(recv, "read_ahead", False):
        return
    pending = bytearray()

    def recv_ahead(n: int) -> bytes:
        if not pending:
            # Raises as the socket's recv does (a timeout, a lost
            # connection) with nothing kept; b"" is the end of the stream.
            chunk = recv(max(n, READ_AHEAD))
            if not chunk:
                return chunk
            pending.extend(chunk)
        size = max(n, HAND_OVER)
        with memoryview(pending) as view:
            piece = bytes(view[:size])
        del pending[:size]
        return piece
    recv_ahead.read_ahead = True  # type: ignore[attr-defined]
    amqp_transport._quick_recv = recv_ahead


def supports(transport: Any) -> bool:
    """True when ``transport`` is oslo.messaging's rabbit driver."""
    return isinstance(getattr(transport, "_driver", None),
                      impl_rabbit.RabbitDriver)


def delete_unused(transport: Any, names: list[str]
                  ) -> list[tuple[str, int]]:
    """Delete each queue of ``names`` that has no consumer; (name,
    messages it held) of each deleted. A queue someone reads, or one that
    does not exist, is left. Raises what the broker connection raises.

    The queues are this host's of the other reading mode
    (``baremetal_notifications_host_reader`` turned on or off): still
    bound to Ironic's exchange, they would fill for good. Nothing is lost
    by deleting one: a process that reads a queue again declares it, and
    lists Ironic after every connection (``events.py``).
    """
    # amqpdriver.py AMQPDriverBase._get_connection, as start() takes its
    # own; a channel per queue, as a refused delete (406, the queue has a
    # consumer) closes the channel it came on.
    driver = transport._driver
    context = driver._get_connection(rpc_common.PURPOSE_LISTEN)
    deleted = []
    try:
        broker = context.connection.connection  # the kombu connection
        for name in names:
            channel = broker.channel()
            try:
                # A passive declare: whether it exists, and who reads it.
                _, messages, consumers = channel.queue_declare(
                    queue=name, passive=True)
                if consumers:
                    continue
                channel.queue_delete(queue=name, if_unused=True)
            except (amqp_exceptions.NotFound,  # no such queue
                    amqp_exceptions.PreconditionFailed):  # read meanwhile
                continue
            finally:
                try:
                    channel.close()
                except Exception:  # closed by the broker's refusal
                    pass
            deleted.append((name, messages))
    finally:
        context.close()
    return deleted


def consumers(transport: Any, name: str) -> int:
    """How many consumers the broker counts on queue ``name`` (0 if it
    does not exist): a passive declare, which changes nothing. Raises
    what the broker connection raises."""
    # As delete_unused: a connection of the driver's pool, a channel.
    driver = transport._driver
    context = driver._get_connection(rpc_common.PURPOSE_LISTEN)
    try:
        channel = context.connection.connection.channel()
        try:
            _, _, count = channel.queue_declare(queue=name, passive=True)
        except amqp_exceptions.NotFound:
            return 0
        finally:
            try:
                channel.close()
            except Exception:  # closed by the broker's 404
                pass
        return int(count)
    finally:
        context.close()


def notification(body: bytes | str) -> dict[str, Any]:
    """The notification in one message body; one decode of each layer.

    The body is oslo.messaging's envelope, ``{"oslo.version": ...,
    "oslo.message": "<json>"}``, or a bare message
    (_drivers/common.py ``deserialize_msg``). Raises ValueError.
    """
    outer = json.loads(body)
    if isinstance(outer, dict) and "oslo.message" in outer:
        outer = json.loads(outer["oslo.message"])
    if not isinstance(outer, dict):
        raise ValueError(f"a message of type {type(outer).__name__}")
    return outer


def event(message: dict[str, Any]) -> Message:
    """The event type and payload of one notification."""
    return message.get("event_type"), message.get("payload")


def decode(body: bytes | str) -> Message:
    """The event type and payload of one message body (``notification``).
    Raises ValueError."""
    return event(notification(body))


def sent_at(message: dict[str, Any]) -> float | None:
    """When a notification was sent, in seconds since the epoch.

    oslo.messaging's notifier stamps it with the sender's clock in UTC,
    without a zone (notify/notifier.py ``Notifier._notify``:
    ``str(timeutils.utcnow())``). None without a readable stamp.
    """
    return stamps.epoch(message.get("timestamp"))


class LagWatch:
    """Says in the log when Ironic's events reach us late, and when not.

    A listener that is connected keeps the view trusted however far
    behind its queue it reads: on a host whose CPUs are all busy the
    reader, at a lower priority than the scheduler, may read minutes
    late, and events wait in the broker meanwhile. The filters then
    decide on old states without saying so. This says so: a warning when
    a batch's oldest message was sent more than ``LAG_WARNING`` seconds
    before it was read (at most one every ``LAG_WARNING_EVERY`` seconds,
    with the worst lag since the last), and once more when events are on
    time again. A clock of Ironic's conductors ahead of this host's
    reads as lag; one behind hides it.
    """

    def __init__(self, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._warned = -math.inf
        self._worst = 0.0
        self.late = False
        self._blind = False

    def observe(self, sent: float | None) -> None:
        """One batch read now whose oldest message was ``sent`` (None: no
        message of the batch had a readable stamp)."""
        if sent is None:
            if not self._blind:
                # Not silently off: an operator learns once that this
                # watch cannot work with these messages.
                self._blind = True
                LOG.warning("Ironic's notifications carry no readable "
                            "timestamp; this scheduler cannot tell whether "
                            "it reads them late")
            return
        lag = self._clock() - sent
        if lag <= LAG_WARNING:
            if self.late:
                self.late = False
                LOG.info("Ironic's notifications are on time again "
                         "(read %.1f s after they were sent)", lag)
            return
        self.late = True
        self._worst = max(self._worst, lag)
        now = self._monotonic()
        if now - self._warned < LAG_WARNING_EVERY:
            return
        LOG.warning("Ironic's notifications are read %(lag).0f s after "
                    "they were sent (the worst since the last warning): "
                    "the drain filters decide on node states that old. "
                    "Are this host's CPUs all busy, or the broker slow? "
                    "Or are the clocks of Ironic's conductors ahead of "
                    "this host's?", {"lag": self._worst})
        self._warned = now
        self._worst = 0.0


class _RawConsumer(impl_rabbit.Consumer):
    """oslo's consumer, but its messages go undecoded to a buffer."""

    def __init__(self, buffer: list[Any], **kwargs: Any) -> None:
        super().__init__(callback=None, **kwargs)
        self._buffer = buffer

    def _callback(self, message: Any) -> None:
        self._buffer.append(message)


class QueueConsumer:
    """Consume one pool's queue in batches; the shape of an oslo server.

    ``on_batch`` gets the messages of one wakeup and queues them; the
    batch is acked once the check it returns says it is applied. If it
    raises, the batch stays unacked until the connection goes (it is
    ``EventListener``'s, which does not raise). ``lowered``: its thread
    yields the CPU to the process's others (``priority.py``), for a
    consumer in a scheduler process; a reader process is lowered whole.
    """

    def __init__(self, transport: Any, exchange: str, topic: str, pool: str,
                 on_batch: OnBatch, lowered: bool = False) -> None:
        self._lowered = lowered
        self._transport = transport
        self._exchange = exchange
        self._topic = topic
        self._pool = pool
        self._on_batch = on_batch
        self._buffer: list[Any] = []
        #: Batches handed over and not acked: (applied?, last message,
        #: messages), oldest first.
        self._in_flight: collections.deque[
            tuple[Callable[[], bool], Any, int]] = collections.deque()
        self._unacked = 0
        self._conn: Any = None
        self._context: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = self.acks = self.undecodable = 0
        self.lag = LagWatch()

    # the server's life cycle ------------------------------------------------

    def start(self) -> None:
        """Connect, declare the queue and start; blocks until connected."""
        driver = self._transport._driver
        # amqpdriver.py AMQPDriverBase._get_connection: a connection of
        # the driver's pool for listening, as listen_for_notifications's.
        context = driver._get_connection(rpc_common.PURPOSE_LISTEN)
        conn = context.connection
        for level in PRIORITIES:
            # impl_rabbit.py Connection.declare_topic_consumer's arguments,
            # with the queue named after the pool as the listener's.
            conn.declare_consumer(_RawConsumer(
                self._buffer,
                exchange_name=self._exchange,
                queue_name=self._pool,
                routing_key=f"{self._topic}.{level}",
                type="topic",
                durable=conn.durable,
                exchange_auto_delete=conn.amqp_auto_delete,
                queue_auto_delete=conn.amqp_auto_delete,
                rabbit_ha_queues=conn.rabbit_ha_queues,
                enable_cancel_on_failover=conn.enable_cancel_on_failover,
                rabbit_quorum_queue=conn.rabbit_quorum_queue,
                rabbit_quorum_queue_config=conn.rabbit_quorum_queue_config))
        self._context, self._conn = context, conn
        self._thread = threading.Thread(
            target=self._run, name="drain-ironic-events-consume", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: float = 10.0) -> None:
        """Let the loop end, then close the connection."""
        if self._thread is not None:
            self._thread.join(timeout)
        context, self._context, self._conn = self._context, None, None
        if context is not None:
            try:
                context.close()
            except Exception:  # shutting down; nothing to decide
                LOG.debug("Closing the event consumer's connection failed",
                          exc_info=True)

    def connected(self) -> bool:
        """True while the consumer's broker connection is up."""
        try:
            return bool(self._conn.connection.connected)
        except AttributeError:
            return False

    def keep_alive(self) -> None:
        """Send the broker a heartbeat while a batch is being applied.

        A listening ``Connection`` has no heartbeat thread (impl_rabbit.py
        starts one only to send); its heartbeats go out while it reads. A
        long apply (many re-reads) must not let the broker drop us.
        """
        conn = self._conn
        try:
            with conn._connection_lock:
                if conn._heartbeat_supported_and_enabled():
                    conn.connection.connection.send_heartbeat()
        except Exception:  # a lost connection: the next read reconnects
            LOG.debug("Could not send a heartbeat", exc_info=True)

    # the loop -----------------------------------------------------------------

    def _run(self) -> None:
        if self._lowered:
            priority.lower_this_thread()
        while not self._stop.is_set():
            try:
                self._ack_applied()
                if self._unacked >= MAX_UNACKED:
                    self._wait_for_apply()
                    continue
                messages = self._receive()
                if messages:
                    self._hand_over(messages)
            except Exception:  # the loop must outlive any surprise
                LOG.exception("Ironic event consumer failed; going on")
                self._stop.wait(1.0)

    def _wait_for_apply(self) -> None:
        """Read no more until the oldest batch is applied; keep alive."""
        applied = self._in_flight[0][0]
        beat = time.monotonic()
        while not self._stop.is_set() and not applied():
            if time.monotonic() - beat >= 1.0:
                self.keep_alive()
                beat = time.monotonic()
            self._stop.wait(ACK_POLL)

    def _receive(self) -> list[Any]:
        """One wakeup's messages; reconnects (oslo's way) if it must."""
        conn = self._conn
        del self._buffer[:]
        poll = ACK_POLL if self._in_flight else 1.0

        def lost(exc: Exception) -> None:
            # As Connection.consume's: consume again after a reconnect;
            # what came on the lost channel comes again, unacked.
            conn._new_tags = set(conn._consumers.values())
            del self._buffer[:]

        with conn._connection_lock:
            conn.ensure(lambda: self._drain(poll),
                        recoverable_error_callback=lost, error_callback=lost)
        return list(self._buffer)

    def _drain(self, poll: float = 1.0) -> None:
        """Read what waits: one message (or a poll's timeout), then more."""
        conn = self._conn
        kombu_conn = conn.connection
        if not kombu_conn.connected:
            # As Connection.consume's: the next host, then ensure retries.
            kombu_conn.maybe_switch_next()
            raise kombu_conn.recoverable_connection_errors[0]
        # Each reconnect makes a new transport.
        read_ahead(getattr(getattr(kombu_conn, "connection", None),
                           "transport", None))
        while conn._new_tags:
            for consumer, tag in conn._consumers.items():
                if tag in conn._new_tags:
                    consumer.consume(conn, tag=tag)
                    conn._new_tags.discard(tag)
        try:
            # At most a second, so that a stop is seen soon.
            kombu_conn.drain_events(timeout=min(poll, conn._poll_timeout))
        except TimeoutError:
            if conn._heartbeat_supported_and_enabled():
                conn._heartbeat_check()
            return
        # The window is counted from the first message: a steady stream
        # (a message every few ms) must not hold the batch open until
        # BATCH_MAX, which at 100 events a second delayed them by seconds.
        deadline = time.monotonic() + BATCH_TIMEOUT
        while len(self._buffer) < BATCH_MAX and not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                kombu_conn.drain_events(timeout=left)
            except TimeoutError:
                break
        if conn._heartbeat_supported_and_enabled():
            conn._heartbeat_check()

    def _hand_over(self, messages: list[Any]) -> None:
        """Decode the batch and queue it for its apply."""
        batch: list[Message] = []
        oldest: float | None = None
        for message in messages:
            try:
                body = message.body
                # A sender's [oslo_messaging_rabbit] kombu_compression.
                compression = (message.headers or {}).get("compression")
                if compression:
                    body = kombu.compression.decompress(body, compression)
                decoded = notification(body)
                batch.append(event(decoded))
                if oldest is None:
                    oldest = sent_at(decoded)
            except Exception as exc:
                self.undecodable += 1
                LOG.warning("Dropped an undecodable Ironic notification: "
                            "%.200s", exc)
        self.batches += 1
        self.lag.observe(oldest)
        applied = self._on_batch(batch)
        self._in_flight.append((applied, messages[-1], len(messages)))
        self._unacked += len(messages)

    def _ack_applied(self) -> None:
        """Ack, at once, every batch applied so far, oldest first."""
        last, count = None, 0
        while self._in_flight and self._in_flight[0][0]():
            _, last, n = self._in_flight.popleft()
            count += n
        if last is None:
            return
        self._unacked -= count
        conn = self._conn
        with conn._connection_lock:
            if last.channel is not conn.channel:
                return  # reconnected since: the broker sends them again
            try:
                # Delivery tags are the channel's: ``multiple`` covers
                # every earlier message of this channel, none of another.
                conn.channel.basic_ack(last.delivery_tag, multiple=True)
                self.acks += 1
            except Exception as exc:  # a lost connection: redelivered
                LOG.info("Could not ack %(n)d Ironic notifications "
                         "(%(error)s); the broker sends them again",
                         {"n": count, "error": exc})
