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

"""``openstack drain sync``: run the trait sync once or continuously."""
import argparse
import time
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import sync
from osc_plugin.v1 import common

COLUMNS = ("Target", "UUID", "Trait", "Action", "Why", "Result")


class RunSync(common.DrainLister):
    """Set and clear the drain traits in placement and on Ironic nodes.

    CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE follows Ironic's view of each node;
    CUSTOM_DRAIN_STALE_NODE marks duplicate records and nodes gone from
    Ironic. No other trait is touched.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--dry-run", action="store_true",
                            help="show what would change; change nothing")
        parser.add_argument("--watch", action="store_true",
                            help="run again every --interval seconds until "
                                 "interrupted")
        parser.add_argument("--interval", type=int, default=60,
                            metavar="<seconds>",
                            help="seconds between runs with --watch (>= 5)")
        parser.add_argument("--page-size", type=int, default=1000,
                            metavar="<nodes>", help="Ironic nodes per request")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        if parsed_args.interval < 5:
            raise exceptions.CommandError(
                f"--interval {parsed_args.interval}: must be 5 or more")
        if parsed_args.page_size < 1:
            raise exceptions.CommandError(
                f"--page-size {parsed_args.page_size}: must be positive")
        client = common.drain_client(self.app)
        engine = sync.TraitSync(
            lambda: [h.facts for h in client.nova.hypervisors()],
            client.ironic, client.placement, page_size=parsed_args.page_size)
        rows: list[tuple[Any, ...]] = []
        while True:
            with common.api_errors():
                result = engine.run(dry_run=parsed_args.dry_run)
            done = "planned" if parsed_args.dry_run else "done"
            batch = [(c.target.value, c.uuid, c.trait, c.action.value, c.why,
                      done) for c in result.changes]
            batch += [(f.change.target.value, f.change.uuid, f.change.trait,
                       f.change.action.value, f.change.why,
                       f"failed: {f.error}") for f in result.failures]
            self.app.stderr.write(
                f"sync: {result.nodes} compute nodes, {result.ironic_nodes} "
                f"Ironic nodes, {len(result.changes)} change(s), "
                f"{len(result.failures)} failure(s), {result.requests} "
                f"requests\n")
            if not parsed_args.watch:
                rows = batch
                break
            for row in batch:
                self.app.stdout.write("  ".join(map(str, row)) + "\n")
            self.app.stdout.flush()
            try:
                time.sleep(parsed_args.interval)
            except KeyboardInterrupt:
                break
        self.found = len(rows)
        self.failed = bool(result.failures)
        return COLUMNS, rows

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.failed = False
        rc = super().run(parsed_args)
        return 1 if rc == 0 and self.failed else rc
