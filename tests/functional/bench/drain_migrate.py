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
holds ``T`` seconds in the fake driver
(:class:`tests.functional.migration_fakes.HeldLiveMigrationDriver`). The
real ``openstack`` shell drains the two hosts onto the other two with
``--concurrency`` 1, 2 and 4 (the pairs swap roles between runs), once per
``T``. For each run: the wall time against the ideal
``ceil(40 / concurrency) x T`` and the ratio; Nova's own busy time (each
migration record, created to completed, summed and divided by the
concurrency) against the ideal, which is the floor the harness itself sets,
and the wall time against it, which is the command's own share; and the
HTTP requests the command sent (all of them: gather, posts, polls, checks)
per server. Then where the time goes, per server: the bench wraps the
runner's ``post``, ``finish`` and ``poll`` and the fake's hold (its own
instruments, not the product's) and reads Nova's records. Nothing is
asserted about time.

T is 10 s by default, and ``--seconds 3,10`` runs both. At 3 s, Nova's
own work around each migration in the harness (the scheduler, the
conductor's pre-checks, the computes' pre- and post-migration RPCs, all
in this one Python process under one GIL) is alone over 20 % of T, so no
command can be within 1.2x there. 10 s is still short for a real live
migration (tens of seconds to minutes) and makes that floor small enough
for the command's own share to show. T is fixed per run and printed; it
is never tuned to the result.

How the harness differs from Nova's test default, as a deployment runs:
Nova's services log at INFO with oslo.log's default levels
(:func:`deployment_logging`) instead of formatting every DEBUG record
(``--debug-logging`` keeps the harness's logging, to compare). The fake
driver's hold is a sleep, as before. Everything else is Nova's harness as
the functional tests run it: the fake RPC transport (its listeners poll
every 50 ms), the notification fixtures, the full scheduler.

``--profile`` adds yappi's CPU time per server moved, by part (see
:mod:`tests.functional.bench.drain_migrate_profile`); it slows the run, so
its wall figures are not the bench's. The load average at the start and
the end is printed: wall times are only comparable at a low one.

Run from the repository root::

    tools/bench.sh drain_migrate [--seconds 10] [--servers 40]
        [--concurrency 1,2,4] [--debug-logging] [--profile] [--compare]

Exit 1 if a run did not move every server, or the harness failed.
"""
import argparse
import contextlib
import logging
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
from tests.functional.bench import drain_migrate_legacy as bench_legacy
from tests.functional.bench import drain_migrate_profile as bench_profile
from tests.functional.bench import drain_migrate_timeline as bench_timeline

PAIRS = (("host1", "host2"), ("host3", "host4"))


#: Loggers of the in-process services, set to INFO as in a deployment.
#: In a cloud each service is its own process with oslo.log's root at INFO
#: (``debug = False``); here they share the CLI's root logger, which the
#: shell (cliff) sets to DEBUG, so the services' own are set explicitly.
SERVICE_LOGGERS = ("nova", "placement", "oslo_db", "oslo_service",
                   "oslo_concurrency", "oslo_versionedobjects", "alembic",
                   "wsgi_intercept")


def deployment_logging() -> None:
    """Log as nova-* do with ``debug = False``: INFO, and oslo.log's
    ``default_log_levels`` (``oslo_log/log.py`` ``_setup_logging_from_conf``).

    Nova's ``StandardLogging`` fixture (``nova/tests/fixtures/nova.py``)
    sets the root logger to DEBUG and formats every DEBUG record into a
    ``NullHandler``, to check the messages are well formed; no deployment
    does that. The INFO records are still formatted and kept, as a
    deployment writes them to its log.
    """
    from oslo_log import log as oslo_log
    logging.getLogger().setLevel(logging.INFO)
    for pair in oslo_log.get_default_log_levels():
        name, _, level = pair.partition("=")
        logging.getLogger(name).setLevel(level)
    for name in SERVICE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)


class DrainMigrateBench(migrate_base.MigrateTestBase):
    """One run per concurrency; ``results`` holds the figures."""

    HOSTS = ("host1", "host2", "host3", "host4")
    SERVERS = 40
    HOLD: float | None = 3.0
    SECONDS: tuple[float, ...] = (10.0,)
    CONCURRENCY: tuple[int, ...] = (1, 2, 4)
    PARALLEL_LIVE = 4
    PROFILE = False
    #: Each concurrency twice, interleaved: the runner as it is ("new")
    #: and as it polled before (:mod:`.drain_migrate_legacy`, "old").
    COMPARE = False
    #: Nova's services log at INFO (see :func:`deployment_logging`).
    DEPLOYMENT_LOGGING = True
    results: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []

    def setUp(self) -> None:
        super().setUp()
        if self.DEPLOYMENT_LOGGING:
            deployment_logging()

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
        timeline = bench_timeline.Timeline()
        timeline.install(self)
        variants = ("new", "old") if self.COMPARE else ("new",)
        runs = [(t, c, v) for t in self.SECONDS for c in self.CONCURRENCY
                for v in variants]
        for n, (hold, concurrency, variant) in enumerate(runs):
            for host in self.HOSTS:
                self.driver(host).hold = hold
            source, dest = PAIRS[n % 2], PAIRS[(n + 1) % 2]
            if n:
                self.assertEqual(0, self.cli("drain", "host", "cancel",
                                             *dest, "--yes").rc)
            self.start_drain(*source)
            counts.update(all=0, polls=0)
            timeline.clear()
            profile = bench_profile.Profile() if self.PROFILE else None
            if profile:
                profile.start()
            began, began_epoch = time.monotonic(), time.time()
            with (bench_legacy.legacy_runner(timeline) if variant == "old"
                  else contextlib.nullcontext()):
                rows, _run = self.migrate(*source, "--concurrency",
                                          str(concurrency))
            wall = time.monotonic() - began
            if profile:
                self.profiles.append({"seconds": hold,
                                      "concurrency": concurrency,
                                      **profile.stop(len(rows))})
            ended_epoch = time.time()
            moved = sum(r["Result"] == "moved" for r in rows.values())
            self.assertEqual(self.SERVERS, moved)
            records = self.newest_records(rows)
            ideal = math.ceil(self.SERVERS / concurrency) * hold
            self.results.append({
                "seconds": hold, "concurrency": concurrency, "wall": wall,
                "variant": variant,
                "ideal": ideal,
                "nova": self.nova_seconds(records) / concurrency,
                "requests": counts["all"], "polls": counts["polls"],
                "moved": moved, "parts": timeline.breakdown(
                    began_epoch, ended_epoch, concurrency, records)})

    def newest_records(self, rows: dict[str, Any]) -> dict[str, Any]:
        return {server: max(objects.MigrationList.get_by_filters(
            self.ctxt, {"instance_uuid": server}), key=lambda m: m.id)
            for server in rows}

    def nova_seconds(self, records: dict[str, Any]) -> float:
        """Nova's own time for this run's migrations, from its records:
        created (the conductor) to completed (the source compute)."""
        return sum((r.updated_at - r.created_at).total_seconds()
                   for r in records.values())


PARTS = (("startup", "first POST after the shell starts (plan: lists)"),
         ("to_record", "POST to Nova's record (API, conductor cast)"),
         ("to_driver", "record to the driver's start (scheduler, "
                       "pre-checks, pre_live_migration)"),
         ("driver", "the fake's own time"),
         ("to_done", "driver's end to 'completed' (post-migration)"),
         ("lag", "'completed' to the command's noticing"),
         ("lag_max", "the longest such lag"),
         ("to_poll", "'completed' to the start of the poll that saw it"),
         ("in_poll", "that poll's start to the move judged moved"),
         ("poll_s", "one poll, mean (the request, judging, checks)"),
         ("refill", "a move 'completed' to the next POST (a slot idle)"),
         ("tail", "the last move noticed to the shell's exit"))


def report(results: list[dict[str, Any]], servers: int) -> None:
    print(f"{servers} servers on 2 hosts, drained onto 2 others; T: seconds "
          "per live migration in the fake driver")
    print(f"{'T s':>4} {'conc':>4} {'run':>3} {'ideal s':>7} {'wall s':>7} "
          f"{'ratio':>6} "
          f"{'nova s':>7} {'nova/id':>7} {'w/nova':>6} {'req/srv':>7} "
          f"{'polls':>5}")
    for r in results:
        print(f"{r['seconds']:>4g} {r['concurrency']:>4} {r['variant']:>3} "
              f"{r['ideal']:>7.1f} "
              f"{r['wall']:>7.1f} {r['wall'] / r['ideal']:>6.2f} "
              f"{r['nova']:>7.1f} {r['nova'] / r['ideal']:>7.2f} "
              f"{r['wall'] / r['nova']:>6.2f} "
              f"{r['requests'] / r['moved']:>7.1f} {r['polls']:>5}")
    print("ideal: ceil(servers / concurrency) x T; nova: Nova's own busy "
          "time, its records' created-to-completed summed / concurrency "
          "(nova/id: the floor the harness sets); w/nova: wall / nova")
    print()
    print("where the time goes: mean seconds per server (startup and tail "
          "once per run)")
    print(f"{'T s':>4} {'conc':>4} {'run':>3} "
          + " ".join(f"{p:>9}" for p, _ in PARTS))
    for r in results:
        print(f"{r['seconds']:>4g} {r['concurrency']:>4} {r['variant']:>3} "
              + " ".join(
            f"{r['parts'][p]:>9.3f}" for p, _ in PARTS))
    for name, meaning in PARTS:
        print(f"  {name}: {meaning}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", default="10",
                        help="seconds each live migration takes, one run "
                             "set per value (default 10; 3,10 for both)")
    parser.add_argument("--servers", type=int, default=40)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--debug-logging", action="store_true",
                        help="keep Nova's test harness logging (DEBUG, "
                             "every record formatted), as before")
    parser.add_argument("--profile", action="store_true",
                        help="CPU per server by part, with yappi (slows "
                             "the run: its wall times are not the bench's)")
    parser.add_argument("--compare", action="store_true",
                        help="each concurrency twice, interleaved: the "
                             "runner as it is (new) and as it polled "
                             "before (old, drain_migrate_legacy)")
    args = parser.parse_args(argv)
    DrainMigrateBench.COMPARE = args.compare
    os.environ.setdefault("OS_WSGI__API_PASTE_CONFIG", os.path.join(
        sys.prefix, "etc", "nova", "api-paste.ini"))
    os.environ.setdefault("OS_TEST_TIMEOUT", "7200")
    DrainMigrateBench.SECONDS = tuple(
        float(t) for t in args.seconds.split(","))
    DrainMigrateBench.HOLD = DrainMigrateBench.SECONDS[0]
    DrainMigrateBench.SERVERS = args.servers
    DrainMigrateBench.CONCURRENCY = tuple(
        int(c) for c in args.concurrency.split(","))
    DrainMigrateBench.PROFILE = args.profile
    DrainMigrateBench.DEPLOYMENT_LOGGING = not args.debug_logging
    load = os.getloadavg()
    case = DrainMigrateBench("test_bench")
    stdlog = getattr(case, "stdlog", None)
    error = harness_run.run_quietly(
        case, lambda: stdlog.logger.output if stdlog else "")
    if error:
        print(f"the Nova harness failed: {error}", file=sys.stderr)
        return 1
    report(DrainMigrateBench.results, args.servers)
    print("load average (1 min) at the start and the end: "
          f"{load[0]:.1f}, {os.getloadavg()[0]:.1f}"
          + ("" if DrainMigrateBench.DEPLOYMENT_LOGGING else
             "; --debug-logging: Nova's test logging, DEBUG formatted"))
    if DrainMigrateBench.profiles:
        print()
        bench_profile.report(DrainMigrateBench.profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
