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

"""The wire between a scheduler process and its reader: frames, columns."""
import collections
import datetime
import gc
import pickle
import socket
import struct
import threading
from typing import Any

import fixtures
import testtools

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import snapshot
from nova_drain_filters.ironic_view import wire

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
OTHER = "2ce26c0b-03f2-4d2e-ae87-c02d7f33c456"


def node_event(uuid: str = NODE, **facts: Any) -> notifications.NodeEvent:
    return notifications.NodeEvent(
        uuid, "baremetal.node.provision_set.end",
        facts=decisions.IronicNodeFacts(uuid=uuid, **facts))


def through(events: list[notifications.NodeEvent]
            ) -> dict[str, notifications.Pending]:
    """A batch as the parent gets it, through pickle as on the socket."""
    return wire.decode_batch(pickle.loads(pickle.dumps(
        wire.encode_batch(events), protocol=pickle.HIGHEST_PROTOCOL)))


class ColumnsTest(testtools.TestCase):
    def test_each_kind_comes_back_as_the_apply_needs_it(self) -> None:
        full = node_event(provision_state="clean wait",
                          power_state="power on", maintenance=True,
                          maintenance_reason="bmc", fault="clean failure",
                          traits=frozenset({"CUSTOM_GOLD", "CUSTOM_X"}),
                          resource_class="baremetal.gold")
        gone = notifications.NodeEvent(OTHER, "baremetal.node.delete.end",
                                       deleted=True)
        reread = notifications.NodeEvent(
            "3de26c0b-03f2-4d2e-ae87-c02d7f33c789",
            "baremetal.allocation.create.end")
        back = through([full, gone, reread])
        self.assertEqual([NODE, OTHER, reread.node_uuid], list(back))
        assert full.facts is not None
        node = back[NODE]
        assert isinstance(node, tuple)
        self.assertEqual(node_table.pack(full.facts), node)
        self.assertEqual(full.facts, node_table.unpack(NODE, node))
        # Judged by the reader: the process takes the verdict as it came.
        self.assertTrue(node_table.is_unusable(node))
        self.assertEqual(decisions.baremetal_reasons(full.facts),
                         decisions.baremetal_reasons(
                             node_table.unpack(NODE, node)))
        self.assertIsNone(back[OTHER])
        self.assertEqual(reread, back[reread.node_uuid])
        self.assertEqual({}, through([]))
        columns = wire.encode_batch([full])
        self.assertEqual(wire.decode_batch(columns),
                         wire.decode_batch(columns))  # left as it came

    def test_a_nodes_latest_event_wins(self) -> None:
        back = through([node_event(provision_state="cleaning"),
                        node_event(OTHER, provision_state="available"),
                        notifications.NodeEvent(NODE, "baremetal.node.x"),
                        node_event(provision_state="available",
                                   maintenance=True)])
        self.assertEqual({NODE, OTHER}, set(back))
        node = back[NODE]
        assert isinstance(node, tuple)
        facts = node_table.unpack(NODE, node)
        self.assertEqual(("available", True),
                         (facts.provision_state, facts.maintenance))
        self.assertTrue(node_table.is_unusable(node))
        only_facts = through([node_event(provision_state="cleaning"),
                              node_event(OTHER, provision_state="active"),
                              node_event(provision_state="available",
                                         power_state="power off")])
        self.assertEqual([NODE, OTHER], list(only_facts))
        self.assertEqual("available", only_facts[NODE][0])
        self.assertFalse(node_table.is_unusable(only_facts[NODE]))

    def test_a_decoded_node_leaves_the_collectors_walk(self) -> None:
        # One object per node in the snapshot, and one that the first
        # collection stops tracking: a tuple of strings, booleans and
        # None (node_table says why).
        node = through([node_event(provision_state="available",
                                   maintenance_reason="bmc",
                                   traits=frozenset({"CUSTOM_A"}))])[NODE]
        self.assertIsInstance(node, tuple)
        gc.collect()
        self.assertFalse(gc.is_tracked(node))

    def test_a_batch_of_another_width_is_refused(self) -> None:
        uuids, kinds, rereads, columns = wire.encode_batch(
            [node_event(provision_state="available")])
        self.assertRaises(wire.VersionMismatch, wire.decode_batch,
                          (uuids, kinds, rereads, columns[:-1]))

    def test_nodes_with_the_same_traits_share_one_set(self) -> None:
        # A set on the wire would be a new tracked object for every event;
        # a node's facts keep the one set of its traits instead, in a
        # batch and across batches.
        names = ["0" * 8 + f"-0000-4000-8000-{i:012d}" for i in range(4)]
        found = [through([node_event(name, provision_state="available",
                                     traits=frozenset(traits))])[name]
                 for name, traits in zip(names, (
                     {"CUSTOM_GOLD", "CUSTOM_X"}, {"CUSTOM_X", "CUSTOM_GOLD"},
                     set(), set()), strict=True)]
        keys = [node[node_table.TRAITS_AT] for node in found
                if isinstance(node, tuple)]
        traits = [node_table.unpack(name, node).traits
                  for name, node in zip(names, found, strict=True)
                  if isinstance(node, tuple)]
        self.assertEqual([frozenset({"CUSTOM_GOLD", "CUSTOM_X"})] * 2
                         + [frozenset()] * 2, traits)
        self.assertIs(keys[0], keys[1])
        self.assertIs(keys[2], keys[3])
        self.assertIs(traits[0], traits[1])
        self.assertIs(traits[2], traits[3])
        one = through([node_event(name, provision_state="active",
                                  traits=frozenset({"CUSTOM_Y"}))
                       for name in names])
        self.assertEqual(1, len({id(node[node_table.TRAITS_AT])
                                 for node in one.values()
                                 if isinstance(node, tuple)}))

    def test_past_the_bound_trait_sets_are_not_kept(self) -> None:
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.decisions._TRAIT_SETS", {}))
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.decisions.TRAIT_SETS_MAX", 2))
        kept = [decisions.shared_traits(frozenset({f"CUSTOM_{i}"}))
                for i in range(3)]
        again = [decisions.shared_traits(frozenset({f"CUSTOM_{i}"}))
                 for i in range(3)]
        self.assertEqual([True, True, False],
                         [a is k for a, k in zip(again, kept, strict=True)])
        self.assertEqual(again, kept)


class CollectionsTest(testtools.TestCase):
    """What a burst costs Nova's garbage collector in the parent.

    Every container allocated and still alive counts towards the next
    young collection (700 by CPython's default), ten of those bring one
    of the middle generation, and every eleventh of those a full
    collection of the scheduler's heap (0.3 s or more in Nova's harness)
    once enough objects are new. As tuples (an event, its fields, its
    traits' set, then a ``NodeEvent``, then a tuple for the apply and its
    reasons), a 10,000-event burst in batches of 1,000 made 52 young
    collections and 4 middle ones here.
    """

    def test_a_burst_makes_few_young_collections(self) -> None:
        nodes = 20000
        names = [f"00000000-0000-4000-8000-{i:012d}" for i in range(nodes)]
        traits = frozenset({"CUSTOM_GOLD"})
        patches = snapshot.Patches()
        patches.install(snapshot.Snapshot(
            {name: decisions.IronicNodeFacts(name, "available", "power on",
                                             traits=traits)
             for name in names}, 0.0, 0.0, 1,
            datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)))
        frames = [pickle.dumps(wire.encode_batch([
            node_event(name, provision_state=("clean wait" if i % 2
                                              else "available"),
                       power_state="power on", traits=frozenset(traits),
                       instance_uuid=None if i % 3 else NODE)
            for i, name in enumerate(names[start:start + 1000])]))
            for start in range(0, 10000, 1000)]
        collections_made: collections.Counter[int] = collections.Counter()

        def count(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                collections_made[info["generation"]] += 1

        threshold = gc.get_threshold()
        self.addCleanup(gc.set_threshold, *threshold)
        gc.set_threshold(700, 10, 10)
        gc.collect()
        gc.callbacks.append(count)
        try:
            for at, frame in enumerate(frames):
                # A request holds it: each batch copies.
                self.assertIsNotNone(patches.current)
                self.assertEqual(1000, patches.apply_packed(
                    wire.decode_batch(pickle.loads(frame)), 1.0 + at))
        finally:
            gc.callbacks.remove(count)
        self.assertEqual(10, patches.copies)
        snap = patches.current
        assert snap is not None
        unusable = sum(1 for i in range(1000) if i % 2 or i % 3 == 0)
        self.assertEqual(10 * unusable, len(snap.unusable))
        # About one young collection for each 1,000 events: the facts.
        self.assertLessEqual(collections_made[0], 20, collections_made)
        self.assertLessEqual(collections_made[1], 2, collections_made)


class FramesTest(testtools.TestCase):
    def test_frames_split_anyhow_arrive_whole(self) -> None:
        left, right = socket.socketpair()
        self.addCleanup(left.close)
        self.addCleanup(right.close)
        receiver = wire.Channel(right)
        messages = [("state", True),
                    ("batch", 1, 300, 300, 0, wire.encode_batch(
                        [node_event(provision_state="available")] * 300)),
                    ("log", 30, "x" * 70000)]
        data = b"".join(
            struct.pack(">I", len(frame)) + frame for frame in (
                pickle.dumps(m) for m in messages))
        # A frame's header, then byte by byte: nothing before it is whole.
        left.sendall(data[:2])
        self.assertRaises(TimeoutError, receiver.receive, 0.05)
        left.sendall(data[2:7])
        self.assertRaises(TimeoutError, receiver.receive, 0.05)
        left.sendall(data[7:])
        self.assertEqual(messages, [receiver.receive(1.0) for _ in messages])
        left.close()
        self.assertRaises(wire.ReaderGone, receiver.receive, 1.0)

    def test_send_is_one_frame_per_message_from_any_thread(self) -> None:
        left, right = socket.socketpair()
        self.addCleanup(left.close)
        self.addCleanup(right.close)
        sender, receiver = wire.Channel(left), wire.Channel(right)
        threads = [threading.Thread(target=lambda n=n: [
            sender.send(("log", n, "y" * 5000)) for _ in range(50)])
            for n in range(4)]
        got: list[Any] = []
        drain = threading.Thread(target=lambda: got.extend(
            receiver.receive(5.0) for _ in range(200)))
        drain.start()
        for thread in threads:
            thread.start()
        for thread in threads + [drain]:
            thread.join(10)
        self.assertEqual(200, len(got))
        self.assertEqual({0: 50, 1: 50, 2: 50, 3: 50},
                         {n: sum(1 for m in got if m[1] == n)
                          for n in range(4)})
