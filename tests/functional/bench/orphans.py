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

    OS_WSGI__API_PASTE_CONFIG=$PWD/.venv/etc/nova/api-paste.ini \\
        .venv/bin/python tools/bench_orphans.py [--sizes 30,120] [--repeat 3] \\
        [--placement-workers 2]

Exit 1 if ours misses an audit finding, or the harness failed.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import io
import re
import shutil
import statistics
import sys
import threading
import time
import types
import unittest
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import NoReturn

import harness_run  # tools/, on sys.path when run as a script

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Nodes of the clouds measured (each is 2 providers: root and child).
SIZES = (30, 120)
#: Servers per node; two in three also hold CUSTOM_MAGIC on the child.
SERVERS_PER_NODE = 10
#: Servers deleted while their allocation removal fails, per 100 servers.
ORPHAN_PERCENT = 2
#: Instance fields copied from a booted template server.
COPIED = ("user_id", "project_id", "image_ref", "vm_state", "power_state",
          "task_state", "flavor", "instance_type_id", "memory_mb", "vcpus",
          "root_gb", "ephemeral_gb", "launched_at", "system_metadata",
          "launch_index", "reservation_id", "availability_zone", "hostname",
          "root_device_name", "config_drive", "locked", "key_name",
          "os_type", "architecture", "vm_mode", "display_description")
MAGIC = "CUSTOM_MAGIC"
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


def node_uuid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"bench-{name}"))


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


def make_driver_module() -> None:
    """``nova.virt.bench_multinode.MultiNodeDriver`` for [DEFAULT]
    compute_driver (``nova/virt/driver.py`` load_compute_driver)."""
    import os_traits
    from nova.virt import fake

    class MultiNodeDriver(fake.FakeDriver):
        """Reports NODES; each root gets a CUSTOM_MAGIC child."""

        NODES: list[str] = []

        def init_host(self, host: str) -> None:
            self._host = host
            self._set_nodes(list(self.NODES))

        def get_available_resource(self, nodename: str) -> dict[str, Any]:
            resources = super().get_available_resource(nodename)
            if resources:
                resources["uuid"] = node_uuid(nodename)
            return resources

        def get_nodenames_by_uuid(self, refresh: bool = False
                                  ) -> dict[str, str]:
            return {node_uuid(n): n for n in self.get_available_nodes()}

        def is_node_deleted(self, nodename: str) -> bool:
            return nodename not in self.get_available_nodes()

        def update_provider_tree(self, provider_tree: Any, nodename: str,
                                 allocations: Any = None) -> None:
            super().update_provider_tree(provider_tree, nodename, allocations)
            child = f"{nodename}-child"
            if not provider_tree.exists(child):
                provider_tree.new_child(name=child, parent=nodename)
            provider_tree.update_inventory(child, {MAGIC: {
                "total": 100, "reserved": 0, "min_unit": 1, "max_unit": 100,
                "step_size": 1, "allocation_ratio": 1.0}})
            provider_tree.add_traits(child, os_traits.OWNER_NOVA)

    module = types.ModuleType("nova.virt.bench_multinode")
    module.MultiNodeDriver = MultiNodeDriver  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module


def build_case(sizes: tuple[int, ...], repeat: int, workers: int,
               run: Run) -> unittest.TestCase:
    import importlib

    importlib.import_module("nova.tests.functional")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import fixtures
    import sqlalchemy
    from keystoneauth1 import session as ks_session
    from nova import context as nova_context
    from nova import objects
    from nova.cmd import manage
    from nova.network import model as network_model
    from nova.scheduler.client import report

    from nova_drain_filters import nova_compat
    from nova_drain_filters import orphans
    from nova_drain_filters.clients import http
    from osc_plugin import client as osc_client
    from tests.functional import cli_harness
    from tests.functional.services import placement_server

    make_driver_module()
    driver = sys.modules["nova.virt.bench_multinode"].MultiNodeDriver

    class BenchOrphans(cli_harness.CliTestBase):
        HOSTS = ("bench",)
        COMPUTE_DRIVER = "bench_multinode.MultiNodeDriver"
        DRAIN = False  # the scheduler as Nova ships it; only listing matters

        def setUp(self) -> None:
            driver.NODES = [f"n{i:04d}" for i in range(sizes[0])]
            try:
                super().setUp()
            finally:
                run.stdlog = getattr(self, "stdlog", None)
            self.flags(max_placement_results=5000, group="scheduler")
            self.plain = self._create_flavor(memory_mb=1, vcpu=1, disk=0,
                                             ephemeral=0)
            self.magic = self._create_flavor(
                memory_mb=1, vcpu=1, disk=0, ephemeral=0,
                extra_spec={f"resources:{MAGIC}": "1"})
            self.templates: list[dict] = []
            self.facts: dict[str, tuple[Any, dict]] = {}

        def test_bench(self) -> None:
            for nodes in sizes:
                started = time.monotonic()
                self.grow(nodes)
                run.build_seconds[nodes] = time.monotonic() - started
                providers, allocations = self.held()
                self.measure_all(IN_PROCESS, nodes, providers, allocations)
                if workers:
                    with self.real_placement(workers):
                        self.measure_all(f"{SERVER} x{workers}", nodes,
                                         providers, allocations)

        def measure_all(self, where: str, nodes: int, providers: int,
                        allocations: int) -> None:
            for _ in range(repeat):
                for measure in (
                        self.measure_ours(nodes, providers, allocations),
                        self.measure_ours(nodes, providers, allocations,
                                          nova_db=True),
                        self.measure_engine(nodes, providers, allocations),
                        self.measure_audit(nodes, providers, allocations)):
                    run.measures.append(dataclasses.replace(measure,
                                                            where=where))

        @contextlib.contextmanager
        def real_placement(self, workers: int) -> Iterator[None]:
            """Placement served by a real pre-forking WSGI server with
            ``workers`` processes, on a copy of this cloud's placement
            database, for both tools: Nova's report client (the fixture's
            ``endpoint``, ``nova/tests/functional/fixtures.py``) and ours
            (the CLI's catalog)."""
            import sqlite3
            import tempfile

            from placement import db_api
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
            fixture = nova_compat.placement_fixture(self)
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

        def grow(self, nodes: int) -> None:
            compute = self.computes["bench"]
            names = [f"n{i:04d}" for i in range(nodes)]
            if compute.driver.get_available_nodes() != names:
                compute.driver._set_nodes(names)
                self._run_periodics()
            rps = self.placement.get("/resource_providers",
                                     version="1.14").body["resource_providers"]
            self.rp = {p["name"]: p["uuid"] for p in rps}
            if not self.templates:
                self.templates = [self._create_server(
                    flavor_id=f, networks="none") for f in (self.plain,
                                                           self.magic)]
                self.cell = objects.InstanceMapping.get_by_instance_uuid(
                    self.ctxt, self.templates[0]["id"]).cell_mapping
            with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                self.node_ids = {cn.hypervisor_hostname: cn.id for cn in
                                 objects.ComputeNodeList.get_all_by_host(
                                     cctxt, "bench")}
                counts = collections.Counter(
                    i.node for i in objects.InstanceList.get_by_host(
                        cctxt, "bench"))
            made: list[str] = []
            started = time.monotonic()
            for name in names:
                have = counts[name]
                for i in range(have, SERVERS_PER_NODE):
                    made.append(self.clone(
                        self.templates[0 if i % 3 == 2 else 1], name))
            run.notes.append(f"{nodes} nodes: {len(made)} servers recorded "
                             f"in {time.monotonic() - started:.0f}s")
            self.delete_a_node_with_an_orphan(names[-1])
            # After the last periodic: on a node it still manages, Nova's
            # resource tracker removes a deleted instance's allocations
            # itself (resource_tracker.py _remove_deleted_instances_allocations).
            with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                for uuid_ in made[::100 // ORPHAN_PERCENT]:
                    # As Nova leaves it when the allocation removal fails.
                    objects.Instance.get_by_uuid(cctxt, uuid_).destroy()

        def clone(self, template: dict, node: str) -> str:
            """A server on ``node`` recorded as Nova records a booted one:
            the instance (copied from a booted template), its mapping and
            its allocations (root, and child for CUSTOM_MAGIC)."""
            new_uuid = str(uuid.uuid4())
            src, source = self.template_facts(template["id"])
            with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                inst = objects.Instance(context=cctxt)
                for field in COPIED:
                    if src.obj_attr_is_set(field):
                        setattr(inst, field, getattr(src, field))
                inst.uuid = new_uuid
                inst.display_name = f"clone-{new_uuid[:8]}"
                inst.host, inst.node = "bench", node
                inst.compute_id = self.node_ids[node]
                inst.info_cache = objects.InstanceInfoCache(
                    network_info=network_model.NetworkInfo([]))
                inst.create()
            objects.InstanceMapping(
                context=self.ctxt, instance_uuid=new_uuid,
                cell_mapping=self.cell, project_id=src.project_id,
                user_id=src.user_id, queued_for_delete=False).create()
            allocations = {}
            for alloc in source["allocations"].values():
                child = MAGIC in alloc["resources"]
                target = self.rp[f"{node}-child" if child else node]
                allocations[target] = {"resources": alloc["resources"]}
            self.placement.put(f"/allocations/{new_uuid}", {
                "allocations": allocations, "consumer_generation": None,
                "project_id": source["project_id"],
                "user_id": source["user_id"]}, version="1.28")
            return new_uuid

        def template_facts(self, uuid_: str) -> tuple[Any, dict]:
            if uuid_ not in self.facts:
                with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                    src = objects.Instance.get_by_uuid(
                        cctxt, uuid_,
                        expected_attrs=["flavor", "system_metadata"])
                self.facts[uuid_] = (src, self.placement.get(
                    f"/allocations/{uuid_}", version="1.28").body)
            return self.facts[uuid_]

        def delete_a_node_with_an_orphan(self, node: str) -> None:
            """Its servers deleted while the allocation removal fails, then
            the node deleted (Nova drops the record, the provider stays)."""
            with nova_context.target_cell(self.ctxt, self.cell) as cctxt:
                for inst in objects.InstanceList.get_by_host_and_node(
                        cctxt, "bench", node):
                    inst.destroy()
            compute = self.computes["bench"]
            compute.driver._set_nodes(
                [n for n in compute.driver.get_available_nodes()
                 if n != node])
            self._run_periodics()

        def held(self) -> tuple[int, int]:
            rps = self.placement.get("/resource_providers",
                                     version="1.14").body["resource_providers"]
            allocations = sum(len(self.placement.get(
                f"/resource_providers/{rp['uuid']}/allocations",
                version="1.0").body["allocations"]) for rp in rps)
            return len(rps), allocations

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

    return BenchOrphans("test_bench")


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
    build = ", ".join(f"{n} nodes +{s:.0f}s" for n, s in
                      run.build_seconds.items())
    say()
    say(f"Cloud built in: {build} ({'; '.join(run.notes)})")
    return problems


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


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
    parser = Parser(prog="bench_orphans.py",
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
        lambda: run.stdlog.logger.output if run.stdlog else "")
    problems = report(run, args.sizes, out)
    print(f"Whole run {time.monotonic() - started:.0f}s", file=out)
    if error:
        problems.append(f"the Nova harness failed: {error}")
    for problem in problems:
        print(f"FAILED: {problem}", file=out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
