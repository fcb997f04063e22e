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

"""The consumer's batch window and its acks, on a fake connection.

The broker itself (declares, redelivery, one ack per batch) is in
tests/functional/test_event_consumer.py.
"""
import json
import logging
import socket
import struct
import types
from typing import Any
from unittest import mock

import fixtures
import testtools
from amqp import exceptions as amqp_exceptions
from amqp import transport as amqp_transport

from nova_drain_filters.ironic_view import consumer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class StreamingConnection:
    """A kombu connection on which a message arrives every ``gap`` s.

    ``drain_events`` delivers the next message to the buffer if it comes
    within its timeout, and advances the fake clock by what it waited.
    """

    def __init__(self, buffer: list[Any], clock: Clock, gap: float,
                 count: int) -> None:
        self.buffer, self.clock, self.gap = buffer, clock, gap
        self.left = count
        self.connected = True
        self.timeouts: list[float] = []

    def drain_events(self, timeout: float) -> None:
        self.timeouts.append(timeout)
        if not self.left or self.gap > timeout:
            self.clock.now += timeout
            raise TimeoutError()
        self.clock.now += self.gap
        self.left -= 1
        self.buffer.append(object())


class TestBatchWindow(testtools.TestCase):
    def drain(self, gap: float, count: int = 5000) -> tuple[
            consumer.QueueConsumer, StreamingConnection, Clock]:
        queue = consumer.QueueConsumer(mock.sentinel.transport, "ironic",
                                       "topic", "pool", mock.Mock())
        clock = Clock()
        stream = StreamingConnection(queue._buffer, clock, gap, count)
        queue._conn = types.SimpleNamespace(
            connection=stream, _new_tags=set(), _consumers={},
            _poll_timeout=1.0,
            _heartbeat_supported_and_enabled=lambda: False)
        self.useFixture(fixtures.MockPatchObject(consumer, "time", clock))
        queue._drain()
        return queue, stream, clock

    def test_a_steady_stream_closes_the_batch_after_the_window(self) -> None:
        # A message every 5 ms, as at 200 events a second: the old loop
        # waited BATCH_TIMEOUT for each next one and so gathered BATCH_MAX
        # (five seconds of events) before it handed any over.
        queue, stream, clock = self.drain(gap=0.005)
        self.assertLessEqual(len(queue._buffer),
                             1 + consumer.BATCH_TIMEOUT / 0.005)
        self.assertGreater(len(queue._buffer), 1)
        first_arrival = 100.0 + 0.005
        self.assertLessEqual(clock.now - first_arrival,
                             consumer.BATCH_TIMEOUT + 1e-9)
        # Each wait is only what is left of the window.
        self.assertTrue(all(t <= consumer.BATCH_TIMEOUT + 1e-9
                            for t in stream.timeouts[1:]))

    def test_a_backlog_fills_the_batch_to_its_maximum(self) -> None:
        queue, _, _ = self.drain(gap=0.0)
        self.assertEqual(consumer.BATCH_MAX, len(queue._buffer))

    def test_a_lone_message_is_handed_over_after_the_window(self) -> None:
        queue, stream, clock = self.drain(gap=0.001, count=1)
        self.assertEqual(1, len(queue._buffer))
        self.assertAlmostEqual(100.001 + consumer.BATCH_TIMEOUT, clock.now)

    def test_nothing_waiting_returns_after_the_poll(self) -> None:
        queue, stream, _ = self.drain(gap=0.0, count=0)
        self.assertEqual([], queue._buffer)
        self.assertEqual([1.0], stream.timeouts)


class Channel:
    def __init__(self) -> None:
        self.acks: list[tuple[int, bool]] = []

    def basic_ack(self, tag: int, multiple: bool) -> None:
        self.acks.append((tag, multiple))


class TestAcks(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.done: set[int] = set()
        self.channel = Channel()
        self.queue = consumer.QueueConsumer(
            mock.sentinel.transport, "ironic", "topic", "pool",
            self.on_batch)
        self.queue._conn = types.SimpleNamespace(
            channel=self.channel, _connection_lock=mock.MagicMock())
        self.tags = 0

    def on_batch(self, batch: list[consumer.Message]) -> Any:
        number = self.queue.batches
        return lambda: number in self.done

    def hand_over(self, count: int, channel: Any = None) -> None:
        messages = []
        for _ in range(count):
            self.tags += 1
            messages.append(types.SimpleNamespace(
                body=b'{"event_type": "e", "payload": {}}', headers={},
                channel=channel or self.channel, delivery_tag=self.tags))
        self.queue._hand_over(messages)

    def test_applied_batches_are_acked_at_once_in_order(self) -> None:
        for count in (3, 2, 4):
            self.hand_over(count)  # batches 1, 2, 3
        self.assertEqual(9, self.queue._unacked)
        self.queue._ack_applied()
        self.assertEqual([], self.channel.acks)  # nothing applied yet
        self.done.update({1, 3})
        self.queue._ack_applied()
        # Batch 3 waits behind 2: a multiple ack of 9 would ack 2 too.
        self.assertEqual([(3, True)], self.channel.acks)
        self.assertEqual(6, self.queue._unacked)
        self.done.add(2)
        self.queue._ack_applied()
        self.assertEqual([(3, True), (9, True)], self.channel.acks)
        self.assertEqual((0, 2), (self.queue._unacked, self.queue.acks))

    def test_a_lost_channels_batches_are_not_acked(self) -> None:
        self.hand_over(2, channel=Channel())  # before a reconnect
        self.done.add(1)
        self.queue._ack_applied()
        self.assertEqual([], self.channel.acks)
        self.assertEqual(0, self.queue._unacked)

    def test_reading_waits_past_the_unacked_bound(self) -> None:
        waited: list[bool] = []
        self.hand_over(1)
        self.queue._unacked = consumer.MAX_UNACKED
        self.queue._stop.wait = lambda timeout: (  # type: ignore
            waited.append(True), self.done.add(1))[0]
        self.queue._wait_for_apply()
        self.assertEqual([True], waited)
        self.queue._ack_applied()
        self.assertEqual([(1, True)], self.channel.acks)

    def test_a_batch_that_raises_is_never_acked(self) -> None:
        def crash(batch: list[consumer.Message]) -> Any:
            raise RuntimeError("died before the apply")
        self.queue._on_batch = crash
        self.assertRaises(RuntimeError, self.hand_over, 2)
        self.queue._ack_applied()
        self.assertEqual(([], 0), (self.channel.acks, self.queue._unacked))


class TestSentAt(testtools.TestCase):
    def test_no_stamp_or_a_bad_one_is_none(self) -> None:
        for message in ({}, {"timestamp": None}, {"timestamp": 5},
                        {"timestamp": "yesterday"}):
            self.assertIsNone(consumer.sent_at(message))

    def test_the_stamp_inside_the_envelope(self) -> None:
        inner = {"event_type": "e", "payload": {},
                 "timestamp": "2026-12-05 00:00:00"}
        body = json.dumps({"oslo.version": "2.0",
                           "oslo.message": json.dumps(inner)})
        self.assertEqual(1796428800.0,
                         consumer.sent_at(consumer.notification(body)))


class TestLagWatch(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.now = 1000.0
        self.logged = self.useFixture(fixtures.FakeLogger(
            name=consumer.__name__, level=logging.INFO))
        self.watch = consumer.LagWatch(clock=lambda: self.now,
                                       monotonic=lambda: self.now)

    def read(self, lag: float | None, after: float = 1.0) -> None:
        self.now += after
        self.watch.observe(None if lag is None else self.now - lag)

    def lines(self) -> list[str]:
        return self.logged.output.splitlines()

    def test_events_on_time_say_nothing(self) -> None:
        for lag in (0.1, consumer.LAG_WARNING, -5.0):
            self.read(lag)
        self.assertEqual(([], False), (self.lines(), self.watch.late))

    def test_no_stamp_is_said_once_not_taken_as_on_time(self) -> None:
        self.read(None)
        self.read(None)
        self.assertEqual(1, len(self.lines()))
        self.assertIn("no readable timestamp", self.lines()[0])
        self.read(120.0)  # a stamped batch later is still watched
        self.assertIn("read 120 s after", self.lines()[1])

    def test_late_events_warn_once_a_period_with_the_worst(self) -> None:
        self.read(consumer.LAG_WARNING + 1)
        self.assertEqual(1, len(self.lines()))
        self.assertIn("read 31 s after they were sent", self.lines()[0])
        self.read(300.0)
        self.read(90.0)  # still within the period: counted, not logged
        self.assertEqual(1, len(self.lines()))
        self.read(45.0, after=consumer.LAG_WARNING_EVERY)
        self.assertEqual(2, len(self.lines()))
        self.assertIn("read 300 s after", self.lines()[1])
        self.assertTrue(self.watch.late)

    def test_on_time_again_is_said_once(self) -> None:
        self.read(120.0)
        self.read(2.0)
        self.read(1.0)
        self.assertEqual(2, len(self.lines()))
        self.assertIn("on time again (read 2.0 s", self.lines()[1])
        self.assertFalse(self.watch.late)

    def test_a_consumer_watches_each_batchs_first_stamp(self) -> None:
        queue = consumer.QueueConsumer(
            mock.sentinel.transport, "ironic", "topic", "pool",
            lambda batch: lambda: False)
        seen: list[float | None] = []
        queue.lag = types.SimpleNamespace(observe=seen.append)

        def message(stamp: str | None) -> Any:
            inner: dict[str, Any] = {"event_type": "e", "payload": {}}
            if stamp:
                inner["timestamp"] = stamp
            return types.SimpleNamespace(body=json.dumps(inner).encode(),
                                         headers={})
        queue._hand_over([message(None), message("2026-12-05 00:00:00"),
                          message("2026-12-05 00:00:09")])
        queue._hand_over([message(None)])
        self.assertEqual([1796428800.0, None], seen)


class TestReadAhead(testtools.TestCase):
    """On py-amqp's own frame reader, over a real socket pair."""

    def transport(self) -> tuple[Any, socket.socket, list[int]]:
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        tcp = amqp_transport.TCPTransport.__new__(
            amqp_transport.TCPTransport)
        tcp.sock, tcp._read_buffer = ours, b""
        tcp.raise_on_initial_eintr = True
        reads: list[int] = []

        def recv(n: int) -> bytes:
            reads.append(n)
            return ours.recv(n)
        tcp._quick_recv = recv
        return tcp, theirs, reads

    def frames(self, count: int) -> bytes:
        return b"".join(struct.pack(">BHI", 3, 1, 5) + b"body%d" % (i % 10)
                        + b"\xce" for i in range(count))

    def test_many_frames_come_from_one_read(self) -> None:
        tcp, theirs, reads = self.transport()
        theirs.sendall(self.frames(30))
        consumer.read_ahead(tcp)
        consumer.read_ahead(tcp)  # once is enough: no read inside a read
        got = [tcp.read_frame() for _ in range(30)]
        self.assertEqual([(3, 1, b"body%d" % (i % 10)) for i in range(30)],
                         [tuple(frame) for frame in got])
        self.assertEqual([consumer.READ_AHEAD], reads)

    def test_without_it_py_amqp_reads_each_part(self) -> None:
        # What read_ahead is for: three reads per frame.
        tcp, theirs, reads = self.transport()
        theirs.sendall(self.frames(2))
        for _ in range(2):
            tcp.read_frame()
        self.assertEqual([7, 5, 1, 7, 5, 1], reads)

    def test_a_transport_without_the_hook_is_left_alone(self) -> None:
        other = types.SimpleNamespace()
        consumer.read_ahead(other)
        consumer.read_ahead(None)
        self.assertEqual({}, vars(other))

    def test_py_amqp_holds_a_small_piece_of_a_large_read(self) -> None:
        # py-amqp copies its whole buffer at each read (``rbuf[n:]``);
        # one large read must not all land there.
        tcp, theirs, reads = self.transport()
        body = b"x" * 500
        frame = struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce"
        count = 6 * consumer.HAND_OVER // len(frame)
        theirs.sendall(frame * count)
        consumer.read_ahead(tcp)
        held = []
        for _ in range(count):
            self.assertEqual((3, 1, body), tuple(tcp.read_frame()))
            held.append(len(tcp._read_buffer))
        self.assertEqual([consumer.READ_AHEAD], reads)
        self.assertLessEqual(max(held), consumer.HAND_OVER)

    def test_a_frame_larger_than_a_piece_comes_whole(self) -> None:
        tcp, theirs, reads = self.transport()
        body = bytes(range(256)) * (3 * consumer.HAND_OVER // 256)
        theirs.sendall(struct.pack(">BHI", 3, 1, len(body)) + body
                       + b"\xce" + self.frames(1))
        consumer.read_ahead(tcp)
        self.assertEqual((3, 1, body), tuple(tcp.read_frame()))
        self.assertEqual((3, 1, b"body0"), tuple(tcp.read_frame()))

    def test_a_frame_cut_by_a_timeout_is_read_whole_later(self) -> None:
        # py-amqp puts a cut frame back in its buffer on a timeout
        # (``read_frame``); nothing of it may be lost or read twice.
        tcp, theirs, reads = self.transport()
        consumer.read_ahead(tcp)
        data = self.frames(3)
        theirs.sendall(data[:len(data) - 8])
        self.assertEqual((3, 1, b"body0"), tuple(tcp.read_frame()))
        self.assertEqual((3, 1, b"body1"), tuple(tcp.read_frame()))
        with tcp.having_timeout(0.05):
            self.assertRaises(socket.timeout, tcp.read_frame)
        theirs.sendall(data[len(data) - 8:])
        self.assertEqual((3, 1, b"body2"), tuple(tcp.read_frame()))

    def test_the_end_of_the_stream_is_an_error_as_before(self) -> None:
        tcp, theirs, reads = self.transport()
        consumer.read_ahead(tcp)
        theirs.sendall(self.frames(1))
        theirs.close()
        self.assertEqual((3, 1, b"body0"), tuple(tcp.read_frame()))
        self.assertRaisesRegex(OSError, "unexpectedly closed",
                               tcp.read_frame)


class Queues:
    """A broker's channel, for ``delete_unused``: queues and consumers."""

    def __init__(self, queues: dict[str, tuple[int, int]]) -> None:
        self.queues = queues  # name: (messages, consumers)
        self.deleted: list[str] = []
        self.closed = 0

    def channel(self) -> "Queues":
        return self

    def queue_declare(self, queue: str, passive: bool) -> tuple[str, int, int]:
        assert passive  # a look, never a declare
        if queue not in self.queues:
            raise amqp_exceptions.NotFound("no queue")
        return (queue, *self.queues[queue])

    def queue_delete(self, queue: str, if_unused: bool) -> None:
        assert if_unused
        if self.queues[queue][1]:
            raise amqp_exceptions.PreconditionFailed("in use")
        self.deleted.append(queue)

    def close(self) -> None:
        self.closed += 1


class TestDeleteUnused(testtools.TestCase):
    def delete(self, broker: Queues, names: list[str]
               ) -> list[tuple[str, int]]:
        context = mock.Mock()
        context.connection.connection = broker
        transport = mock.Mock()
        transport._driver._get_connection.return_value = context
        deleted = consumer.delete_unused(transport, names)
        context.close.assert_called_once_with()
        self.assertEqual(len(names), broker.closed)  # a channel each
        return deleted

    def test_only_unread_queues_that_exist_are_deleted(self) -> None:
        broker = Queues({"q.0": (7, 0), "q.1": (0, 1), "q.2": (0, 0)})
        self.assertEqual([("q.0", 7), ("q.2", 0)],
                         self.delete(broker, ["q.0", "q.1", "q.2", "q.3"]))
        self.assertEqual(["q.0", "q.2"], broker.deleted)

    def test_a_queue_read_after_the_look_is_left(self) -> None:
        broker = Queues({"q.0": (3, 0)})
        broker.queue_declare = lambda queue, passive: (queue, 3, 0)
        broker.queues["q.0"] = (3, 1)  # a consumer came between the two
        self.assertEqual([], self.delete(broker, ["q.0"]))

