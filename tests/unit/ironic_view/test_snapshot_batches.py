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

"""Event storms: copies per event by count, and what readers see."""
import datetime
import gc
import json
import threading
import time

import fixtures
import testtools

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import events
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import snapshot
from tests.unit import ironic_fakes
from tests.unit.ironic_view import helpers

NODES = 2000


def uuid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def listing(count: int = NODES, started: float = 0.0) -> snapshot.Snapshot:
    nodes = {uuid(i): ironic_fakes.ironic_node(uuid(i)) for i in range(count)}
    return snapshot.Snapshot(nodes, started, started, 1, datetime.datetime(
        2026, 1, 1, tzinfo=datetime.timezone.utc))


def read(patches: snapshot.Patches) -> snapshot.Snapshot | None:
    """What a request does: take the current snapshot (it is handed out)."""
    return patches.current


def broken(i: int, why: str = "fan") -> decisions.IronicNodeFacts:
    return ironic_fakes.ironic_node(uuid(i), maintenance=True,
                                    maintenance_reason=why)


class TestCollector(testtools.TestCase):
    """What a storm leaves the garbage collector to walk.

    A scheduler's full collection walks every tracked object, at about
    0.3 s for Nova's heap in the harness; events that leave more of them
    behind bring the next one sooner, in the middle of requests.
    """

    def check_no_object_an_event(self, unusable: bool) -> None:
        patches = snapshot.Patches()
        patches.install(listing())
        held = read(patches)  # a request holds it: the batch copies
        self.addCleanup(gc.enable)
        gc.collect()
        gc.disable()
        before = len(gc.get_objects())
        self.assertEqual(NODES, patches.apply({
            uuid(i): broken(i) if unusable
            else ironic_fakes.ironic_node(uuid(i), name="x")
            for i in range(NODES)}, 1.0))
        gc.collect()
        # A handful for the copy, none for the events: the nodes are
        # packed in tuples the collector stops tracking, the read times
        # floats in a dict it does not track, and the unusable nodes a set
        # of strings, their reasons worked out on asking.
        self.assertLess(len(gc.get_objects()) - before, 20)
        self.assertFalse(gc.is_tracked(patches._event_at))
        self.assertFalse(any(map(gc.is_tracked,
                                 patches._event_packed.values())))
        self.assertIsNotNone(held)
        snap = patches.current
        assert snap is not None
        self.assertEqual(NODES if unusable else 0, len(snap.unusable))
        if unusable:
            self.assertEqual(decisions.baremetal_reasons(broken(7)),
                             snap.unusable[uuid(7)])

    def test_an_event_leaves_no_tracked_object(self) -> None:
        self.check_no_object_an_event(unusable=False)

    def test_a_listing_leaves_a_handful_of_tracked_objects(self) -> None:
        # Before the node table, each node's facts were one more object
        # that every full collection of the scheduler's heap walked.
        nodes = {uuid(i): ironic_fakes.ironic_node(
            uuid(i), traits=frozenset({"CUSTOM_GPU"}) if i % 2 else
            frozenset()) for i in range(NODES)}
        self.addCleanup(gc.enable)
        gc.collect()
        gc.disable()
        before = len(gc.get_objects())
        snap = snapshot.Snapshot(nodes, 0.0, 0.0, 1, datetime.datetime(
            2026, 1, 1, tzinfo=datetime.timezone.utc))
        del nodes
        gc.collect()
        self.assertLess(len(gc.get_objects()) - before, 20)
        self.assertEqual(frozenset({"CUSTOM_GPU"}),
                         snap.nodes[uuid(1)].traits)

    def test_an_unusable_node_keeps_no_reasons(self) -> None:
        self.check_no_object_an_event(unusable=True)


class TestCopies(testtools.TestCase):
    """Copies are counted per batch and per hand-out, never per event."""

    def setUp(self) -> None:
        super().setUp()
        self.patches = snapshot.Patches()
        self.patches.install(listing())

    def test_events_nobody_read_between_cost_no_copy(self) -> None:
        for i in range(NODES):
            self.assertTrue(self.patches.update_node(broken(i), 1.0 + i))
        self.assertEqual((0, NODES), (self.patches.copies,
                                      self.patches.batches))
        snap = self.patches.current
        assert snap is not None
        self.assertEqual(NODES, len(snap.unusable))

    def test_one_copy_per_hand_out_at_most(self) -> None:
        # Before: one copy of both dicts per event, 1,000 here.
        for i in range(1000):
            if i % 100 == 0:
                read(self.patches)  # a request reads the snapshot
            self.patches.update_node(broken(i), 1.0 + i)
        self.assertEqual(10, self.patches.copies)

    def test_a_batch_copies_once_however_large(self) -> None:
        for batch in range(10):
            read(self.patches)
            self.assertEqual(1000, self.patches.apply({
                uuid(i): broken(i, f"b{batch}") for i in range(1000)},
                1.0 + batch))
        self.assertEqual((10, 10), (self.patches.copies,
                                    self.patches.batches))

    def test_packed_nodes_go_in_with_the_verdict_they_bring(self) -> None:
        # A process that follows its host's reader takes each node packed
        # and judged there (wire.py): nothing is judged again here, and
        # a replayed node keeps its verdict over the next listing.
        fine = ironic_fakes.ironic_node(uuid(5))
        self.assertEqual([], decisions.baremetal_reasons(fine))
        judged = node_table.pack(fine)[:-1] + (True,)
        self.assertEqual(1, self.patches.apply_packed({uuid(5): judged},
                                                      5.0))
        snap = self.patches.current
        assert snap is not None
        self.assertIn(uuid(5), snap.unusable)
        self.patches.install(listing(started=4.0))
        snap = self.patches.current
        assert snap is not None
        self.assertIn(uuid(5), snap.unusable)
        self.patches.apply_packed({uuid(5): node_table.pack(fine)}, 6.0)
        snap = self.patches.current
        assert snap is not None
        self.assertNotIn(uuid(5), snap.unusable)

    def test_a_listing_takes_the_replay_without_a_copy(self) -> None:
        read(self.patches)
        self.patches.update_node(broken(1), 5.0)
        copies = self.patches.copies
        read(self.patches)
        self.patches.install(listing(started=4.0))
        self.assertEqual(copies, self.patches.copies)
        snap = self.patches.current
        assert snap is not None
        self.assertTrue(snap.nodes[uuid(1)].maintenance)  # read after it began
        self.assertIn(uuid(1), snap.unusable)

    def test_a_batch_keeps_the_newer_read_rule(self) -> None:
        self.patches.update_node(broken(1, "new"), 10.0)
        self.assertEqual(1, self.patches.apply({
            uuid(1): ironic_fakes.ironic_node(uuid(1)),
            uuid(2): None}, 9.0))
        snap = self.patches.current
        assert snap is not None
        self.assertEqual("new", snap.nodes[uuid(1)].maintenance_reason)
        self.assertNotIn(uuid(2), snap.nodes)
        self.assertTrue(self.patches.is_deleted(uuid(2)))

    def test_a_repaired_node_leaves_the_unusable(self) -> None:
        self.patches.update_node(broken(3), 1.0)
        read(self.patches)
        self.patches.update_node(ironic_fakes.ironic_node(uuid(3)), 2.0)
        snap = self.patches.current
        assert snap is not None
        self.assertNotIn(uuid(3), snap.unusable)


class TestReaders(testtools.TestCase):
    """A snapshot once handed out never changes, nor shows half a batch."""

    def setUp(self) -> None:
        super().setUp()
        self.patches = snapshot.Patches()
        self.patches.install(listing())

    def test_a_held_snapshot_never_changes(self) -> None:
        held = self.patches.current
        assert held is not None
        before = (dict(held.nodes), dict(held.unusable))
        for i in range(500):
            self.patches.update_node(broken(i), 1.0 + i)
            self.patches.mark_deleted(uuid(NODES - 1 - i), 1.0 + i)
        self.assertEqual(before, (held.nodes, held.unusable))
        now = self.patches.current
        assert now is not None
        self.assertEqual(NODES - 500, len(now.nodes))

    def test_readers_see_whole_batches_only(self) -> None:
        # Each batch puts one reason on the same 200 nodes; a reader that
        # finds two reasons among them, or sees its snapshot change while
        # it looks, saw half a batch.
        batch_nodes = range(200)
        done = threading.Event()
        seen: list[str] = []
        torn: list[str] = []

        def read() -> None:
            while not done.is_set():
                snap = self.patches.current
                assert snap is not None
                first = {snap.nodes[uuid(i)].maintenance_reason
                         for i in batch_nodes}
                again = {snap.nodes[uuid(i)].maintenance_reason
                         for i in batch_nodes}
                if len(first) != 1 or first != again:
                    torn.append(repr(first | again))
                seen.extend(first)
                time.sleep(0)  # a green thread (eventlet patched) yields

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for batch in range(100):
                self.patches.apply({uuid(i): broken(i, f"b{batch}")
                                    for i in batch_nodes}, 1.0 + batch)
                time.sleep(0)
        finally:
            done.set()
            for reader in readers:
                reader.join(10)
        self.assertEqual([], torn)
        self.assertGreater(len(set(seen)), 1)  # the readers saw batches pass
        self.assertLessEqual(self.patches.copies, 100)


class TestHold(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        #: What the timer says next; the last value stays.
        self.times = [0.0]
        self.patches = snapshot.Patches(timer=self.timer)

    def timer(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]

    def copy_taking(self, seconds: float) -> None:
        """One event that copies; the copy reads the timer twice."""
        read(self.patches)
        start = self.times[-1]
        self.times = [start, start + seconds]
        self.patches.update_node(broken(1), 1.0 + self.patches.copies)

    def test_no_hold_without_a_reader(self) -> None:
        self.assertEqual(0.0, self.patches.hold())  # no snapshot yet
        self.patches.install(listing(10))
        self.assertEqual(0.0, self.patches.hold())

    def test_after_a_copy_the_next_waits_its_duty(self) -> None:
        self.patches.install(listing(10))
        self.copy_taking(0.002)
        self.assertEqual(1, self.patches.copies)
        self.assertEqual(0.0, self.patches.hold())  # not handed out yet
        read(self.patches)
        # 2 ms of copying allows the next copy 40 ms after this one began.
        self.assertAlmostEqual(0.038, self.patches.hold())
        self.times = [0.040]
        self.assertEqual(0.0, self.patches.hold())

    def test_the_hold_is_bounded(self) -> None:
        self.patches.install(listing(10))
        self.copy_taking(1.0)
        read(self.patches)
        self.assertEqual(snapshot.MAX_HOLD, self.patches.hold())


class TestListenerBatches(helpers.ViewTestCase):
    """What waits together in the listener is applied as one batch."""

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.TempDir())
        self.client.nodes = list(listing(NODES).nodes.values())
        self.assertTrue(self.view.refresh())
        self.listener = events.EventListener(
            self.view, self.factory, clock=self.clock)  # type: ignore

    def test_a_burst_is_one_batch_and_one_copy(self) -> None:
        self.view.trusted()  # a request holds the snapshot
        requests = self.client.requests
        for i in range(NODES):
            data = {field: None for field in notifications.ironic.NODE_FIELDS}
            data.update(uuid=uuid(i), provision_state="clean wait",
                        power_state="power on", maintenance=False,
                        traits=[])
            self.listener.on_event("baremetal.node.provision_set.end",
                                   helpers.payload(**data))
        self.assertEqual(NODES, len(self.listener.queue))
        taken = self.listener.queue.take(threading.Event(), lambda: 0.0)
        assert taken is not None
        self.listener.apply_batch(taken[0])
        self.listener.queue.done(taken[1])  # as _apply_loop does
        self.assertEqual((1, 1), (self.view.patches.batches,
                                  self.view.patches.copies))
        self.assertEqual(NODES, self.listener.applied)
        self.assertEqual(requests, self.client.requests)
        snap = self.view.trusted()
        assert snap is not None
        self.assertEqual(NODES, len(snap.unusable))

    def test_the_endpoint_hands_on_every_message_of_a_batch(self) -> None:
        endpoint = listening.Endpoint(self.listener.on_event)
        endpoint.info([{"ctxt": {}, "publisher_id": "ironic-conductor.x",
                        "event_type": "baremetal.node.delete.end",
                        "payload": helpers.payload(uuid=uuid(i)),
                        "metadata": {}} for i in range(3)])
        endpoint.warn([{"event_type": None, "payload": None}])
        self.assertEqual([uuid(0), uuid(1), uuid(2)],
                         list(self.listener.queue.waiting))
        self.assertEqual((3, 1), (self.listener.received,
                                  self.listener.dropped))

    def test_the_loop_applies_what_waits_in_batches(self) -> None:
        for i in range(300):
            self.listener.on_event("baremetal.node.delete.end",
                                   helpers.payload(uuid=uuid(i)))
        thread = threading.Thread(target=self.listener._apply_loop)
        thread.start()
        try:
            for _ in range(500):
                if self.listener.applied == 300:
                    break
                self.listener._stop.wait(0.01)
        finally:
            self.listener._stop.set()
            self.listener.queue.wake_all()
            thread.join(10)
        self.assertEqual(300, self.listener.applied)
        self.assertEqual(1, self.view.patches.batches)
        snap = self.view.trusted()
        assert snap is not None
        self.assertEqual(NODES - 300, len(snap.nodes))

    def test_a_consumers_batch_says_when_it_is_applied(self) -> None:
        # The consumer acks once the check says so: never before the apply.
        messages = [("baremetal.node.delete.end",
                     helpers.payload(uuid=uuid(i))) for i in range(50)]
        applied = self.listener.on_batch(messages)  # returns at once
        self.assertFalse(applied())  # no apply loop yet
        later = self.listener.on_batch(messages[:1])
        thread = threading.Thread(target=self.listener._apply_loop)
        thread.start()
        try:
            for _ in range(500):
                if applied() and later():
                    break
                self.listener._stop.wait(0.01)
        finally:
            self.listener._stop.set()
            self.listener.queue.wake_all()
            thread.join(10)
        self.assertTrue(applied())
        self.assertTrue(later())
        self.assertEqual(50, self.listener.applied)

    def test_one_decode_of_the_envelope_and_one_of_its_message(self) -> None:
        inner = {"event_type": "baremetal.node.delete.end",
                 "payload": helpers.payload(uuid=uuid(1))}
        body = json.dumps({"oslo.version": "2.0",
                           "oslo.message": json.dumps(inner)})
        self.assertEqual((inner["event_type"], inner["payload"]),
                         consumer.decode(body.encode()))
        self.assertEqual((inner["event_type"], inner["payload"]),
                         consumer.decode(json.dumps(inner)))  # no envelope
        self.assertRaises(ValueError, consumer.decode, b"[1]")
        self.assertRaises(ValueError, consumer.decode, b"{")
