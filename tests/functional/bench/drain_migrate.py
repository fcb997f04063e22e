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
        [--concurrency 1,2,4] [--debug-logging] [--profile]

Exit 1 if a run did not move every server, or the harness failed.
"""
import argparse
import datetime
import logging
import math
import os
import statistics
import sys
import time
from typing import Any

import fixtures
from nova import objects

from nova_drain_filters import migration as mig
from nova_drain_filters import migration_runner as runner
from nova_drain_filters.clients import http
from tests.functional import harness_run
from tests.functional import migrate_base
from tests.functional import migration_fakes
from tests.functional.bench import drain_migrate_profile as bench_profile

PAIRS = (("host1", "host2"), ("host3", "host4"))


def _epoch(when: datetime.datetime) -> float:
    """Nova's naive UTC timestamp as seconds since the epoch."""
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


class Timeline:
    """Wall-clock times (``time.time()``, the clock Nova stamps its
    records with) of what the command and the fake driver did, per server:
    the bench's own instruments, wrapped around the product's methods."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.posts: dict[str, float] = {}
        self.noticed: dict[str, float] = {}
        self.driver: dict[str, tuple[float, float]] = {}
        self.finishes: list[float] = []
        self.post_times: list[float] = []
        self.polls = 0

    def install(self, case: Any) -> None:
        post, finish = runner.Runner.post, runner.Runner.finish
        poll = runner.Runner.poll
        migrate = migration_fakes.HeldLiveMigrationDriver.live_migration

        def timed_post(run: Any, move: Any, now: float) -> None:
            at = time.time()
            self.posts[move.step.server] = at
            self.post_times.append(at)
            post(run, move, now)

        def timed_finish(run: Any, move: Any, outcome: Any, *a: Any,
                         **kw: Any) -> None:
            at = time.time()
            if outcome is mig.Outcome.MOVED:
                self.noticed[move.step.server] = at
            self.finishes.append(at)
            finish(run, move, outcome, *a, **kw)

        def timed_poll(run: Any, *a: Any, **kw: Any) -> None:
            self.polls += 1
            poll(run, *a, **kw)

        def timed_migrate(driver: Any, context: Any, instance: Any,
                          dest: str, post_method: Any, *a: Any,
                          **kw: Any) -> None:
            # The hold ends where the fake calls Nova's post_method (the
            # post-migration runs inside driver.live_migration).
            began = time.time()

            def timed_post_method(*pa: Any, **pkw: Any) -> Any:
                self.driver[instance.uuid] = (began, time.time())
                return post_method(*pa, **pkw)

            migrate(driver, context, instance, dest, timed_post_method,
                    *a, **kw)

        for name, new in (("Runner.post", timed_post),
                          ("Runner.finish", timed_finish),
                          ("Runner.poll", timed_poll)):
            case.useFixture(fixtures.MonkeyPatch(
                "nova_drain_filters.migration_runner." + name, new))
        case.useFixture(fixtures.MonkeyPatch(
            "tests.functional.migration_fakes.HeldLiveMigrationDriver."
            "live_migration", timed_migrate))

    def breakdown(self, began: float, ended: float, concurrency: int,
                  records: dict[str, Any]) -> dict[str, float]:
        """Mean seconds per server of each part of a run."""
        def mean(values: list[float]) -> float:
            return statistics.fmean(values) if values else float("nan")

        created = {s: _epoch(r.created_at) for s, r in records.items()}
        done = {s: _epoch(r.updated_at) for s, r in records.items()}
        ordered = sorted(self.post_times)
        gaps = []
        for at in ordered[concurrency:]:
            freed = [f for f in self.finishes if f <= at]
            if freed:
                gaps.append(at - max(freed))
        servers = list(records)
        return {
            "startup": ordered[0] - began,
            "tail": ended - max(self.finishes),
            "to_record": mean([created[s] - self.posts[s]
                                    for s in servers]),
            "to_driver": mean([self.driver[s][0] - created[s]
                                      for s in servers]),
            "driver": mean([self.driver[s][1] - self.driver[s][0]
                            for s in servers]),
            "to_done": mean([done[s] - self.driver[s][1]
                                         for s in servers]),
            "lag": mean([self.noticed[s] - done[s] for s in servers]),
            "lag_max": max(self.noticed[s] - done[s]
                                  for s in servers),
            "slot_gap": mean(gaps),
        }


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
        timeline = Timeline()
        timeline.install(self)
        runs = [(t, c) for t in self.SECONDS for c in self.CONCURRENCY]
        for n, (hold, concurrency) in enumerate(runs):
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
         ("slot_gap", "a slot freed to the next POST"),
         ("tail", "the last move noticed to the shell's exit"))


def report(results: list[dict[str, Any]], servers: int) -> None:
    print(f"{servers} servers on 2 hosts, drained onto 2 others; T: seconds "
          "per live migration in the fake driver")
    print(f"{'T s':>4} {'conc':>4} {'ideal s':>7} {'wall s':>7} {'ratio':>6} "
          f"{'nova s':>7} {'nova/id':>7} {'w/nova':>6} {'req/srv':>7} "
          f"{'polls':>5}")
    for r in results:
        print(f"{r['seconds']:>4g} {r['concurrency']:>4} {r['ideal']:>7.1f} "
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
    print(f"{'T s':>4} {'conc':>4} " + " ".join(f"{p:>9}" for p, _ in PARTS))
    for r in results:
        print(f"{r['seconds']:>4g} {r['concurrency']:>4} " + " ".join(
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
    args = parser.parse_args(argv)
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
