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

"""How many requests ``openstack drain orphan list`` and ``stale list`` send.

Inside Nova's in-process harness (real API, conductor, scheduler and
placement; fake virt driver ``fake.FakeDriver``) it builds a cloud of N
compute hosts (N resource providers), boots servers with multi-create until
the cloud holds M allocations, makes K of them orphans (the servers are
deleted while the allocation removal fails, as when placement is unreachable
at that moment) and forces one host down (S = 1 stale compute node). Then it
runs the real ``openstack`` shell in-process (``tests/functional/
cli_harness.py``) and counts the requests each command sends by wrapping
``nova_drain_filters.clients.http.ServiceClient.request`` for the duration of the
run, per service. Each figure is compared with the formula::

    nova pages(n) = n // page size + 1   (a full page has a "next" link)
    orphan list   nova:      pages(N) + pages(servers) + pages(migrations)
                  placement: 1 provider list + N allocation reads + K
                             consumer reads (one per orphaned consumer)
    stale list    nova:      pages(N) + 1 services + pages(servers)
                             + pages(migrations)
                  placement: 2 provider lists + S allocation reads (one per
                             stale provider, none for a healthy one)

Every cloud is measured with the real page size (1000) and with a page size
of 10, which shows the server pages growing with servers. Two cross-checks
ride along: the plugin's own ``DrainClient.requests`` counter and the HTTP
requests the CLI's keystoneauth session sent (version discovery or retries
would show up there).

Run from the repository root::

    OS_WSGI__API_PASTE_CONFIG=$PWD/.venv/etc/nova/api-paste.ini \\
        .venv/bin/python tools/bench_cli_requests.py

It prints figures and asserts nothing about time. Exit 1 if a measured count
differs from the formula, a cross-check disagrees, the commands did not find
the K orphans and S stale records, or the harness failed.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import logging
import sys
import threading
import time
import unittest
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import NoReturn
from typing import TextIO

import harness_run  # tools/, on sys.path when run as a script

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Compute hosts (= resource providers) of the clouds built, one cloud each.
PROVIDERS = (5, 20)
#: Allocations held in each cloud, in increasing order (servers are added).
ALLOCATIONS = (20, 100)
#: Orphaned allocations made in each cloud.
ORPHANS = 3
#: Hosts forced down in each cloud: each is one stale compute node.
STALE = 1
#: A small page size, to see the server pages grow with servers.
SMALL_PAGE = 10
#: Nova's own max_limit; compute.PAGE_SIZE asks for exactly this.
REAL_PAGE = 1000
SERVICES = ("nova", "placement", "ironic")
COMMANDS = (("orphan", "list"), ("stale", "list"))


def pages(items: int, page_size: int) -> int:
    """Requests to list ``items``: Nova adds a "next" link to a full page."""
    return items // page_size + 1


@dataclasses.dataclass(frozen=True)
class Cloud:
    """What the cloud holds when a command runs."""

    providers: int
    allocations: int
    orphans: int
    stale: int
    migrations: int = 0

    @property
    def servers(self) -> int:
        """Servers Nova lists: an orphan's server is deleted."""
        return self.allocations - self.orphans


def predict(command: str, cloud: Cloud, page_size: int) -> dict[str, int]:
    """Requests per service the formula gives for one command."""
    nova = (pages(cloud.providers, page_size) + pages(cloud.servers, page_size)
            + pages(cloud.migrations, page_size))
    if command == "orphan list":
        placement = 1 + cloud.providers + cloud.orphans
    else:
        nova += 1  # GET /os-services (not paginated)
        placement = 2 + cloud.stale
    return {"nova": nova, "placement": placement, "ironic": 0}


@dataclasses.dataclass
class Measure:
    """One command run: its requests and what it found."""

    command: str
    cloud: Cloud
    page_size: int
    counted: dict[str, int]
    client_requests: int
    wire: int
    found: int
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.counted.values())

    @property
    def predicted(self) -> dict[str, int]:
        return predict(self.command, self.cloud, self.page_size)

    @property
    def predicted_total(self) -> int:
        return sum(self.predicted.values())

    @property
    def naive(self) -> int:
        """The same, plus one GET per consumer (allocation)."""
        return self.predicted_total + self.cloud.allocations

    @property
    def expected_found(self) -> int:
        return (self.cloud.orphans if self.command == "orphan list"
                else self.cloud.stale)

    def problems(self) -> list[str]:
        """How this run differs from the formula and the cross-checks."""
        where = (f"{self.command} N={self.cloud.providers} "
                 f"M={self.cloud.allocations} page={self.page_size}")
        found = []
        for service in SERVICES:
            got, want = self.counted.get(service, 0), self.predicted[service]
            if got != want:
                found.append(f"{where}: {service} sent {got} requests, "
                             f"the formula says {want}")
        if self.client_requests != self.total:
            found.append(f"{where}: DrainClient.requests is "
                         f"{self.client_requests}, counted {self.total}")
        if self.wire != self.total:
            found.append(f"{where}: the CLI session sent {self.wire} HTTP "
                         f"requests, ServiceClient.request counted {self.total}")
        if self.found != self.expected_found:
            found.append(f"{where}: listed {self.found} rows, expected "
                         f"{self.expected_found}")
        return found


@dataclasses.dataclass
class Run:
    """What the harness runs gathered for the report."""

    measures: list[Measure] = dataclasses.field(default_factory=list)
    setup_seconds: dict[int, float] = dataclasses.field(default_factory=dict)
    stdlog: Any = None  # the last harness's log capture (nova StandardLogging)


class Counter:
    """Requests sent during one CLI run, counted at three places."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_service: collections.Counter[str] = collections.Counter()
        self.wire = 0
        self.clients: dict[int, Any] = {}

    def counting_request(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap ``ServiceClient.request``: one count per call, per service."""
        def request(client: Any, *args: Any, **kwargs: Any) -> Any:
            with self.lock:  # allocation reads run on a thread pool
                self.by_service[client.service] += 1
            return original(client, *args, **kwargs)
        return request

    def counting_session(self, original: Callable[..., Any],
                         auth_type: type) -> Callable[..., Any]:
        """Wrap keystoneauth's ``Session.request``: the CLI's session only.

        The in-process Nova services talk to placement through sessions of
        their own; only the CLI's carries the harness auth plugin.
        """
        def request(session: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(kwargs.get("auth") or session.auth, auth_type):
                with self.lock:
                    self.wire += 1
            return original(session, *args, **kwargs)
        return request

    def capturing_client(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap ``common.drain_client`` to read ``DrainClient.requests`` after."""
        def drain_client(app: Any) -> Any:
            client = original(app)
            self.clients[id(client)] = client
            return client
        return drain_client

    @property
    def client_requests(self) -> int:
        return sum(c.requests for c in self.clients.values())


def build_case(providers: int, run: Run) -> unittest.TestCase:
    """Import Nova's harness; return one test measuring a cloud of N hosts."""
    import importlib

    # Nova's harness monkey-patches eventlet on import; let it go first.
    importlib.import_module("nova.tests.functional")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import fixtures
    from keystoneauth1 import session as ks_session

    from nova_drain_filters.clients import compute
    from nova_drain_filters.clients import http
    from osc_plugin.v1 import common
    from tests.functional import cli_harness

    # nova/test.py runs oslo_log's setup on import, adding a stdout handler;
    # what is logged outside the harness's capture (clean-up) goes nowhere.
    logging.getLogger().handlers[:] = [logging.NullHandler()]

    class BenchCliRequests(cli_harness.CliTestBase):
        """N computes; servers added in batches; measure after each."""

        HOSTS = tuple(f"cmp{i:03d}" for i in range(1, providers + 1))
        COMPUTE_DRIVER = "fake.FakeDriver"

        def setUp(self) -> None:
            started = time.monotonic()
            try:
                super().setUp()
            finally:  # Nova's clean-up deletes self.stdlog
                run.stdlog = getattr(self, "stdlog", None)
            run.setup_seconds[providers] = time.monotonic() - started

        def test_requests(self) -> None:
            booted = orphans = stale = 0
            for allocations in ALLOCATIONS:
                self.boot_many(allocations - booted)
                booted = allocations
                if not orphans:
                    self.make_orphans(ORPHANS)
                    orphans = ORPHANS
                if not stale:
                    for host in self.HOSTS[-STALE:]:
                        self.admin_api.put_service_force_down(
                            self.service_id(host), True)
                    stale = STALE
                cloud = Cloud(providers, allocations, orphans, stale)
                self.check_cloud(cloud)
                for page_size in (compute.PAGE_SIZE, SMALL_PAGE):
                    for command in COMMANDS:
                        run.measures.append(
                            self.measure(command, cloud, page_size))

        def boot_many(self, count: int) -> None:
            """Boot ``count`` servers in one multi-create request."""
            body = self._build_server(networks="none")
            body.update(min_count=count, max_count=count)
            self.api.post_server({"server": body})
            for _ in range(300):  # builds are synchronous (CastAsCall)
                building = [s for s in self.admin_api.get_servers()
                            if s["status"] == "BUILD"]
                if not building:
                    break
                time.sleep(0.1)
            bad = [s["id"] for s in self.admin_api.get_servers()
                   if s["status"] != "ACTIVE"]
            self.assertEqual([], bad, "servers not ACTIVE")

        def make_orphans(self, count: int) -> None:
            """Delete servers while their allocation removal fails."""
            doomed = self.admin_api.get_servers()[:count]
            with fixtures.MockPatch(
                    "nova.scheduler.client.report.SchedulerReportClient."
                    "delete_allocation_for_instance", return_value=False):
                for server in doomed:
                    self._delete_server(server)

        def check_cloud(self, cloud: Cloud) -> None:
            """The cloud holds what the formula is given, or the test fails."""
            hypervisors = self.admin_api.api_get(
                "/os-hypervisors/detail").body["hypervisors"]
            servers = self.admin_api.get_servers()
            rps = self.placement.get("/resource_providers",
                                     version="1.14").body["resource_providers"]
            held = sum(len(self.placement.get(
                f"/resource_providers/{rp['uuid']}/allocations",
                version="1.0").body["allocations"]) for rp in rps)
            self.assertEqual(
                (cloud.providers, cloud.providers, cloud.servers,
                 cloud.allocations),
                (len(hypervisors), len(rps), len(servers), held),
                "(hypervisors, providers, servers, allocations)")

        def measure(self, argv: Sequence[str], cloud: Cloud,
                    page_size: int) -> Measure:
            counter = Counter()
            with contextlib.ExitStack() as stack:
                stack.enter_context(fixtures.MonkeyPatch(
                    "nova_drain_filters.clients.compute.PAGE_SIZE", page_size))
                stack.enter_context(fixtures.MonkeyPatch(
                    "nova_drain_filters.clients.http.ServiceClient.request",
                    counter.counting_request(http.ServiceClient.request)))
                stack.enter_context(fixtures.MonkeyPatch(
                    "keystoneauth1.session.Session.request",
                    counter.counting_session(ks_session.Session.request,
                                             cli_harness.HarnessAuth)))
                stack.enter_context(fixtures.MonkeyPatch(
                    "osc_plugin.v1.common.drain_client",
                    counter.capturing_client(common.drain_client)))
                started = time.monotonic()
                rows = self.cli_json("drain", *argv)
                seconds = time.monotonic() - started
            return Measure(" ".join(argv), cloud, page_size,
                           dict(counter.by_service), counter.client_requests,
                           counter.wire, len(rows), seconds)

    return BenchCliRequests("test_requests")


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
    say("Formula: nova pages(n) = n // page + 1 for hypervisors (N), servers "
        "(M - K) and\nmigrations (0), plus 1 GET /os-services for stale list; "
        "placement: orphan list\n1 provider list + N allocation reads + K "
        "consumer reads, stale list 2 provider\nlists + S allocation reads.")
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


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Measure every cloud; 0 if all counts match the formula, 1 if not."""
    parser = Parser(prog="bench_cli_requests.py",
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
