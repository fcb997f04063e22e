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

"""``drain host check``'s simulation alone: CPU time of the packing.

No harness and no request: ``fit.simulate`` on ``--hosts`` rooms (8,192 MB
and 64 VCPU each, a random share used, a tenth in a second zone, a tenth
with a trait) and ``--servers`` servers of the hosts being checked
(random flavors of 1 to 8 GB, a twentieth pinned to the second zone, a
twentieth requiring the trait, groups of four anti-affinity members).
The picture's reads are counted by the functional tests, not here.

Run from the repository root::

    tools/bench.sh fit_pack [--hosts 1000] [--servers 2000] [--seed 1]

It prints the wall time, how many servers fit and the free RAM before and
after; it asserts nothing about time.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

from nova_drain_filters import fit
from nova_drain_filters.migration import plan

EVENTLET = False


def build(hosts: int, servers: int, seed: int
          ) -> tuple[list[fit.Need], list[fit.HostRoom], list[fit.Group]]:
    rng = random.Random(seed)
    rooms = [fit.HostRoom(
        f"cmp-{i:05d}", {"VCPU": 64, "MEMORY_MB": 8192},
        {"VCPU": rng.randint(0, 48), "MEMORY_MB": rng.randint(0, 6144)},
        frozenset({"CUSTOM_GOLD"}) if i % 10 == 0 else frozenset(),
        "az2" if i % 10 == 1 else "nova") for i in range(hosts)]
    needs, groups = [], []
    for i in range(servers):
        ram = 1024 * rng.randint(1, 8)
        needs.append(fit.Need(
            plan.Step(f"old-{i % 20:02d}", f"srv-{i:06d}", f"s{i:06d}",
                      plan.Action.LIVE),
            {"VCPU": rng.randint(1, 8), "MEMORY_MB": ram},
            frozenset({"CUSTOM_GOLD"}) if i % 20 == 0 else frozenset(),
            az="az2" if i % 20 == 1 else None))
        if i % 4 == 3:
            groups.append(fit.Group(f"g{i // 4}", frozenset(
                f"srv-{j:06d}" for j in range(i - 3, i + 1))))
    return needs, rooms, groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.sh fit_pack")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    needs, rooms, groups = build(args.hosts, args.servers, args.seed)
    where = {n.step.server: n.step.host for n in needs}
    start = time.perf_counter()
    result = fit.simulate(needs, rooms, groups, where)
    took = time.perf_counter() - start
    ram = {c.resource_class: c for c in result.summary}["MEMORY_MB"]
    fits = sum(v.fits for v in result.verdicts)
    print(f"fit_pack: {args.hosts} hosts, {args.servers} servers, "
          f"{len(groups)} anti-affinity groups: {took:.2f} s; "
          f"{fits} fit, {len(result.homeless)} nowhere to go; free "
          f"MEMORY_MB {ram.fraction_before:.1%} before, "
          f"{ram.fraction_after:.1%} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
