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

"""``python -m tests.functional.cloud up|down|status`` (tools/cloud.sh).

Exit codes: 0 done (``status``: everything runs), 1 a step failed
(``status``: some processes do not run), 3 ``status``: nothing runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from tests.functional.cloud import memory
from tests.functional.cloud import up as up_module
from tests.functional.cloud.state import CloudState
from tests.functional.cloud.state import cloud_dir
from tests.functional.cloud.state import stop_all
from tests.functional.services.process import ServiceStartError


def _order(state: CloudState) -> list[str]:
    known = [n for n in up_module.ORDER if n in state.procs]
    return known + sorted(set(state.procs) - set(known))


def status(as_json: bool) -> int:
    base = cloud_dir()
    state = CloudState.load(base)
    rows = [(name, state.procs[name]) for name in _order(state)]
    running = [name for name, proc in rows if proc.alive()]
    used = memory.usage(state.procs[name].pid for name in running)
    if as_json:
        print(json.dumps({
            "state_dir": str(base),
            "processes": {n: {"pid": p.pid, "running": p.alive(),
                              "log": p.log} for n, p in rows},
            "memory": used.as_dict(),
            "endpoints": state.endpoints, "facts": state.facts}, indent=2))
    else:
        for name, proc in rows:
            word = "running" if proc.alive() else "stopped"
            print(f"{name:28} {word:8} pid {proc.pid:<8} {proc.log}")
        for name, url in sorted(state.endpoints.items()):
            print(f"{name:28} {url}")
        if running:
            print(f"{'memory':28} {used.text()} (with their children)")
        if "env_file" in state.facts:
            print(f"use it: . {state.facts['env_file']}")
    if rows and len(running) == len(rows):
        return 0
    return 1 if running else 3


def down(purge: bool) -> int:
    base = cloud_dir()
    state = CloudState.load(base)
    # The OpenStack services first, all at once; then what they talk to.
    names = list(reversed(_order(state)))
    backends = [n for n in names if n in up_module.BACKENDS]
    for group in ([n for n in names if n not in backends], backends):
        for proc in stop_all([state.procs[n] for n in group]):
            up_module.say(f"stopped {proc.name} (pid {proc.pid})")
    state.procs.clear()
    if base.exists():
        state.save(base)
    if purge and base.exists():
        shutil.rmtree(base)
        up_module.say(f"removed {base}")
    return 0


def stop(names: list[str]) -> int:
    """Stop the named processes by their recorded PIDs; ``up`` starts
    them again. An unknown name is refused, and nothing is stopped."""
    state = CloudState.load(cloud_dir())
    unknown = [n for n in names if n not in state.procs]
    if unknown:
        known = ", ".join(_order(state)) or "none: the cloud is not up"
        # Quoted, so that an empty name (a script's unset variable) shows.
        names_ = ", ".join(f"'{n}'" for n in unknown)
        print(f"cloud: no process {names_} (known: {known})",
              file=sys.stderr)
        return 2
    for proc in stop_all([state.procs[n] for n in names]):
        up_module.say(f"stopped {proc.name} (pid {proc.pid})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/cloud.sh")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start what does not run (idempotent)")
    down_p = sub.add_parser("down", help="stop every process by its PID")
    down_p.add_argument("--purge", action="store_true",
                        help="also remove the state directory (databases, "
                        "images, logs)")
    stop_p = sub.add_parser("stop", help="stop some processes by their "
                            "PIDs (up starts them again)")
    stop_p.add_argument("names", nargs="+", metavar="NAME",
                        help="a process as status names it, for example "
                        "nova-compute-fake-1")
    status_p = sub.add_parser("status", help="say what runs")
    status_p.add_argument("--json", action="store_true",
                          help="machine-readable: processes, endpoints, facts")
    args = parser.parse_args(argv)
    if args.command == "status":
        return status(args.json)
    if args.command == "down":
        return down(args.purge)
    if args.command == "stop":
        return stop(args.names)
    try:
        cloud = up_module.up(cloud_dir())
    except (ServiceStartError, OSError) as exc:
        print(f"cloud: up failed: {exc}", file=sys.stderr)
        print("cloud: what runs is recorded; tools/cloud.sh down stops it",
              file=sys.stderr)
        return 1
    for name in _order(cloud.state):
        print(f"log {name:26} {cloud.state.procs[name].log}")
    print(f"setup logs: {cloud.logs}/setup-*.log")
    print(f"up in {cloud.state.facts['up_seconds']} s; "
          f"use it: . {cloud.state.facts['env_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
