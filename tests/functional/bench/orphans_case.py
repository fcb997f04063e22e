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

"""The ``orphans`` benchmark's Nova harness case: at each size of the
cloud it grows, both tools timed side by side (see that module for why)."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fixtures
import sqlalchemy
from keystoneauth1 import session as ks_session
from nova.cmd import manage
from nova.scheduler.client import report
from placement import db_api

from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import orphans
from nova_drain_filters.clients import http
from osc_plugin import client as osc_client
from tests.functional.bench import orphans_build
from tests.functional.bench import orphans_reads
from tests.functional.services import placement_server

#: Nodes of the clouds measured (each is 2 providers: root and child).
SIZES = (30, 120)
IN_PROCESS = "in-process"
SERVER = "server"
WHERE_TEXT = {
    IN_PROCESS: "in-process (Nova's harness: wsgi-intercept, one GIL; "
                "requests in flight gain nothing)",
    SERVER: "as a real pre-forking WSGI server on loopback (a copy of the "
            "same database)",
}
OURS = "drain orphan list"
OURS_DB = "... --nova-config"
ENGINE = "orphans.gather"
AUDIT = "placement audit"
AUDIT_ROW = re.compile(r"Allocations for consumer UUID (\S+) on Resource "
                       r"Provider (\S+) can be deleted")
#: What --nova-config names in the bench: the harness's own configuration.
HARNESS_CONF = "<nova harness>"
REMOVAL_FAILS = ("nova.scheduler.client.report.SchedulerReportClient."
                 "delete_allocation_for_instance")


@dataclasses.dataclass
class Measure:
    """One run of one tool on one cloud."""

    tool: str
    nodes: int
    providers: int
    allocations: int
    seconds: float
    api: int
    placement: int
    sql: int
    found: set[tuple[str, str]]
    where: str = ""


@dataclasses.dataclass
class Run:
    measures: list[Measure] = dataclasses.field(default_factory=list)
    build_seconds: dict[int, float] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    stdlog: Any = None
    #: {(where, nodes, read): [(wall s, CPU s, requests) of each run]}
    reads: dict[tuple[str, int, str], list[tuple[float, float, int]]] = (
        dataclasses.field(default_factory=dict))


class Counter:
    """Requests and SQL statements while one tool runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()

    def add(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def wrap(self, what: str,
             original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.add(what if what != "ours" else args[0].service)
            return original(*args, **kwargs)
        return counted


class BenchOrphans(orphans_build.GrowingCloud):
    """At each size, both tools timed side by side (``measure_all``)."""

    #: Set by build_case before the case runs.
    repeat: int
    workers: int
    results: Run

    def setUp(self) -> None:
        try:
            super().setUp()
        finally:
            self.results.stdlog = getattr(self, "stdlog", None)

    def test_bench(self) -> None:
        for nodes in self.sizes:
            started = time.monotonic()
            self.results.notes.append(self.grow(nodes))
            self.results.build_seconds[nodes] = time.monotonic() - started
            providers, allocations = self.held()
            self.measure_all(IN_PROCESS, nodes, providers, allocations)
            if self.workers:
                with self.real_placement(self.workers):
                    self.measure_all(f"{SERVER} x{self.workers}", nodes,
                                     providers, allocations)

    def measure_all(self, where: str, nodes: int, providers: int,
                    allocations: int) -> None:
        for _ in range(self.repeat):
            for measure in (
                    self.measure_ours(nodes, providers, allocations),
                    self.measure_ours(nodes, providers, allocations,
                                      nova_db=True),
                    self.measure_engine(nodes, providers, allocations),
                    self.measure_audit(nodes, providers, allocations)):
                self.results.measures.append(
                    dataclasses.replace(measure, where=where))
            self.measure_reads(where, nodes)

    def measure_reads(self, where: str, nodes: int) -> None:
        """Each read alone (``orphans_reads``), on the CLI's catalog."""
        client = osc_client.DrainClient(
            ks_session.Session(auth=self.cli_auth))
        counter = Counter()
        with self.counting(counter):
            found = orphans_reads.time_reads(
                client, lambda: counter.counts["nova"]
                + counter.counts["placement"])
        for read, figures in found.items():
            self.results.reads.setdefault((where, nodes, read),
                                          []).append(figures)

    @contextlib.contextmanager
    def real_placement(self, workers: int) -> Iterator[None]:
        """Placement served by a real pre-forking WSGI server with
        ``workers`` processes, on a copy of this cloud's placement
        database, for both tools: Nova's report client (the fixture's
        ``endpoint``, ``nova/tests/functional/fixtures.py``) and ours
        (the CLI's catalog)."""
        folder = Path(tempfile.mkdtemp(prefix="bench-placement-"))
        copy = sqlite3.connect(folder / "placement.db")
        raw = db_api.get_placement_engine().raw_connection()
        try:
            raw.driver_connection.backup(copy)
        finally:
            raw.close()
            copy.close()
        server = placement_server.PlacementServer(
            database=folder / "placement.db", workers=workers)
        fixture = ndf_fixtures.placement_fixture(self)
        before = (fixture.endpoint, self.cli_auth.endpoints["placement"])
        server.start()
        try:
            fixture.endpoint = server.url
            self.cli_auth.endpoints["placement"] = server.url
            yield
        finally:
            fixture.endpoint, self.cli_auth.endpoints["placement"] = before
            server.stop()
            shutil.rmtree(folder, ignore_errors=True)
    @contextlib.contextmanager
    def counting(self, counter: Counter) -> Iterator[None]:
        engine_cls = sqlalchemy.engine.Engine

        def statement(*_args: Any, **_kwargs: Any) -> None:
            counter.add("sql")

        sqlalchemy.event.listen(engine_cls, "before_cursor_execute",
                                statement)
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(fixtures.MonkeyPatch(
                    "nova_drain_filters.clients.http.ServiceClient."
                    "request", counter.wrap(
                        "ours", http.ServiceClient.request)))
                stack.enter_context(fixtures.MonkeyPatch(
                    "nova.scheduler.client.report.SchedulerReportClient."
                    "get", counter.wrap(
                        "placement",
                        report.SchedulerReportClient.get)))
                yield
        finally:
            sqlalchemy.event.remove(engine_cls, "before_cursor_execute",
                                    statement)

    def measure_ours(self, nodes: int, providers: int,
                     allocations: int, nova_db: bool = False) -> Measure:
        """The real shell; with ``nova_db``, ``--nova-config`` naming
        the harness's configuration, which this process has loaded
        already (as a controller's nova.conf would be parsed)."""
        args = ["drain", "orphan", "list"]
        if nova_db:
            args += ["--nova-config", HARNESS_CONF]
        counter = Counter()
        with self.counting(counter), fixtures.MonkeyPatch(
                "nova_drain_filters.clients.nova_db._loaded",
                HARNESS_CONF):
            started = time.monotonic()
            rows = self.cli_json(*args)
            seconds = time.monotonic() - started
        return Measure(OURS_DB if nova_db else OURS, nodes, providers,
                       allocations,
                       seconds, counter.counts["nova"],
                       counter.counts["placement"], counter.counts["sql"],
                       {(r["Consumer"], r["Resource Provider"])
                        for r in rows})

    def measure_engine(self, nodes: int, providers: int,
                       allocations: int) -> Measure:
        """``orphans.gather`` called in-process, as the audit is: no
        shell start-up (plugin loading, session set-up)."""
        client = osc_client.DrainClient(
            ks_session.Session(auth=self.cli_auth))
        counter = Counter()
        with self.counting(counter):
            started = time.monotonic()
            found = orphans.gather(client.nova, client.placement)
            seconds = time.monotonic() - started
        return Measure(ENGINE, nodes, providers, allocations, seconds,
                       counter.counts["nova"],
                       counter.counts["placement"], counter.counts["sql"],
                       {(o.consumer, o.provider) for o in found})

    def measure_audit(self, nodes: int, providers: int,
                      allocations: int) -> Measure:
        counter = Counter()
        out = io.StringIO()
        with self.counting(counter), contextlib.redirect_stdout(out):
            started = time.monotonic()
            manage.PlacementCommands().audit(verbose=True)
            seconds = time.monotonic() - started
        return Measure(AUDIT, nodes, providers, allocations,
                       seconds, 0, counter.counts["placement"],
                       counter.counts["sql"],
                       set(AUDIT_ROW.findall(out.getvalue())))


def build_case(sizes: tuple[int, ...], repeat: int, workers: int,
               run: Run) -> BenchOrphans:
    """The one test that grows the cloud and measures, into ``run``."""
    case = BenchOrphans("test_bench")
    case.sizes, case.repeat, case.workers, case.results = (sizes, repeat,
                                                       workers, run)
    return case
