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

"""The cloud ``cli_requests`` measures: a Nova harness case, and the
formula each command's requests are compared with (see that module)."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import fixtures
from keystoneauth1 import session as ks_session

from nova_drain_filters import traits
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from osc_plugin.v1 import common
from tests.functional import cli_harness

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
COMMANDS = (("orphan", "list"), ("stale", "list"), ("report",))


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
    #: Of traits.DEFAULT_FORBIDDEN, how many placement knows (the report
    #: lists the providers of each).
    known_traits: int = 0

    @property
    def servers(self) -> int:
        """Servers Nova lists: an orphan's server is deleted."""
        return self.allocations - self.orphans


def predict(command: str, cloud: Cloud, page_size: int) -> dict[str, int]:
    """Requests per service the formula gives for one command."""
    # Each client reads its service's version document once
    # (ServiceClient.check_microversion) before its first request.
    version = 1
    nova = (version + pages(cloud.providers, page_size)
            + pages(cloud.servers, page_size)
            + pages(cloud.migrations, page_size))
    if command == "orphan list":
        placement = version + 1 + cloud.providers + cloud.orphans
    elif command == "stale list":
        nova += 1  # GET /os-services (not paginated)
        placement = version + 2 + cloud.stale
    else:
        nova += 1
        # The provider list, one trait check, a list per known trait.
        placement = version + 2 + cloud.known_traits
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
        if self.command == "report":
            # A row per stale (forced down) host's reason, Schedulable, Total.
            return self.cloud.stale + 2
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
                         f"requests, ServiceClient._send counted {self.total}")
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
        """Wrap ``ServiceClient._send``: one count per request, per service.

        ``_send`` is where every request goes, the version check
        (``check_microversion``) included; ``request`` is not.
        """
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


class BenchCliRequests(cli_harness.CliTestBase):
    """N computes; servers added in batches; measure after each."""

    COMPUTE_DRIVER = "fake.FakeDriver"
    #: Set by build_case before the case runs.
    providers: int
    results: Run

    def setUp(self) -> None:
        run = self.results
        started = time.monotonic()
        try:
            super().setUp()
        finally:  # Nova's clean-up deletes self.stdlog
            run.stdlog = getattr(self, "stdlog", None)
        run.setup_seconds[self.providers] = time.monotonic() - started

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
            cloud = Cloud(self.providers, allocations, orphans, stale,
                          known_traits=self.known_traits())
            self.check_cloud(cloud)
            for page_size in (compute.PAGE_SIZE, SMALL_PAGE):
                for command in COMMANDS:
                    self.results.measures.append(
                        self.measure(command, cloud, page_size))

    def known_traits(self) -> int:
        """How many of the pre-filter's forbidden traits placement knows."""
        names = ",".join(traits.DEFAULT_FORBIDDEN)
        return len(self.placement.get(f"/traits?name=in:{names}",
                                      version="1.6").body["traits"])

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
                "nova_drain_filters.clients.http.ServiceClient._send",
                counter.counting_request(http.ServiceClient._send)))
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


def build_case(providers: int, run: Run) -> BenchCliRequests:
    """The test measuring a cloud of ``providers`` hosts, into ``run``."""
    case = BenchCliRequests("test_requests")
    case.HOSTS = tuple(f"cmp{i:03d}" for i in range(1, providers + 1))
    case.providers = providers
    case.results = run
    return case
