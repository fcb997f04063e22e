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

"""``openstack drain orphan list`` and ``nova-manage placement audit``, timed
side by side on the same cloud.

Inside Nova's in-process harness (real API, conductor, scheduler, placement)
one compute service fronts many nodes, as an Ironic nova-compute does; each
node is a root provider with a child offering ``CUSTOM_MAGIC`` (the shape of
Nova's ``MediumFakeDriverWithNestedCustomResources``); Nova's compute
service makes the records and providers. Two servers are booted through the
API as templates; the others are recorded the way Nova records a booted
server (the instance copied from a template, its mapping, its allocations),
because booting 2,000 through the scheduler takes far more than 10 minutes
on 2 cores. Two in three also hold ``CUSTOM_MAGIC``. Some are deleted as
Nova leaves them when the allocation removal fails (orphans), and one node
holding orphans is deleted (Nova drops its record, its provider stays;
``nova/compute/manager.py`` ``update_available_resource``). The cloud is then
grown to the next size, and at each size both tools run ``--repeat`` times,
alternately, and the median is reported:

* ours: the real ``openstack`` shell in-process (``tests/functional/
  cli_harness.py``), ``drain orphan list -f json``, the same with
  ``--nova-config`` (Nova's side read from the cell databases, as the
  audit reads it; the harness's configuration is the one this process has
  loaded), and the engine ``orphans.gather`` called in-process as the
  audit is (no shell start-up);
* the audit: Nova's own ``PlacementCommands.audit(verbose=True)``
  (``nova/cmd/manage.py``), in-process against the same databases and
  placement, its findings parsed from its verbose output.

Each size is measured twice: with placement in-process, as Nova's harness
serves it (wsgi-intercept: every request runs in this process under one
GIL, so requests in flight gain nothing), then with placement served by a
real pre-forking WSGI server with ``--placement-workers`` processes on
loopback, on a copy of the same database, for both tools, as a cloud
serves it (uWSGI or mod_wsgi processes).

For each: wall time, HTTP requests (Nova API and placement), SQL statements
run by the in-process services, findings, and whether ours is a superset of
the audit's. Then the ratio (audit time / ours) and how each grows from the
smallest size to the largest. Nothing is asserted about time.

Run from the repository root::

    tools/bench.sh orphans [--sizes 30,120] [--repeat 3] [--placement-workers 2]

Exit 1 if ours misses an audit finding, or the harness failed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from tests.functional import harness_run
from tests.functional.bench import orphans_reads
from tests.functional.bench.orphans_case import AUDIT
from tests.functional.bench.orphans_case import ENGINE
from tests.functional.bench.orphans_case import OURS
from tests.functional.bench.orphans_case import OURS_DB
from tests.functional.bench.orphans_case import SERVER
from tests.functional.bench.orphans_case import SIZES
from tests.functional.bench.orphans_case import WHERE_TEXT
from tests.functional.bench.orphans_case import Measure
from tests.functional.bench.orphans_case import Run
from tests.functional.bench.orphans_case import build_case

#: Seconds the harness lets the whole run take (``harness_run``). Its
#: default, 600, is less than ``--sizes 60,240`` takes in both placement
#: modes on a 2-core machine (617 s on 2026-12-06), and the run then ended
#: on a 500 from Nova's API in the middle of the last reads.
TIMEOUT = 3600


def _median(measures: list[Measure], tool: str, nodes: int,
            where: str) -> Measure | None:
    mine = [m for m in measures
            if m.tool == tool and m.nodes == nodes and m.where == where]
    if not mine:
        return None
    middle = statistics.median_low([m.seconds for m in mine])
    return next(m for m in mine if m.seconds == middle)


def report(run: Run, sizes: tuple[int, ...], out: Any) -> list[str]:
    """Print the tables; return the problems (missed audit findings)."""
    def say(text: str = "") -> None:
        print(text, file=out)

    problems = []
    head = (f"{'nodes':>5} {'RPs':>4} {'allocs':>6}  {'tool':<17} "
            f"{'wall s':>7} {'api':>5} {'plac':>5} {'sql':>6} "
            f"{'found':>5}  {'notes'}")
    say("Median of the runs at each size (api = Nova API requests, plac = "
        "placement\nrequests, sql = SQL statements the in-process services "
        "ran, found =\n(consumer, provider) pairs reported):")
    for where in dict.fromkeys(m.where for m in run.measures):
        say()
        say(f"Placement {WHERE_TEXT.get(where.split()[0], where)}"
            + (f", {where.split()[1][1:]} worker processes"
               if where.startswith(SERVER) else "") + ":")
        say(head)
        say("-" * len(head))
        for nodes in sizes:
            audit = _median(run.measures, AUDIT, nodes, where)
            if not audit:
                continue
            rows = [(audit, "")]
            for tool in (OURS, OURS_DB, ENGINE):
                m = _median(run.measures, tool, nodes, where)
                if not m:
                    continue
                missed = audit.found - m.found
                rows.append((m, (
                    f"superset: {'yes' if not missed else 'NO'}, "
                    f"+{len(m.found - audit.found)} the audit does not "
                    f"report; audit/ours {audit.seconds / m.seconds:.1f}x")))
                if missed:
                    problems.append(f"nodes={nodes} ({where}): {tool} misses "
                                    f"{len(missed)} audit finding(s): "
                                    f"{sorted(missed)[:3]}")
            for m, note in rows:
                say(f"{m.nodes:>5} {m.providers:>4} {m.allocations:>6}  "
                    f"{m.tool:<17} {m.seconds:>7.2f} {m.api:>5} "
                    f"{m.placement:>5} {m.sql:>6} {len(m.found):>5}  {note}")
        lo, hi = sizes[0], sizes[-1]
        for tool in (OURS, OURS_DB, ENGINE, AUDIT):
            a = _median(run.measures, tool, lo, where)
            b = _median(run.measures, tool, hi, where)
            if a and b and lo != hi:
                say(f"  {tool}: {a.seconds:.2f}s -> {b.seconds:.2f}s "
                    f"({b.seconds / a.seconds:.1f}x) for {a.providers} -> "
                    f"{b.providers} providers, {a.allocations} -> "
                    f"{b.allocations} allocations; requests "
                    f"{a.api + a.placement} -> {b.api + b.placement}")
    reads_table(run, sizes, say)
    build = ", ".join(f"{n} nodes +{s:.0f}s" for n, s in
                      run.build_seconds.items())
    say()
    say(f"Cloud built in: {build} ({'; '.join(run.notes)})")
    return problems


def reads_table(run: Run, sizes: tuple[int, ...], say: Any) -> None:
    """Each read alone, median seconds and requests, against the audit."""
    for where in dict.fromkeys(w for w, _, _ in run.reads):
        say()
        say(f"Each read alone, placement {where} (median wall s, this "
            f"process's CPU s,\nrequests; audit wall / read wall):")
        for nodes in sizes:
            audit = _median(run.measures, AUDIT, nodes, where)
            say(f"  {nodes} nodes"
                + (f", audit {audit.seconds:.2f}s:" if audit else ":"))
            for read in orphans_reads.ORDER:
                runs = run.reads.get((where, nodes, read))
                if not runs:
                    continue
                seconds = statistics.median_low(s for s, _, _ in runs)
                cpu = statistics.median_low(c for _, c, _ in runs)
                requests = max(n for _, _, n in runs)
                ratio = (f"  {audit.seconds / seconds:5.1f}x"
                         if audit and seconds else "")
                say(f"    {read:<38} {seconds:>6.2f}s {cpu:>6.2f}s "
                    f"{requests:>5}{ratio}")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted(int(s) for s in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sizes {text!r}: comma-separated node counts") from None
    if not sizes or sizes[0] < 2:
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: at least 2 nodes")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = harness_run.Parser(prog="bench.sh orphans",
                    description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default=SIZES,
                        help="node counts, e.g. 30,120 (2 providers each)")
    parser.add_argument("--placement-workers", type=int, default=2,
                        choices=range(0, 17), metavar="0..16",
                        help="also time both tools against placement served "
                             "by this many worker processes (0: in-process "
                             "only)")
    parser.add_argument("--repeat", type=int, default=3,
                        choices=range(1, 11), metavar="1..10",
                        help="runs of each tool per size (median shown)")
    args = parser.parse_args(argv)
    out = sys.stdout
    started = time.monotonic()
    run = Run()
    error = harness_run.run_quietly(
        build_case(args.sizes, args.repeat, args.placement_workers, run),
        lambda: run.stdlog.logger.output if run.stdlog else "",
        timeout=TIMEOUT)
    problems = report(run, args.sizes, out)
    print(f"Whole run {time.monotonic() - started:.0f}s", file=out)
    if error:
        problems.append(f"the Nova harness failed: {error}")
    for problem in problems:
        print(f"FAILED: {problem}", file=out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
