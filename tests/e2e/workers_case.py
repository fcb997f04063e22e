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

"""The helpers of the workers tests (tests/e2e/test_cloud.py), as a base
class: the scheduler's PIDs, waits for its workers, and requests sent
until given workers served one (tests/e2e/workers.py reads the log)."""

from __future__ import annotations

import functools
import unittest
from typing import Any

from tests.e2e import servers
from tests.e2e import workers
from tests.e2e.running_cloud import RunningCloud


class WorkersCase(unittest.TestCase):
    cloud: RunningCloud
    admin: Any
    image: str

    def scheduler(self) -> tuple[int, workers.SchedulerLog]:
        proc = self.cloud.state.procs["nova-scheduler"]
        return proc.pid, workers.SchedulerLog(proc.log)

    def new_workers(self, parent: int,
                    keep: frozenset[int] = frozenset(),
                    gone: frozenset[int] = frozenset()) -> set[int]:
        """Wait (bounded) until ``parent`` has its two workers, with every
        PID of ``keep`` and none of ``gone``."""
        def both() -> set[int] | None:
            found = workers.children(parent)
            return (found if len(found) == 2 and keep <= found
                    and not found & gone else None)
        return workers.wait_for(f"2 workers of nova-scheduler ({parent})",
                                both)

    def ready_workers(self, parent: int, log: workers.SchedulerLog,
                      **kwargs: frozenset[int]) -> frozenset[int]:
        """:meth:`new_workers`, then each one's view ready (bounded)."""
        pids = self.new_workers(parent, **kwargs)
        for pid in pids:
            workers.wait_for(f"the view of worker {pid}",
                             functools.partial(log.ready, pid))
        return frozenset(pids)

    def probe(self, log: workers.SchedulerLog,
              want: frozenset[int]) -> dict[str, workers.Line]:
        """Scheduling requests the Ironic view decides, two at a time, until
        each PID of ``want`` served one (bounded: RabbitMQ hands the shared
        ``scheduler`` queue's calls round-robin to the workers, so no boot
        picks its worker). Each server's summary line, by server ID."""
        flavor = workers.probe_flavor(self.admin)
        served: dict[str, workers.Line] = {}
        for round_ in range(workers.PROBE_ROUNDS):
            ids = [servers.boot(self.admin, self.image,
                                f"e2e-probe-{round_}-{i}", flavor=flavor)
                   for i in range(2)]
            for server in ids:
                self.addCleanup(servers.delete, self.admin, server)
            for server in ids:
                got = servers.wait_settled(self.admin, server)
                self.assertEqual("ERROR", got["status"], got)
                self.assertIn("No valid host", servers.fault(got))
                served[server] = workers.wait_for(
                    f"the summary line of {server}",
                    functools.partial(log.request, server), timeout=30)
            if want <= {line.pid for line in served.values()}:
                return served
        self.fail(f"workers {sorted(want)} served none of {len(served)} "
                  f"requests: {sorted({x.pid for x in served.values()})}")

    def assertDecidedReady(self, log: workers.SchedulerLog,
                           line: workers.Line) -> None:
        """The worker's view was ready before its line, and our filters
        passed Ironic nodes on (a node another test left cleaning may be
        rejected, by the view)."""
        ready = log.ready(line.pid)
        self.assertIsNotNone(ready, f"worker {line.pid} never ready")
        assert ready is not None
        self.assertLess(ready.index, line.index, line.msg)
        self.assertRegex(line.msg, r": [1-9]\d* hosts in, [1-9]\d* left: "
                         r".*BaremetalAvailabilityFilter rejected")
