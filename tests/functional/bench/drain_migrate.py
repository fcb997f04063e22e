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

"""``drain host migrate``: wall time against the ideal, and requests per server.

Inside Nova's harness (real API, conductor, scheduler, placement, four
computes), 40 servers are booted on host1 and host2; every live migration
takes ``--seconds`` in the fake driver
(:class:`tests.functional.migration_fakes.TimedLiveMigrationDriver`). The
real ``openstack`` shell drains the two hosts onto the other two with
``--concurrency`` 1, 2 and 4 (the pairs swap roles between runs). For each:
the wall time against the ideal ``ceil(40 / concurrency) x seconds``, the
ratio; the same against Nova's own time for the migrations (each record,
created to completed, summed and divided by the concurrency: the part of
the wall time that is the scheduler, conductor and computes, not the
command); and the HTTP requests the command sent (all of them: gather,
posts, polls, checks) per server. Nothing is asserted about time.

Run from the repository root::

    .venv/bin/python -m tests.functional.bench.drain_migrate [--seconds 3]
        [--servers 40] [--concurrency 1,2,4]

Exit 1 if a run did not move every server, or the harness failed.
"""
import argparse
import math
import os
import sys
import time
from typing import Any

import fixtures
from nova import objects

from nova_drain_filters.clients import http
from tests.functional import harness_run
from tests.functional import migrate_base

PAIRS = (("host1", "host2"), ("host3", "host4"))


class DrainMigrateBench(migrate_base.MigrateTestBase):
    """One run per concurrency; ``results`` holds the figures."""

    HOSTS = ("host1", "host2", "host3", "host4")
    SERVERS = 40
    HOLD = 3.0
    CONCURRENCY: tuple[int, ...] = (1, 2, 4)
    PARALLEL_LIVE = 4
    results: list[dict[str, Any]] = []

    def count_requests(self) -> dict[str, int]:
        counts = {"all": 0, "polls": 0}
        send = http.ServiceClient._send

        def counted(client: Any, method: str, url: str, kwargs: Any) -> Any:
            counts["all"] += 1
            counts["polls"] += "changes-since" in url
            return send(client, method, url, kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.clients.http.ServiceClient._send", counted))
        return counts

    def test_bench(self) -> None:
        flavor = self._create_flavor(memory_mb=64, vcpu=1, disk=1)
        for i in range(self.SERVERS):
            self._create_server(networks="none", flavor_id=flavor,
                                host=PAIRS[0][i % 2])
        counts = self.count_requests()
        for n, concurrency in enumerate(self.CONCURRENCY):
            source, dest = PAIRS[n % 2], PAIRS[(n + 1) % 2]
            if n:
                self.assertEqual(0, self.cli("drain", "host", "cancel",
                                             *dest, "--yes").rc)
            self.start_drain(*source)
            counts.update(all=0, polls=0)
            began = time.monotonic()
            rows, _run = self.migrate(*source, "--concurrency",
                                      str(concurrency))
            wall = time.monotonic() - began
            moved = sum(r["Result"] == "moved" for r in rows.values())
            self.assertEqual(self.SERVERS, moved)
            ideal = math.ceil(self.SERVERS / concurrency) * self.HOLD
            self.results.append({
                "concurrency": concurrency, "wall": wall, "ideal": ideal,
                "nova": self.nova_seconds(rows) / concurrency,
                "requests": counts["all"], "polls": counts["polls"],
                "moved": moved})

    def nova_seconds(self, rows: dict[str, Any]) -> float:
        """Nova's own time for this run's migrations, from its records:
        created (the conductor) to completed (the source compute)."""
        total = 0.0
        for server in rows:
            newest = max(objects.MigrationList.get_by_filters(
                self.ctxt, {"instance_uuid": server}), key=lambda m: m.id)
            total += (newest.updated_at - newest.created_at).total_seconds()
        return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="seconds each live migration takes")
    parser.add_argument("--servers", type=int, default=40)
    parser.add_argument("--concurrency", default="1,2,4")
    args = parser.parse_args(argv)
    os.environ.setdefault("OS_WSGI__API_PASTE_CONFIG", os.path.join(
        sys.prefix, "etc", "nova", "api-paste.ini"))
    os.environ.setdefault("OS_TEST_TIMEOUT", "3600")
    DrainMigrateBench.HOLD = args.seconds
    DrainMigrateBench.SERVERS = args.servers
    DrainMigrateBench.CONCURRENCY = tuple(
        int(c) for c in args.concurrency.split(","))
    case = DrainMigrateBench("test_bench")
    stdlog = getattr(case, "stdlog", None)
    error = harness_run.run_quietly(
        case, lambda: stdlog.logger.output if stdlog else "")
    if error:
        print(f"the Nova harness failed: {error}", file=sys.stderr)
        return 1
    print(f"{args.servers} servers on 2 hosts, {args.seconds:g} s per live "
          "migration (fake driver), drained onto 2 others")
    print(f"{'concurrency':>11} {'wall s':>7} {'ideal s':>7} {'ratio':>6} "
          f"{'nova s':>7} {'vs nova':>7} {'requests':>8} {'/server':>7} "
          f"{'polls':>5}")
    for r in DrainMigrateBench.results:
        print(f"{r['concurrency']:>11} {r['wall']:>7.1f} {r['ideal']:>7.1f} "
              f"{r['wall'] / r['ideal']:>6.2f} {r['nova']:>7.1f} "
              f"{r['wall'] / r['nova']:>7.2f} {r['requests']:>8} "
              f"{r['requests'] / r['moved']:>7.1f} {r['polls']:>5}")
    print("ideal: ceil(servers / concurrency) x seconds; nova: the sum of "
          "Nova's own time per migration (record created to completed) / "
          "concurrency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
