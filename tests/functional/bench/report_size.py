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

"""``openstack drain report``'s requests and wall time at issue 22's size.

Inside Nova's in-process harness with a real Ironic on loopback: Ironic
gets ``--ironic`` nodes, enrolled through its API on a few threads
(``ironic_refresh.enroll``). Two nova-computes run: ``cmp-0000``
(``fake.FakeDriver``) and ``bm-compute`` (``FakeIronicDriver``, one node
whose uuid is the first Ironic node's, as Nova's Ironic driver names it).
The rest is copied in bulk (``node_clones``): ``--computes`` - 1 compute
hosts, each a copy of cmp-0000's service, host mapping, compute node and
provider, and one Ironic compute node per other Ironic node, a copy of
bm-compute's: the resource tracker makes one node at a time (251 s for
1,000 nodes). The servers are booted while the cloud has two nodes:
Nova's ``CastAsCallFixture`` turns the build's cast into a call with the
60 s RPC timeout, which a multi-create over 1,000 hosts outlasts here
(the ``MessagingTimeout`` of doc/source/testing.rst).

The report runs twice through the real ``openstack`` shell: at a tenth of
the size (the other copies are added after) and at full size. Each run's
requests are counted per service where every request goes
(``ServiceClient._send``, as ``cli_requests`` counts) and compared with::

    nova       1 version + pages(hypervisors) + pages(servers)
               + pages(migrations) + 1 GET /os-services
    placement  1 version + 1 provider list + 1 trait check
               + 1 provider list per forbidden trait placement knows
    ironic     1 version + pages(Ironic nodes)
    pages(n) = n // 1000 + 1 (a full page has a "next" link)

so that growing the cloud tenfold adds pages, not a request per host.

Run from the repository root::

    tools/bench.sh report_size [--computes 1000] [--ironic 2000]

It prints figures and asserts nothing about time; exit 1 if a count
differs from the formula, the report's totals differ from the cloud built,
or the harness failed.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from typing import Any

import fixtures
from nova import context as nova_context

from nova_drain_filters import traits
from nova_drain_filters.clients import http
from tests.functional import cli_harness
from tests.functional import fake_ironic_driver
from tests.functional import harness_run
from tests.functional.bench import cli_requests_case as case_mod
from tests.functional.bench import ironic_refresh
from tests.functional.bench import node_clones
from tests.functional.services import ironic_server

SERVERS = 10
PAGE = 1000


@dataclasses.dataclass
class Measure:
    computes: int
    ironic: int
    counted: dict[str, int]
    predicted: dict[str, int]
    seconds: float
    nodes: int
    #: Seconds spent waiting for each service's answers.
    by_service: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Run:
    computes: int
    ironic: int
    measures: list[Measure] = dataclasses.field(default_factory=list)
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    stdlog: Any = None


def predict(hypervisors: int, ironic: int, known_traits: int
            ) -> dict[str, int]:
    pages = case_mod.pages
    return {"nova": 1 + pages(hypervisors, PAGE) + pages(SERVERS, PAGE)
            + pages(0, PAGE) + 1,
            "placement": 1 + 1 + 1 + known_traits,
            "ironic": 1 + pages(ironic, PAGE)}


class BenchReportSize(cli_harness.CliTestBase):
    HOSTS = ("cmp-0000", "bm-compute")
    COMPUTE_DRIVER = "fake.FakeDriver"
    # The scheduler's view lists Ironic once, not during the measurement.
    DRAIN_OPTIONS = {"baremetal_refresh_interval": 3600,
                     "baremetal_max_snapshot_age": 7200}
    results: Run

    def setUp(self) -> None:
        run = self.results
        started = time.monotonic()
        server = self.useFixture(ironic_server.IronicServerFixture())
        self.ironic_url = server.url
        self.ironic_nodes = ironic_refresh.enroll(
            ironic_refresh.load_ironic_server(), server.url, run.ironic,
            workers=8, timeout=1800)
        run.times["Ironic enrolment (API)"] = time.monotonic() - started
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "NODES", driver.NODES)
        driver.NODES = self.ironic_nodes[:1]
        started = time.monotonic()
        try:
            super().setUp()
        finally:
            run.stdlog = getattr(self, "stdlog", None)
        run.times["harness, 2 computes"] = time.monotonic() - started

    def _setup_services(self) -> Any:
        # Listing 1,000 hypervisors per page does one services lookup per
        # node (nova/api/openstack/compute/hypervisors.py
        # _get_hypervisors); on a loaded machine a harness RPC call may
        # wait behind it longer than the 60 s default.
        self.flags(rpc_response_timeout=1800, long_rpc_timeout=1800)
        # The copied services' heartbeat is the template's: keep them up.
        self.flags(service_down_time=86400)
        return super()._setup_services()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver=self.COMPUTE_DRIVER)
        self._start_compute("cmp-0000")
        self.flags(compute_driver="drain_fake_ironic.FakeIronicDriver")
        self._start_compute("bm-compute")
        return self.computes["cmp-0000"]

    def boot_servers(self) -> None:
        body = self._build_server(networks="none", host="cmp-0000")
        body.update(min_count=SERVERS, max_count=SERVERS)
        self.api.post_server({"server": body})
        for _ in range(600):
            if not [s for s in self.admin_api.get_servers()
                    if s["status"] == "BUILD"]:
                break
            time.sleep(0.1)
        bad = [s["id"] for s in self.admin_api.get_servers()
               if s["status"] != "ACTIVE"]
        self.assertEqual([], bad, "servers not ACTIVE")

    def grow(self, computes: int, ironic: int) -> None:
        """Copies until the cloud holds ``computes`` compute hosts and
        ``ironic`` Ironic compute nodes."""
        ctxt = nova_context.get_admin_context()
        have_c = len(self.hosts)
        have_i = len(self.ironic_made)
        started = time.monotonic()
        new_hosts = [f"cmp-{i:04d}" for i in range(have_c, computes)]
        node_clones.clone_hosts(ctxt, "cmp-0000", self.template_vm,
                                new_hosts)
        self.hosts += new_hosts
        new_nodes = self.ironic_nodes[have_i:ironic]
        node_clones.clone(ctxt, self.ironic_nodes[0], new_nodes)
        self.ironic_made += new_nodes
        key = f"copies to {computes} + {ironic}"
        self.results.times[key] = time.monotonic() - started

    def measure(self) -> None:
        run = self.results
        counter = case_mod.Counter()
        computes, ironic = len(self.hosts), len(self.ironic_made)
        known = self.known_traits()
        with self.counting(counter):
            started = time.monotonic()
            rows = self.cli_json("drain", "report")
            seconds = time.monotonic() - started
        total = next(r for r in rows if r["Reason"] == "Total")
        nodes = int(total["Nodes"])
        if nodes != computes + ironic:
            run.problems.append(f"report Total row counts {nodes} nodes, "
                                f"the cloud holds {computes + ironic}")
        predicted = predict(computes + ironic, run.ironic, known)
        counted = dict(counter.by_service)
        for service, want in predicted.items():
            if counted.get(service, 0) != want:
                run.problems.append(
                    f"{computes}+{ironic}: {service} sent "
                    f"{counted.get(service, 0)}, the formula says {want}")
        run.measures.append(Measure(computes, ironic, counted, predicted,
                                    seconds, nodes,
                                    dict(self.service_seconds)))

    def counting(self, counter: case_mod.Counter) -> Any:
        """Count every request (``cli_requests``' way) and time it, per
        service, for the run of one command."""
        counting = counter.counting_request(http.ServiceClient._send)
        self.service_seconds: dict[str, float] = {}

        def timed(client: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return counting(client, *args, **kwargs)
            finally:
                spent = self.service_seconds.get(client.service, 0.0)
                self.service_seconds[client.service] = (
                    spent + time.monotonic() - started)

        stack = contextlib.ExitStack()
        stack.enter_context(fixtures.MonkeyPatch(
            "nova_drain_filters.clients.http.ServiceClient._send", timed))
        return stack

    def known_traits(self) -> int:
        names = ",".join(traits.DEFAULT_FORBIDDEN)
        return len(self.placement.get(f"/traits?name=in:{names}",
                                      version="1.6").body["traits"])

    def test_measure(self) -> None:
        run = self.results
        self.boot_servers()
        self.template_vm = self.compute_node("cmp-0000", "cmp-0000").uuid
        self.hosts = ["cmp-0000"]
        self.ironic_made = self.ironic_nodes[:1]
        self.grow(max(1, run.computes // 10), max(1, run.ironic // 10))
        self.measure()
        self.grow(run.computes, run.ironic)
        self.measure()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--computes", type=int, default=1000)
    parser.add_argument("--ironic", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.computes < 10 or args.ironic < 10:
        parser.error("--computes and --ironic must be at least 10")
    os.environ.setdefault("OS_TEST_TIMEOUT", "3600")
    run = Run(args.computes, args.ironic)
    case = BenchReportSize("test_measure")
    case.results = run
    error = harness_run.run_quietly(
        case, lambda: run.stdlog.logger.output if run.stdlog else "")
    print(f"openstack drain report: compute hosts (fake driver) + Ironic "
          f"compute nodes; {SERVERS} servers; real Ironic with "
          f"{args.ironic:,} nodes; Nova and Ironic page size {PAGE}")
    head = (f"{'computes':>8} {'ironic':>6} {'nova':>9} {'placement':>9} "
            f"{'ironic':>9} {'total':>9} {'wall s':>7}")
    print(head + "\n" + "-" * len(head) + "   (measured/formula)")
    for m in run.measures:
        cells = [f"{m.counted.get(s, 0)}/{m.predicted[s]}"
                 for s in ("nova", "placement", "ironic")]
        total = f"{sum(m.counted.values())}/{sum(m.predicted.values())}"
        print(f"{m.computes:>8} {m.ironic:>6} {cells[0]:>9} {cells[1]:>9} "
              f"{cells[2]:>9} {total:>9} {m.seconds:>7.1f}")
    for m in run.measures:
        waits = ", ".join(f"{s} {t:.1f}s" for s, t in
                          sorted(m.by_service.items()))
        print(f"{m.computes + m.ironic:,} nodes: of {m.seconds:.1f}s, "
              f"answers took {waits}; the rest is the CLI's own")
    if len(run.measures) == 2:
        lo, hi = run.measures
        print(f"nodes in Nova x{(hi.nodes / lo.nodes):.1f} "
              f"({lo.nodes:,} -> {hi.nodes:,}): requests "
              f"{sum(lo.counted.values())} -> {sum(hi.counted.values())}")
    print("set-up: " + ", ".join(f"{k} {v:.0f}s" for k, v in run.times.items()))
    if error:
        run.problems.append(f"the harness failed: {error}")
    for problem in run.problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
