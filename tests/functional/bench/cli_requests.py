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

"""How many requests ``openstack drain orphan list``, ``stale list`` and
``report`` send.

Inside Nova's in-process harness (real API, conductor, scheduler and
placement; fake virt driver ``fake.FakeDriver``) it builds a cloud of N
compute hosts (N resource providers), boots servers with multi-create until
the cloud holds M allocations, makes K of them orphans (the servers are
deleted while the allocation removal fails, as when placement is unreachable
at that moment) and forces one host down (S = 1 stale compute node). Then it
runs the real ``openstack`` shell in-process (``tests/functional/
cli_harness.py``) and counts the requests each command sends by wrapping
``nova_drain_filters.clients.http.ServiceClient._send``, which every request
goes through (the version check included), for the duration of the run, per
service. Each figure is compared with the formula::

    nova pages(n) = n // page size + 1   (a full page has a "next" link)
    every command  1 version document per service it talks to
    orphan list   nova:      pages(N) + pages(servers) + pages(migrations)
                  placement: 1 provider list + N allocation reads + K
                             consumer reads (one per orphaned consumer)
    stale list    nova:      pages(N) + 1 services + pages(servers)
                             + pages(migrations)
                  placement: 2 provider lists + S allocation reads (one per
                             stale provider, none for a healthy one)
    report        nova:      as stale list
                  placement: 1 provider list + 1 trait check + 1 provider
                             list per forbidden trait placement knows (T);
                             nothing per host or provider

Every cloud is measured with the real page size (1000) and with a page size
of 10, which shows the server pages growing with servers. Two cross-checks
ride along: the plugin's own ``DrainClient.requests`` counter and the HTTP
requests the CLI's keystoneauth session sent (version discovery or retries
would show up there).

Run from the repository root::

    tools/bench.sh cli_requests

It prints figures and asserts nothing about time. Exit 1 if a measured count
differs from the formula, a cross-check disagrees, the commands did not find
the K orphans and S stale records, or the harness failed.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

from tests.functional import harness_run
from tests.functional.bench.cli_requests_case import ALLOCATIONS
from tests.functional.bench.cli_requests_case import COMMANDS
from tests.functional.bench.cli_requests_case import PROVIDERS
from tests.functional.bench.cli_requests_case import SERVICES
from tests.functional.bench.cli_requests_case import Measure
from tests.functional.bench.cli_requests_case import Run
from tests.functional.bench.cli_requests_case import build_case


def run_harness(providers: int, run: Run) -> str | None:
    """Run one cloud's measurements quietly; return None, or a one-line error."""
    return harness_run.run_quietly(
        build_case(providers, run),
        lambda: run.stdlog.logger.output if run.stdlog else "")


def _by(measures: Sequence[Measure], command: str,
        page_size: int) -> dict[tuple[int, int], Measure]:
    return {(m.cloud.providers, m.cloud.allocations): m for m in measures
            if m.command == command and m.page_size == page_size}


def _delta(lo: Measure, hi: Measure) -> str:
    """``+15: nova +0, placement +15`` (ironic when it sent any)."""
    parts = [f"{s} {hi.counted.get(s, 0) - lo.counted.get(s, 0):+d}"
             for s in SERVICES if s != "ironic" or hi.counted.get(s)]
    return f"{hi.total - lo.total:+d}: " + ", ".join(parts)


def report(run: Run, out: TextIO) -> list[str]:
    """Print the table and the ratios; return the smoke-check problems."""
    def say(text: str = "") -> None:
        print(text, file=out)

    say("Requests per command run (K orphaned allocations, S stale compute "
        "nodes;\nplac = placement, iron = ironic; naive = the formula plus one "
        "GET per consumer,\ni.e. + M; client = DrainClient.requests; wire = "
        "HTTP requests of the CLI's\nkeystoneauth session; rows = orphans "
        "or stale records listed):")
    head = (f"{'N':>3} {'M':>4} {'K':>2} {'S':>2}  {'command':<12} {'page':>4}  "
            f"{'nova':>4} {'plac':>4} {'iron':>4} {'total':>5}  {'formula':>7}  "
            f"{'naive':>5}  {'client':>6} {'wire':>4}  {'rows':>4} {'secs':>5}")
    say(head)
    say("-" * len(head))
    for m in run.measures:
        c = m.cloud
        formula = m.predicted_total
        mark = "" if not m.problems() else "  <-- differs"
        say(f"{c.providers:>3} {c.allocations:>4} {c.orphans:>2} {c.stale:>2}  "
            f"{m.command:<12} {m.page_size:>4}  "
            f"{m.counted.get('nova', 0):>4} {m.counted.get('placement', 0):>4} "
            f"{m.counted.get('ironic', 0):>4} {m.total:>5}  {formula:>7}  "
            f"{m.naive:>5}  {m.client_requests:>6} {m.wire:>4}  "
            f"{m.found:>4} {m.seconds:>5.2f}{mark}")
    say()
    say("Formula: 1 version document per service, nova pages(n) = n // page "
        "+ 1 for\nhypervisors (N), servers (M - K) and migrations (0), plus 1 "
        "GET /os-services for\nstale list and report; placement: orphan "
        "list 1 provider list + N allocation\nreads + K consumer reads, "
        "stale list 2 provider lists + S allocation reads,\nreport 1 "
        "provider list + 1 trait check + T provider lists (T known "
        "forbidden\ntraits); the report's count does not grow with N.")
    for page_size in sorted({m.page_size for m in run.measures}, reverse=True):
        for command in (" ".join(c) for c in COMMANDS):
            by = _by(run.measures, command, page_size)
            say(f"\n{command}, page size {page_size}:")
            for n in PROVIDERS:
                lo, hi = by.get((n, ALLOCATIONS[0])), by.get((n, ALLOCATIONS[-1]))
                if lo and hi:
                    say(f"  N={n:<3} M {ALLOCATIONS[0]} -> {ALLOCATIONS[-1]}: "
                        f"{lo.total} -> {hi.total} requests "
                        f"({_delta(lo, hi)}; naive "
                        f"{lo.naive} -> {hi.naive}, "
                        f"{hi.naive - lo.naive:+d}; ratio "
                        f"{hi.total / lo.total:.2f} for "
                        f"{ALLOCATIONS[-1] / ALLOCATIONS[0]:.0f}x allocations)")
            for m_ in ALLOCATIONS:
                lo, hi = by.get((PROVIDERS[0], m_)), by.get((PROVIDERS[-1], m_))
                if lo and hi:
                    say(f"  M={m_:<3} N {PROVIDERS[0]} -> {PROVIDERS[-1]}: "
                        f"{lo.total} -> {hi.total} requests "
                        f"({_delta(lo, hi)}; N grew by "
                        f"{PROVIDERS[-1] - PROVIDERS[0]})")
    problems = [p for m in run.measures for p in m.problems()]
    expected = len(PROVIDERS) * len(ALLOCATIONS) * 2 * len(COMMANDS)
    if len(run.measures) != expected:
        problems.append(f"{len(run.measures)} command runs measured, "
                        f"expected {expected}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Measure every cloud; 0 if all counts match the formula, 1 if not."""
    parser = harness_run.Parser(prog="bench.sh cli_requests",
                    description=(__doc__ or "").splitlines()[0])
    parser.parse_args(argv)
    out = sys.stdout  # the harness may capture output; report after it
    started = time.monotonic()
    run = Run()
    errors = []
    for providers in PROVIDERS:
        error = run_harness(providers, run)
        if error:
            errors.append(f"N={providers}: the Nova harness failed: {error}")
    problems = report(run, out)
    setup = ", ".join(f"N={n} {s:.1f}s" for n, s in run.setup_seconds.items())
    print(f"\nHarness set-up: {setup}; whole run "
          f"{time.monotonic() - started:.1f}s", file=out)
    for problem in errors + problems:
        print(f"SMOKE CHECK FAILED: {problem}", file=out)
    return 1 if errors or problems else 0


if __name__ == "__main__":
    sys.exit(main())
