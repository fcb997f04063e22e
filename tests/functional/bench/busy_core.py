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


"""A busy core and nothing else: ``select_burst``'s control.

During a burst the publisher, the broker and the reader keep the
machine's other core busy, and a call can be slower for that alone,
whatever the events do in the scheduler: the two cores share a cache, the
memory and, on a virtual machine, a host whose clock drops as more of it
works. This process does work of the same kind, building and parsing
Ironic-shaped notifications (``notifier``'s), at the lowest priority
(``priority``), so that it takes no CPU a call wants, until it is killed.
Calls timed beside it apply no event; what they lose against quiet calls
is the busy core's share, and what a burst's calls lose against them is
the events'.

Run as ``python -m tests.functional.bench.busy_core`` (``select_burst``
starts it in a session of its own and kills it by its process group).
"""
from __future__ import annotations

import json
import sys
import uuid as uuidlib

from tests.functional.bench import notifier
from tests.functional.services import priority


def spin() -> int:
    priority.lowest()
    nodes = [str(uuidlib.UUID(int=i + 1)) for i in range(1000)]
    n = 0
    while True:
        body = notifier.envelope(notifier.EVENT_TYPE,
                                 notifier.payload(nodes[n % len(nodes)]))
        json.loads(json.loads(body)["oslo.message"])
        n += 1


if __name__ == "__main__":
    sys.exit(spin())
