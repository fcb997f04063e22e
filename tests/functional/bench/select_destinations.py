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

"""The scheduler's select_destinations with the drain filters, against Nova's.

Inside Nova's in-process harness (real scheduler, conductor, API, placement
and database) one nova-compute makes two Ironic-like compute nodes
(``tests/functional/fake_ironic_driver.py``: hypervisor type ``ironic``,
node name = Ironic node UUID), one server is booted and deleted on one of
them for the request spec, and the other ``--nodes`` - 2 nodes are copies
of the other one's compute node and provider records, inserted in bulk
(``tests/functional/bench/node_clones.py``): Nova's resource tracker
makes one node at a time, 251 s for 1,000 under load. The bench asserts
once that a copy is what the tracker makes: run over one copy, it changes
nothing but ``updated_at``. The scheduler's Ironic view holds a full
snapshot of the same nodes, from an in-memory listing (the bench measures
the scheduler, not Ironic): all available, or with ``--unusable 0.1``
every tenth in maintenance (issue 23's mode, at ``--nodes 1000`` and
``10000``). Placement returns every node (``[scheduler]
max_placement_results`` = ``--nodes``), so every host reaches the filters.
Then ``SchedulerManager.select_destinations`` is called directly,
``--repeat`` rounds alternating two configurations on the same scheduler:

* Nova: Nova's default ``enabled_filters`` (ComputeFilter first);
* drain: the three drain filters, then Nova's default filters, and the
  placement pre-filter in Nova's request filters.

Each call claims one allocation in placement, which is deleted before the
next. The report gives the median time per call of each and their ratio
(goal: at most 1.05).

Run from the repository root::

    tools/bench.sh select_destinations [--nodes 1000] [--repeat 20] \\
        [--unusable 0.1] [--profile PREFIX]

A call in the drain configuration that chose an unusable node is an error.
``--profile`` writes cProfile stats of each configuration's calls.

It prints figures and asserts nothing about time; it exits 1 if the harness
failed, a copied node differs from what Nova's resource tracker makes, or a
call found no host.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import uuid as uuidlib
from typing import Any

from nova import context as nova_context
from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from oslo_config import cfg

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters import request_filter
from tests.functional import base
from tests.functional import fake_ironic_driver
from tests.functional import harness_run
from tests.functional.bench import filters as bench_filters
from tests.functional.bench import node_clones

CONF = cfg.CONF
NOVA_DEFAULT = ["ComputeFilter", "ComputeCapabilitiesFilter",
                "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter",
                "ServerGroupAffinityFilter"]
DRAIN = ["DisabledServiceFilter", "StaleComputeNodeFilter",
         "BaremetalAvailabilityFilter"]


@dataclasses.dataclass
class Run:
    nodes: int
    repeat: int
    unusable: float = 0.0
    #: cProfile of each configuration's measured calls, when asked for.
    profiles: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Nodes the snapshot says are unusable.
    bad: set[str] = dataclasses.field(default_factory=set)
    seconds: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {"nova": [], "drain": []})
    candidates: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The harness with one node, then the bulk copies of it.
    setup_seconds: float = 0.0
    clone_seconds: float = 0.0
    stdlog: Any = None
    problems: list[str] = dataclasses.field(default_factory=list)


class BenchSelectDestinations(base.DrainTestBase):
    """One nova-compute with ``results.nodes`` Ironic-like nodes; the scheduler's
    view reads an in-memory listing of them. Set ``results`` first."""

    HOSTS = ("bm-compute",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"
    DRAIN_OPTIONS = {"baremetal_refresh_interval": 60,
                     "baremetal_max_snapshot_age": 3600}
    results: Run

    def setUp(self) -> None:
        run = self.results
        facts = bench_filters.make_nodes(run.nodes, run.unusable)
        run.bad = {n.uuid for n in facts if decisions.baremetal_reasons(n)}
        # The nodes the compute makes, usable: the boot lands on one, the
        # other is the template (a node that never had a server: its
        # compute node's stats hold no instance counters).
        self.made = [n.uuid for n in facts if n.uuid not in run.bad][:2]
        self.copies = [n.uuid for n in facts if n.uuid not in self.made]
        listing = bench_filters.Listing(self.listed(facts))
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "NODES", driver.NODES)
        driver.NODES = list(self.made)
        started = time.monotonic()
        try:
            super().setUp()
        finally:
            run.stdlog = getattr(self, "stdlog", None)
        run.setup_seconds = time.monotonic() - started
        # The view the fixture made reads the in-memory listing.
        view = ironic_view.IronicView(client_factory=lambda: listing)
        ironic_view.set_view(view)
        self.addCleanup(ironic_view.set_view, None)
        self.addCleanup(view.stop)
        self.start_view(view)

    def listed(self, facts: list[decisions.IronicNodeFacts]
               ) -> list[decisions.IronicNodeFacts]:
        """The nodes the view's listing holds: Nova's nodes here."""
        return facts

    def start_view(self, view: ironic_view.IronicView) -> None:
        """List once, then poll (a subclass may listen instead)."""
        assert view.refresh(), view.last_error
        view.start()

    def _setup_services(self) -> Any:
        # A loaded machine can take longer than Nova's 60 s RPC timeout
        # for a call at this size; the bench measures, it does not time
        # out.
        self.flags(rpc_response_timeout=1800, long_rpc_timeout=1800)
        # A long run can outlast service_down_time, and the harness's
        # services may not heartbeat meanwhile: ComputeFilter and
        # DisabledServiceFilter would both see a down service.
        self.flags(service_down_time=86400)
        # Every node reaches the filters (Nova's default is 1000).
        self.flags(max_placement_results=max(self.results.nodes, 1000),
                   group="scheduler")
        return super()._setup_services()

    def configure(self, name: str) -> None:
        hm = self.scheduler.manager.host_manager
        if name == "nova":
            filters = NOVA_DEFAULT
            request_filter.uninstall()
        else:
            filters = DRAIN + NOVA_DEFAULT
            request_filter.install()
        CONF.set_override("enabled_filters", filters,
                          group="filter_scheduler")
        hm.enabled_filters = hm._choose_host_filters(filters)

    def build_copies(self, ctxt: Any, template_uuid: str) -> None:
        """The other nodes, copied from ``template_uuid``, then one checked
        against Nova's resource tracker."""
        run = self.results
        started = time.monotonic()
        node_clones.clone(ctxt, template_uuid, self.copies)
        run.clone_seconds = time.monotonic() - started
        if not self.copies:
            return
        sample = self.copies[-1]
        template = node_clones.records(ctxt, self.placement, template_uuid)
        copy = node_clones.records(ctxt, self.placement, sample)
        run.problems.extend(
            f"copy differs from the template: {d}" for d in
            node_clones.differences(template, copy,
                                    node_clones.identity_ignored()))
        run.problems.extend(
            f"Nova's resource tracker changed a copy: {d}" for d in
            node_clones.resource_tracker_changes(
                self.computes["bm-compute"], ctxt, self.placement, sample))
        if run.problems:
            self.fail("; ".join(run.problems))

    def prepare(self) -> tuple[Any, Any]:
        """Boot and delete one server for its request spec, copy the nodes;
        the admin context and the spec that each call schedules."""
        self.addCleanup(CONF.clear_override, "enabled_filters",
                        group="filter_scheduler")
        self.addCleanup(request_filter.uninstall)
        ctxt = nova_context.get_admin_context()
        server = self.boot()
        spec = objects.RequestSpec.get_by_instance_uuid(ctxt, server["id"])
        self._delete_server(server)
        used = server["OS-EXT-SRV-ATTR:hypervisor_hostname"]
        self.build_copies(ctxt, next(n for n in self.made if n != used))
        # What the conductor sets before it calls the scheduler
        # (nova/conductor/manager.py: port resource requests).
        spec.requested_resources = []
        return ctxt, spec

    def call(self, ctxt: Any, spec: Any, name: str,
             profile: Any = None) -> float:
        """One ``select_destinations`` in configuration ``name``; its
        seconds. The allocation it claims is deleted after."""
        run = self.results
        self.configure(name)
        instance = str(uuidlib.uuid4())
        spec.instance_uuid = instance
        if profile is not None:
            profile.enable()
        started = time.perf_counter()
        chosen = self.scheduler.manager.select_destinations(
            ctxt, spec_obj=spec, instance_uuids=[instance],
            return_objects=True, return_alternates=True)
        seconds = time.perf_counter() - started
        if profile is not None:
            profile.disable()
        self.placement.delete(f"/allocations/{instance}")
        if not chosen or not chosen[0]:
            run.problems.append(f"{name}: no host chosen")
        elif name == "drain" and chosen[0][0].nodename in run.bad:
            run.problems.append("drain: chose an unusable node")
        return seconds

    def test_measure(self) -> None:
        run = self.results
        ctxt, spec = self.prepare()
        for round_ in range(run.repeat + 1):
            for name in (("nova", "drain") if round_ % 2
                         else ("drain", "nova")):
                profile = run.profiles.get(name) if round_ else None
                seconds = self.call(ctxt, spec, name, profile)
                if round_:  # the first round warms caches up
                    run.seconds[name].append(seconds)
        run.candidates["request filters"] = len(
            nova_request_filter.ALL_REQUEST_FILTERS)


def build_case(run: Run) -> BenchSelectDestinations:
    """The one test that measures, set up for ``run``."""
    case = BenchSelectDestinations("test_measure")
    case.results = run
    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--unusable", type=float, default=0.0,
                        help="share of the nodes the Ironic snapshot says "
                             "are unusable (0 to 0.5; issue 23: 0.1)")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="write cProfile stats of each configuration's "
                             "calls to PREFIX.nova and PREFIX.drain (the "
                             "medians then include the profiler)")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.repeat < 1:
        parser.error("--nodes and --repeat must be positive")
    if not 0 <= args.unusable <= 0.5:
        parser.error("--unusable must be from 0 to 0.5")

    run = Run(args.nodes, args.repeat, args.unusable)
    # A call takes about a minute at 10,000 nodes on a loaded machine:
    # the harness's 600 s test timeout (harness_run) would end the run.
    os.environ.setdefault("OS_TEST_TIMEOUT", "7200")
    if args.profile:
        import cProfile
        run.profiles = {"nova": cProfile.Profile(),
                        "drain": cProfile.Profile()}
    error = harness_run.run_quietly(
        build_case(run), lambda: run.stdlog.logger.output if run.stdlog else "")
    if error:
        print(f"harness failed: {error}", file=sys.stderr)
        return 1
    nova = statistics.median(run.seconds["nova"])
    drain = statistics.median(run.seconds["drain"])
    state = (f"{len(run.bad):,} unusable in the snapshot" if run.bad
             else "all available")
    print(f"select_destinations at {args.nodes:,} compute nodes (Ironic, "
          f"{state}), median of {args.repeat} calls each, alternating; "
          f"set-up {run.setup_seconds:.0f}s (harness, 2 nodes made by "
          f"nova-compute) + {run.clone_seconds:.1f}s "
          f"({args.nodes - 2:,} copies; one checked against Nova's "
          f"resource tracker: unchanged)")
    print(f"{'configuration':<52} {'per call':>10} {'ratio':>7}")
    print(f"{'Nova default filters':<52} {nova * 1000:>8.1f}ms {1:>7.2f}")
    print(f"{'drain filters + Nova default filters + pre-filter':<52} "
          f"{drain * 1000:>8.1f}ms {drain / nova:>7.3f}")
    print("goal: ratio <= 1.05")
    for name, profile in run.profiles.items():
        profile.dump_stats(f"{args.profile}.{name}")
        print(f"profile: {args.profile}.{name}")
    for problem in sorted(set(run.problems)):
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
