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

"""Per-host cost of each drain filter next to Nova's ComputeFilter.

Builds ``--hosts`` real Nova ``HostState`` objects (Ironic nodes, services
that heartbeated seconds ago, as the HostManager fills them: the service is
a ``ReadOnlyDict``) and times ``filter_all`` over all of them in one
process, for Nova's ``ComputeFilter`` and for each drain filter, rounds
interleaved, best of ``--repeat``. BaremetalAvailabilityFilter reads a real
``IronicView`` snapshot of the same nodes, ``--unusable`` of them in
maintenance or cleaning, built by the view's own refresh from an in-memory
listing.

Run from the repository root::

    tools/bench.sh filters [--hosts 10000] [--unusable 0.1] [--repeat 15]

It prints figures and ratios and asserts nothing about time; it exits 1
only if a filter rejected a different number of hosts than expected.
"""
from __future__ import annotations

import argparse
import datetime
import sys
import time
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

from nova import objects
from nova.scheduler import host_manager
from nova.scheduler.filters import compute_filter
from oslo_config import cfg
from oslo_utils import timeutils

from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import FILTER_CLASSES
from nova_drain_filters.ironic_view import node_table

CONF = cfg.CONF
#: Run outside Nova's harness, on native threads as nova-scheduler runs (Nova
#: 34's nova/cmd/scheduler.py patches with backend='threading'): tools/bench.sh
#: sets OS_NOVA_DISABLE_EVENTLET_PATCHING=true for a module that says this, so
#: that importing tests.functional does not monkey-patch eventlet.
EVENTLET = False


class Listing:
    """An in-memory Ironic listing with IronicClient's interface.

    It stands for Ironic's API, which is another process: each request
    makes its page's facts afresh, as the client does from Ironic's JSON,
    and in between the listing keeps each node packed as the view does
    (``node_table.pack``), out of the collector's walk. Holding the facts
    themselves put 50,000 objects in the benchmark process's heap that a
    scheduler's heap does not have, and every full collection walked them.
    """

    def __init__(self, nodes: list[decisions.IronicNodeFacts]) -> None:
        self._rows = [(node.uuid, node_table.pack(node)) for node in nodes]
        self.requests = 0
        self.read_timeout = 30.0

    def iter_node_pages(
        self, page_size: int
    ) -> Iterator[list[decisions.IronicNodeFacts]]:
        for start in range(0, len(self._rows), page_size):
            self.requests += 1
            yield [node_table.unpack(uuid, packed) for uuid, packed
                   in self._rows[start:start + page_size]]


def make_nodes(count: int, unusable: float) -> list[decisions.IronicNodeFacts]:
    every = round(1 / unusable) if unusable else 0
    nodes = []
    for i in range(count):
        bad = every and i % every == 0
        nodes.append(decisions.IronicNodeFacts(
            uuid=str(uuidlib.UUID(int=i + 1)),
            provision_state="clean wait" if bad and i % 2 else "available",
            power_state="power off",
            maintenance=bool(bad and not i % 2),
            maintenance_reason="bench" if bad and not i % 2 else None))
    return nodes


def make_hosts(nodes: list[decisions.IronicNodeFacts]) -> list[Any]:
    now = timeutils.utcnow(with_timezone=True)
    hosts = []
    for i, node in enumerate(nodes):
        host = host_manager.HostState(f"compute-{i // 100}", node.uuid,
                                      "cell1")
        host.uuid = node.uuid
        host.hypervisor_type = "ironic"
        host.updated = now - datetime.timedelta(hours=5)
        host.service = host_manager.ReadOnlyDict({
            "host": host.host, "binary": "nova-compute", "disabled": False,
            "disabled_reason": None, "forced_down": False,
            "last_seen_up": now - datetime.timedelta(seconds=7),
            "created_at": now - datetime.timedelta(days=30),
            "updated_at": now - datetime.timedelta(seconds=7)})
        hosts.append(host)
    return hosts


def time_once(filt: Any, hosts: list[Any], spec: Any) -> tuple[float, int]:
    started = time.perf_counter()
    passed = list(filt.filter_all(hosts, spec))
    return time.perf_counter() - started, len(hosts) - len(passed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--unusable", type=float, default=0.1,
                        help="share of Ironic nodes that cannot take one")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    if args.hosts < 1 or args.repeat < 1 or not 0 <= args.unusable < 1:
        parser.error("--hosts and --repeat must be positive, --unusable in "
                     "[0, 1)")

    CONF([], project="nova")
    objects.register_all()
    names = [cls.__name__ for cls in FILTER_CLASSES]
    CONF.set_override("enabled_filters", ["ComputeFilter", *names],
                      group="filter_scheduler")
    nodes = make_nodes(args.hosts, args.unusable)
    hosts = make_hosts(nodes)
    listing = Listing(nodes)
    view = ironic_view.IronicView(client_factory=lambda: listing)  # type: ignore
    ironic_view.set_view(view)
    if not view.refresh():
        print(f"the view's refresh failed: {view.last_error}", file=sys.stderr)
        return 1
    view.start()
    spec = objects.RequestSpec(instance_uuid=str(uuidlib.uuid4()))

    filters: list[tuple[str, Any, int]] = [
        ("ComputeFilter (Nova)", compute_filter.ComputeFilter(), 0)]
    expected_bad = len(view.trusted().unusable)  # type: ignore[union-attr]
    for cls in FILTER_CLASSES:
        bad = expected_bad if cls.__name__.startswith("Baremetal") else 0
        filters.append((cls.__name__, cls(), bad))

    best = {name: float("inf") for name, _, _ in filters}
    problems = []
    for _round in range(args.repeat):
        for name, filt, bad in filters:
            seconds, rejected = time_once(filt, hosts, spec)
            best[name] = min(best[name], seconds)
            if rejected != bad:
                problems.append(f"{name} rejected {rejected}, expected {bad}")
    view.stop()

    base = best["ComputeFilter (Nova)"]
    print(f"filter_all over {args.hosts:,} HostStates (Ironic nodes), best of "
          f"{args.repeat}; Ironic snapshot of {args.hosts:,} nodes, "
          f"{expected_bad:,} unusable")
    print(f"{'Filter':<30} {'per host':>10} {'ratio':>7} {'rejected':>9}")
    for name, _filt, bad in filters:
        per_host = best[name] / args.hosts * 1e6
        print(f"{name:<30} {per_host:>8.2f}us {best[name] / base:>7.2f} "
              f"{bad:>9,}")
    for problem in sorted(set(problems)):
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
