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

"""Event mode without a broker: parsing, re-reads, slots, the view's merge."""

import os
import sys
import threading
import time
from unittest import mock

import fixtures

from nova_drain_filters import decisions
from nova_drain_filters.clients import http
from nova_drain_filters.ironic_view import events
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import pools
from nova_drain_filters.ironic_view import reader
from tests.unit import ironic_fakes
from tests.unit.ironic_view import helpers
from tests.unit.ironic_view.helpers import NODE
from tests.unit.ironic_view.helpers import OTHER
from tests.unit.ironic_view.helpers import payload


class FakeNodeClient(ironic_fakes.FakeIronicClient):
    """Adds ``get_node``: the nodes by uuid, or ``error``."""

    def get_node(self, node_uuid: str) -> decisions.IronicNodeFacts | None:
        self.requests += 1
        if self.error is not None:
            raise self.error
        return next((n for n in self.nodes if n.uuid == node_uuid), None)


class ListenerTestCase(helpers.ViewTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.TempDir())
        self.client = FakeNodeClient([
            ironic_fakes.ironic_node(NODE),
            ironic_fakes.ironic_node(OTHER)])
        self.assertTrue(self.view.refresh())
        self.listings = self.view.refreshes
        self.listener = events.EventListener(
            self.view, lambda: self.client, clock=self.clock)  # type: ignore

    def node(self, uuid: str) -> decisions.IronicNodeFacts | None:
        snap = self.view.trusted()
        assert snap is not None
        return snap.nodes.get(uuid)

    def event(self, event_type: str, uuid: str = NODE,
              deleted: bool = False) -> notifications.NodeEvent:
        return notifications.NodeEvent(uuid, event_type, deleted)


class TestApply(ListenerTestCase):
    def test_event_rereads_one_node_and_updates_the_view(self) -> None:
        self.client.nodes[0] = ironic_fakes.ironic_node(
            NODE, maintenance=True, maintenance_reason="fan")
        before = self.client.requests
        self.clock.advance(1)
        self.listener.apply(self.event("baremetal.node.maintenance_set.end"))
        self.assertEqual(before + 1, self.client.requests)
        self.assertTrue(self.node(NODE).maintenance)
        self.assertEqual(
            [decisions.ReasonCode.BAREMETAL_UNAVAILABLE],
            [r.code for r in self.view.availability_reasons(NODE)])
        self.assertEqual(self.listings, self.view.refreshes)
        self.assertEqual(1, self.listener.applied)

    def test_full_payload_is_applied_without_a_request(self) -> None:
        facts = ironic_fakes.ironic_node(NODE, maintenance=True,
                                         maintenance_reason="fan")
        event = notifications.NodeEvent(
            NODE, "baremetal.node.maintenance_set.end", facts=facts)
        before = self.client.requests
        self.clock.advance(1)
        self.listener.apply(event)
        self.assertEqual(before, self.client.requests)
        self.assertTrue(self.node(NODE).maintenance)
        self.assertEqual((1, 0), (self.listener.applied, self.listener.reread))

    def test_payload_without_facts_is_reread(self) -> None:
        self.client.nodes[0] = ironic_fakes.ironic_node(NODE, fault="power failure")
        self.clock.advance(1)
        self.listener.apply(self.event("baremetal.node.update.end"))
        self.assertEqual("power failure", self.node(NODE).fault)
        self.assertEqual((1, 1), (self.listener.applied, self.listener.reread))

    def test_delete_end_makes_the_node_missing(self) -> None:
        self.view.seen(NODE)  # Nova knew the node before the listing
        self.clock.advance(1)
        self.assertTrue(self.view.refresh())
        before = self.client.requests
        self.listener.apply(self.event("baremetal.node.delete.end",
                                       deleted=True))
        self.assertEqual(before, self.client.requests)  # nothing to read
        self.assertIsNone(self.node(NODE))
        reason = self.view.missing_reason(NODE)
        self.assertEqual(decisions.ReasonCode.IRONIC_NODE_MISSING,
                         reason.code if reason else None)

    def test_delete_event_is_believed_for_a_node_first_seen_later(
            self) -> None:
        # The scheduler sees the node only after the listing started, so a
        # listing's gap would wait a refresh (maybe a new enrolment); a
        # delete event is no guess.
        self.clock.advance(1)
        self.view.seen(NODE)
        self.listener.apply(self.event("baremetal.node.delete.end",
                                       deleted=True))
        reason = self.view.missing_reason(NODE)
        self.assertEqual(decisions.ReasonCode.IRONIC_NODE_MISSING,
                         reason.code if reason else None)
        # Listed again (enrolled anew with that UUID): no longer missing.
        self.clock.advance(1)
        self.assertTrue(self.view.refresh())
        self.assertIsNone(self.view.missing_reason(NODE))

    def test_not_found_on_a_known_node_marks_it_deleted(self) -> None:
        self.client.nodes.pop(0)
        self.listener.apply(self.event("baremetal.node.update.end"))
        self.assertIsNone(self.node(NODE))

    def test_unknown_node_is_logged_and_dropped(self) -> None:
        stranger = "0d0c0b0a-0000-4000-8000-000000000000"
        self.listener.apply(self.event("baremetal.node.update.end", stranger))
        self.assertEqual(1, self.listener.dropped)
        self.assertIn(f"for node {stranger}, which Ironic does not have",
                      self.log.output)
        self.assertEqual({NODE, OTHER}, set(self.view.trusted().nodes))

    def test_failed_reads_are_logged_once_until_one_succeeds(self) -> None:
        self.client.error = http.ApiError("ironic", "GET", "/v1/nodes/x",
                                          503, "down")
        for _ in range(3):
            self.listener.apply(self.event("baremetal.node.update.end"))
        self.assertEqual(3, self.listener.dropped)
        self.assertEqual(1, self.log.output.count("Cannot re-read"))
        self.client.error = None
        self.listener.apply(self.event("baremetal.node.update.end"))
        self.client.error = http.ApiError("ironic", "GET", "/x", 503, "down")
        self.listener.apply(self.event("baremetal.node.update.end"))
        self.assertEqual(2, self.log.output.count("Cannot re-read"))

    def test_new_node_is_added(self) -> None:
        new = ironic_fakes.ironic_node("0d0c0b0a-0000-4000-8000-000000000001")
        self.client.nodes.append(new)
        self.listener.apply(self.event("baremetal.node.create.end", new.uuid))
        self.assertEqual(new, self.node(new.uuid))


class TestOnEvent(ListenerTestCase):
    def test_malformed_events_never_raise(self) -> None:
        for event_type, body in ((None, None), ("baremetal.node.x", "junk"),
                                 ("baremetal.node.x", payload(uuid=3))):
            self.listener.on_event(event_type, body)
        self.assertEqual(3, self.listener.dropped)
        self.assertEqual(0, self.listener.received)
        self.assertEqual(3, self.log.output.count(
            "Dropped a malformed Ironic notification"))

    def test_events_for_one_node_wait_as_one(self) -> None:
        for event_type in ("baremetal.node.provision_set.start",
                           "baremetal.node.maintenance_set.end"):
            self.listener.on_event(event_type, payload(uuid=NODE))
        self.listener.on_event("baremetal.node.power_set.end",
                               payload(uuid=OTHER))
        self.listener.on_event("baremetal.port.create.end",
                               payload(node_uuid=NODE))
        self.assertEqual(4, self.listener.received)
        self.assertEqual([NODE, OTHER], list(self.listener.queue.waiting))
        self.assertEqual("baremetal.node.maintenance_set.end",
                         self.listener.queue.waiting[NODE].event_type)


class TestOnParsed(ListenerTestCase):
    """A reader's batch (reader.py): counted, queued, applied, checked."""

    def test_a_readers_batch_is_queued_and_its_check_turns_true(self) -> None:
        events_in = [self.event("baremetal.node.delete.end", OTHER, True),
                     self.event("baremetal.node.maintenance_set.end")]
        applied = self.listener.on_parsed(
            {e.node_uuid: notifications.pending(e) for e in events_in},
            len(events_in), received=3, dropped=1)
        self.assertEqual((3, 1), (self.listener.received,
                                  self.listener.dropped))
        self.assertEqual([OTHER, NODE], list(self.listener.queue.waiting))
        self.assertFalse(applied())
        taken = self.listener.queue.take(threading.Event(), lambda: 0.0)
        assert taken is not None
        self.listener.apply_batch(taken[0])
        self.listener.queue.done(taken[1])  # as _apply_loop does
        self.assertTrue(applied())
        self.assertIsNone(self.node(OTHER))

    def test_a_fork_lets_go_of_the_parents_reader(self) -> None:
        server = mock.Mock(spec=["forget_after_fork", "stop", "wait"])
        self.listener._pid = os.getpid() + 1  # started in another process
        self.listener._server = server
        with mock.patch.object(events.threading, "Thread"):
            self.listener.start()
        server.forget_after_fork.assert_called_once_with()
        server.stop.assert_not_called()
        self.assertIsNone(self.listener._server)


class TestPark(ListenerTestCase):
    def test_park_stops_the_server_without_waiting_for_it(self) -> None:
        stopped = threading.Event()
        server = mock.Mock()
        server.wait.side_effect = lambda: stopped.wait(5)
        self.listener._server = server
        self.listener.park()  # returns while the server is still waited on
        self.assertFalse(stopped.is_set())
        deadline = time.monotonic() + 5
        while not server.wait.called and time.monotonic() < deadline:
            time.sleep(0.01)
        server.stop.assert_called_once_with()
        self.assertIsNone(self.listener._server)
        stopped.set()


class TestConnect(ListenerTestCase):
    def test_no_reader_process_means_reading_here(self) -> None:
        # A reader that cannot start (here: one that exits at once) must
        # not leave the view without events.
        self.conf.config(group="drain_filters",
                         baremetal_notifications_url="rabbit://h:5672/")
        failing = reader.ReaderProcess(
            "pool", self.listener.on_parsed,
            argv=[sys.executable, "-c", "raise SystemExit(3)"])
        here = mock.Mock()
        self.listener._transport_factory = lambda url: mock.sentinel.transport
        with mock.patch.object(events.listening, "consume",
                               side_effect=[failing, here]) as consume:
            self.listener._connect()
        self.assertIs(here, self.listener._server)
        here.start.assert_called_once_with()
        self.assertEqual({"in_process": True}, consume.call_args.kwargs)
        self.assertIn("Cannot start the Ironic event reader process "
                      "(the event reader exited with 3 before it connected)"
                      "; reading Ironic's notifications in this process "
                      "instead", self.log.output)
        self.listener._slot.forget()


    def test_each_mode_hands_the_reader_the_other_modes_queues(
            self) -> None:
        # Switched on (the default), the host's per-process queues are no
        # longer read; switched off, the host's queue is not.
        lock_path = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group="oslo_concurrency", lock_path=lock_path)
        self.conf.config(group="drain_filters",
                         baremetal_notifications_url="rabbit://h:5672/")
        self.listener._slot.directory = lock_path
        self.listener._transport_factory = lambda url: mock.sentinel.transport
        host = self.listener._slot.host
        got = {}
        for shared in (True, False):
            self.conf.config(group="drain_filters",
                             baremetal_notifications_host_reader=shared)
            with mock.patch.object(events.listening, "consume") as consume:
                self.listener._connect()
            got[shared] = consume.call_args.kwargs["unread"]
            self.listener._slot.forget()
        self.assertEqual((pools.pool_name(host, 0),), got[True])
        self.assertEqual((pools.pool_name(host, "shared"),), got[False])

    def test_a_shared_readers_failure_reads_here_on_this_process_pool(
            self) -> None:
        # The host's queue has one consumer, the host's reader: reading
        # here must use this process's own pool, or each process would
        # hear part of the events once another reader takes the host's.
        self.conf.config(group="drain_filters",
                         baremetal_notifications_url="rabbit://h:5672/",
                         baremetal_notifications_host_reader=True)
        self.conf.config(group="oslo_concurrency",
                         lock_path=self.useFixture(fixtures.TempDir()).path)
        failing = mock.Mock(spec=reader.ReaderProcess)
        failing.pool = "nova-drain-filters.h.shared"
        failing.start.side_effect = RuntimeError("no interpreter")
        here = mock.Mock(spec=["start", "stop", "wait"])
        self.listener._transport_factory = lambda url: mock.sentinel.transport
        with mock.patch.object(events.listening, "consume",
                               side_effect=[failing, here]) as consume:
            self.listener._connect()
        first, second = consume.call_args_list
        own = first.args[1]
        self.assertIsNotNone(first.kwargs["election"])
        self.assertTrue(first.kwargs["shared_pool"].endswith(".shared"))
        self.assertEqual(own, second.args[1])
        self.assertTrue(second.kwargs["in_process"])
        self.assertEqual(own, self.listener.pool)
        self.assertIs(here, self.listener._server)
        self.listener._slot.forget()

    def test_a_new_reader_means_one_listing(self) -> None:
        server = mock.Mock(generation=1)
        server.connected.return_value = True
        self.listener._server = server
        started = self.clock()
        with mock.patch.object(events.listening, "is_connected",
                               lambda s: True):
            self.listener._watch_once(started, started, 15)  # up, lists
            self.listener._watch_once(started, started, 15)
            listings = self.view.refreshes
            self.listener._watch_once(started, started, 15)
            self.assertEqual(listings, self.view.refreshes)
            server.generation = 2  # replaced between two looks
            self.clock.advance(1)
            self.listener._watch_once(started, started, 15)
        self.assertEqual(listings + 1, self.view.refreshes)
        self.assertIn("was replaced; listing Ironic once", self.log.output)


class TestViewMerge(ListenerTestCase):
    def test_reads_after_a_listing_began_survive_it(self) -> None:
        busy = ironic_fakes.ironic_node(NODE, provision_state="cleaning")
        started = self.clock()
        # The listing starts, the node changes and is re-read, then the
        # listing (with the old copy) finishes.
        self.client.hook = lambda: (self.view.update_node(busy, started + 1),
                                    self.clock.advance(5))
        self.assertTrue(self.view.refresh())
        self.assertEqual(busy, self.node(NODE))
        # A later listing that began after the read wins again.
        self.client.hook = None
        self.clock.advance(1)
        self.assertTrue(self.view.refresh())
        self.assertEqual("available", self.node(NODE).provision_state)
        self.assertEqual(({}, {}), (self.view.patches._event_at,
                                    self.view.patches._event_packed))

    def test_an_older_read_never_replaces_a_newer_one(self) -> None:
        new = ironic_fakes.ironic_node(NODE, maintenance=True)
        old = ironic_fakes.ironic_node(NODE)
        self.assertTrue(self.view.update_node(new, 2000.0))
        self.assertFalse(self.view.update_node(old, 1999.0))
        self.assertTrue(self.node(NODE).maintenance)

    def test_before_any_listing_changes_wait_for_it(self) -> None:
        view = self.new_view()
        busy = ironic_fakes.ironic_node(NODE, maintenance=True)
        self.assertFalse(view.update_node(busy, self.clock() - 1))
        self.assertFalse(view.mark_deleted(OTHER, self.clock() + 1))
        self.assertTrue(view.refresh())
        snap = view.trusted()
        assert snap is not None
        # The read before the listing began is older than the listing.
        self.assertFalse(snap.nodes[NODE].maintenance)
        self.assertNotIn(OTHER, snap.nodes)

    def test_readers_keep_a_consistent_snapshot(self) -> None:
        held = self.view.trusted()
        self.view.mark_deleted(NODE, self.clock())
        self.assertIn(NODE, held.nodes)
        self.assertNotIn(NODE, self.view.trusted().nodes)
