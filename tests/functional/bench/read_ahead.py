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

"""What py-amqp's frame reading costs a reader, per message, three ways.

A reader's consumer reads its messages' frames with py-amqp's transport
(amqp/transport.py ``read_frame`` and ``_read``). This benchmark writes
the frames of ``--messages`` deliveries (a method, a header and a body
frame each, the body one of ``notifier``'s notifications) from a child
process into one end of a socket pair, and times ``read_frame`` on the
other, side by side in one run, alternating, ``--repeat`` times each:

* py-amqp alone: a read for each part of each frame;
* one large read (``consumer.READ_AHEAD``) handed whole to py-amqp, as
  ``consumer.read_ahead`` did before: ``_read`` then copies what is left
  of it at every read;
* ``consumer.read_ahead``: the large read, handed over
  ``consumer.HAND_OVER`` bytes at a time.

It prints the median CPU time a message, the reads of the socket a
message, and the ratios. It checks nothing.

Run from the repository root::

    tools/bench.sh read_ahead [--messages 20000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import amqp
from amqp import transport

from nova_drain_filters.ironic_view import consumer
from tests.functional.bench import notifier

EVENTLET = False

#: basic.deliver's method frame and a content header frame carry a few
#: dozen bytes (consumer tag, exchange, routing key; the properties).
METHOD_BYTES = 90
HEADER_BYTES = 60


def frame(kind: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, 1, len(payload)) + payload + b"\xce"


def stream(messages: int) -> bytes:
    nodes = [f"00000000-0000-0000-0000-{i:012d}" for i in range(1000)]
    bodies = notifier.bodies(nodes, messages, 0)
    return b"".join(frame(1, b"m" * METHOD_BYTES)
                    + frame(2, b"h" * HEADER_BYTES) + frame(3, body)
                    for body in bodies)


def whole(recv: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """The read ahead as it was: all a read brings goes to py-amqp."""
    return lambda n: recv(max(n, consumer.READ_AHEAD))


def timed(data: bytes, frames: int, way: str) -> tuple[float, int]:
    """CPU seconds to read ``frames`` frames, and the socket reads."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:  # the writer
        ours.close()
        try:
            theirs.sendall(data)
        finally:
            os._exit(0)
    theirs.close()
    tcp: Any = transport.TCPTransport.__new__(transport.TCPTransport)
    tcp._read_buffer = b""
    reads = 0

    def recv(n: int) -> bytes:
        nonlocal reads
        reads += 1
        return ours.recv(n)
    tcp._quick_recv = recv
    if way == "whole":
        tcp._quick_recv = whole(recv)
    elif way == "handed":
        consumer.read_ahead(tcp)
    # Let the writer fill the socket's buffer first, as a burst does.
    time.sleep(0.05)
    start = time.process_time()
    for _ in range(frames):
        tcp.read_frame()
    spent = time.process_time() - start
    ours.close()
    os.waitpid(child, 0)
    return spent, reads


WAYS = {"alone": "py-amqp alone",
        "whole": "one read, handed whole",
        "handed": "read_ahead"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.sh read_ahead",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repeat < 1:
        parser.error("--messages and --repeat must be at least 1")
    data = stream(args.messages)
    per_message = len(data) / args.messages
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    reads: dict[str, int] = {}
    for _ in range(args.repeat):
        for way in WAYS:
            spent, reads[way] = timed(data, 3 * args.messages, way)
            times[way].append(spent / args.messages)
    print(f"{args.messages:,} messages of {per_message:,.0f} bytes (three "
          f"frames each), read with py-amqp {amqp.__version__}; "
          f"READ_AHEAD {consumer.READ_AHEAD:,}, HAND_OVER "
          f"{consumer.HAND_OVER:,}; median of {args.repeat}")
    base = statistics.median(times["handed"])
    print(f"{'':26}{'µs/message':>12}{'reads/message':>15}"
          f"{'x read_ahead':>14}")
    for way, label in WAYS.items():
        median = statistics.median(times[way])
        print(f"{label:26}{median * 1e6:12.1f}"
              f"{reads[way] / args.messages:15.3f}{median / base:14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
