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

"""What one event of the host's reader costs each process that follows it.

With one reader per host, each of a host's scheduler processes takes
every batch the reader sends and applies it to its own view. This
benchmark pickles ``--events`` events of ``--nodes`` nodes into the
reader's frames (``wire.frame``, batches of ``--batch``), then takes them
into a view of its own, with a request holding the snapshot as one does
in a burst (so each batch copies it), two ways, side by side in one run,
alternating, ``--repeat`` times each:

* packed: as a follower does now (``wire.decode_batch``, then
  ``Patches.apply_packed``): each node arrives packed and judged;
* built and judged here: the same batch's nodes built into
  ``IronicNodeFacts`` and applied with ``Patches.apply``, which packs
  and judges each one again: the work each process did while the wire
  carried facts (wire version 2).

It prints the median CPU time an event, split into taking the frame in
and applying it, the ratio of the two ways, and the young and middle
garbage collections a way made per 10,000 events. It checks nothing.

Run from the repository root::

    tools/bench.sh follower_apply [--nodes 50000] [--events 10000] \\
        [--batch 1000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import gc
import pickle
import random
import statistics
import sys
import time
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import snapshot
from nova_drain_filters.ironic_view import wire

EVENTLET = False

STATES = ("available", "cleaning", "clean wait", "active", "deploying")
TRAITS = (frozenset({"CUSTOM_GOLD"}), frozenset({"CUSTOM_GOLD", "CUSTOM_X"}))


def node(uuid: str, rng: random.Random) -> decisions.IronicNodeFacts:
    return decisions.IronicNodeFacts(
        uuid, rng.choice(STATES), "power on",
        maintenance_reason=f"stamp {rng.random()}",
        traits=frozenset(rng.choice(TRAITS)), resource_class="baremetal")


def view_of(uuids: list[str], rng: random.Random) -> snapshot.Patches:
    patches = snapshot.Patches()
    patches.install(snapshot.Snapshot(
        {uuid: node(uuid, rng) for uuid in uuids}, 0.0, 0.0, 1,
        datetime.datetime.now(datetime.timezone.utc)))
    return patches


def frames_of(uuids: list[str], events: int, batch: int,
              rng: random.Random) -> list[bytes]:
    """The reader's batch messages, as they come on the socket."""
    frames = []
    for seq, start in enumerate(range(0, events, batch), 1):
        taken = [notifications.NodeEvent(
            uuid, "baremetal.node.provision_set.end", facts=node(uuid, rng))
            for uuid in rng.choices(uuids, k=min(batch, events - start))]
        frames.append(wire.frame(("batch", seq, len(taken), len(taken), 0,
                                  wire.encode_batch(taken))))
    return frames


def packed(patches: snapshot.Patches,
           latest: dict[str, Any], at: float) -> None:
    patches.apply_packed(latest, at)


def built(patches: snapshot.Patches,
          latest: dict[str, Any], at: float) -> None:
    patches.apply({uuid: None if value is None
                   else node_table.unpack(uuid, value)
                   for uuid, value in latest.items()}, at)


WAYS: dict[str, Callable[[snapshot.Patches, dict[str, Any], float], None]] = {
    "packed (now)": packed,
    "built and judged here": built,
}


class Collections:
    def __init__(self) -> None:
        self.made: collections.Counter[int] = collections.Counter()

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.made[info["generation"]] += 1


def one_pass(patches: snapshot.Patches, frames: list[bytes],
             apply: Callable[..., None], at: float,
             counter: Collections) -> tuple[float, float]:
    """CPU seconds to take the frames in, and to apply them."""
    take = put = 0.0
    gc.callbacks.append(counter)
    try:
        for frame in frames:
            assert patches.current is not None  # a request holds it
            started = time.process_time()
            message = pickle.loads(memoryview(frame)[4:])
            latest = wire.decode_batch(message[5])
            taken = time.process_time()
            apply(patches, latest, at)
            at += 1.0
            take += taken - started
            put += time.process_time() - taken
    finally:
        gc.callbacks.remove(counter)
    return take, put


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="follower_apply")
    parser.add_argument("--nodes", type=int, default=50000)
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    for name in ("nodes", "events", "batch", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    rng = random.Random(22)
    uuids = [str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
             for _ in range(args.nodes)]
    frames = frames_of(uuids, args.events, args.batch, rng)
    views = {way: view_of(uuids, random.Random(7)) for way in WAYS}
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    counters = {way: Collections() for way in WAYS}
    at = 1.0
    for round_ in range(args.repeat):
        order = list(WAYS) if round_ % 2 == 0 else list(reversed(WAYS))
        for way in order:
            gc.collect()
            times[way].append(one_pass(views[way], frames, WAYS[way], at,
                                       counters[way]))
            at += len(frames)
    per_event = 1e6 / args.events
    print(f"A follower's CPU per event: {args.events:,} events of "
          f"{args.nodes:,} nodes in batches of {args.batch:,}, a request "
          f"holding the snapshot; medians of {args.repeat}")
    print(f"{'':24}{'take in':>9}{'apply':>9}{'total':>9}  ratio"
          f"  collections per 10,000 events (young, middle)")
    base = statistics.median(sum(t) for t in times["packed (now)"])
    per_10k = 10000 / (args.events * args.repeat)
    for way in WAYS:
        take = statistics.median(t[0] for t in times[way])
        put = statistics.median(t[1] for t in times[way])
        total = statistics.median(sum(t) for t in times[way])
        made = counters[way].made
        print(f"{way:24}{take * per_event:7.2f}us{put * per_event:7.2f}us"
              f"{total * per_event:7.2f}us  {total / base:5.2f}"
              f"  {made[0] * per_10k:.1f}, {made[1] * per_10k:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
