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

"""Tell what nova-drain-filters does, in six acts, on an embedded cloud.

Nova's API, conductor, scheduler and placement run in-process (functional
harness, fake virt drivers); act 3 adds a real Ironic on loopback and, when
rabbitmq-server is installed, a private broker for event mode. The acts are
the modules of this package; each checks what it claims. Exit 1 if an act
did not do what it says, 2 for bad usage. ``tools/demo.sh`` runs it (as
``python -m tests.functional.demo``, from the repository root).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from typing import TextIO

from tests.functional import harness_run
from tests.functional.demo import baremetal
from tests.functional.demo import drain
from tests.functional.demo import hosts
from tests.functional.demo import records
from tests.functional.demo import screen

ACTS = range(1, 7)


def act_number(value: str) -> int:
    """Parse ``--act``: a whole number from 1 to 6."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}")
    if number not in ACTS:
        raise argparse.ArgumentTypeError(
            f"must be from {ACTS[0]} to {ACTS[-1]}, not {number}")
    return number


def servers_count(value: str) -> int:
    """Parse ``--servers``: a whole number from 1 to 50."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}")
    if not 1 <= number <= 50:
        raise argparse.ArgumentTypeError(f"must be from 1 to 50, not {number}")
    return number


def act_classes() -> dict[int, Any]:
    """The case class of each act."""
    return {1: hosts.HostsAct, 2: hosts.BootsAct, 3: baremetal.act_class(),
            4: records.StaleAct, 5: records.OrphanAct, 6: drain.DrainAct}


def run_act(cls: Any, verbose: bool, servers: int, out: TextIO) -> bool:
    """Run one act, print its screen; True if it did what it says."""
    shown = screen.Screen(cls.NUMBER, cls.TITLE, verbose=verbose)
    case: Any = cls("test_act")
    case.screen = shown
    if hasattr(cls, "SERVERS"):
        case.SERVERS = servers
    started = time.monotonic()
    error = harness_run.run_quietly(case, lambda: "\n".join(shown.logs))
    took = time.monotonic() - started
    if error:
        shown.problems.append(f"the harness failed: {error}")
    print(f"== Act {shown.number}: {shown.title} ".ljust(72, "="), file=out)
    print(shown.text(), file=out)
    for log in shown.logs:
        print("--- service log ---", file=out)
        print(log.rstrip(), file=out)
    ok = not shown.problems
    print(f"act {shown.number}: "
          + ("did what it says" if ok else "DID NOT do what it says")
          + f" ({took:.0f} s)\n", file=out)
    out.flush()
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run the acts: 0 if every one did what it says, 1 if not, 2 for usage."""
    parser = harness_run.Parser(prog="demo.sh",
                                description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--act", type=act_number, metavar="N",
                        help="run act N only (1 to 6), set up for it alone")
    parser.add_argument("--servers", type=servers_count, default=6,
                        metavar="N", help="servers act 2 boots, 1 to 50 "
                        "(default 6)")
    parser.add_argument("--verbose", action="store_true",
                        help="show the service logs after each act, and "
                        "every server's exclusions in act 2")
    args = parser.parse_args(argv)
    out = sys.stdout  # the harness may capture output; report after it
    started = time.monotonic()
    classes = act_classes()
    wanted = [args.act] if args.act else list(ACTS)
    passed = sum(run_act(classes[n], args.verbose, args.servers, out)
                 for n in wanted)
    took = time.monotonic() - started
    print(f"demo: {passed} of {len(wanted)} acts did what they say "
          f"({took:.0f} s)", file=out)
    return 0 if passed == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
