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
from typing import NoReturn

from osc_lib import exceptions

from nova_drain_filters import stale
from nova_drain_filters import sync
from nova_drain_filters.clients import http
from osc_plugin.v1 import common
from osc_plugin.v1 import planned
from osc_plugin.v1 import results

COLUMNS = ("Target", "UUID", "Trait", "Action", "Why", "Result")

#: --interval bounds: a pass every few seconds at most, at least once a day.
MIN_INTERVAL, MAX_INTERVAL = 5, 86400
#: Ironic's own [api] max_limit is 1000; a larger page only wastes memory.
MAX_PAGE_SIZE = 10000


class RunSync(common.DrainLister):
    """Set and clear the drain traits in placement and on Ironic nodes.

    CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE follows Ironic's view of each node;
    CUSTOM_DRAIN_STALE_NODE marks duplicate records and nodes gone from
    Ironic. No other trait is touched. On a cloud without Ironic only
    duplicates are marked.

    Runs once, or with --watch every --interval seconds, and lists what it
    set and removed. One summary line per pass goes to stderr.

    Columns: Target, UUID, Trait, Action, Why, Result.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        # Every changing command takes --dry-run and --yes. The sync never
        # asks: it sets and clears only its own traits, also unattended
        # with --watch; --yes is accepted so that scripts can pass it to
        # every changing command alike.
        planned.add_change_options(
            parser, dry_run_help="list what would change and change nothing",
            yes_help="accepted for scripts; the sync never asks (it sets "
                     "and clears only the drain traits)")
        parser.add_argument(
            "--watch", action="store_true",
            help="run again every --interval seconds until stopped by a "
                 "signal; a failed pass is reported and retried later")
        parser.add_argument(
            "--interval", default=60, metavar="<seconds>",
            type=common.int_arg("--interval", MIN_INTERVAL, MAX_INTERVAL),
            help=f"seconds between runs with --watch ({MIN_INTERVAL} to "
                 f"{MAX_INTERVAL}); doubled after each failed pass, up to "
                 f"{sync.MAX_BACKOFF:g} s")
        parser.add_argument(
            "--page-size", default=1000, metavar="<nodes>",
            type=common.int_arg("--page-size", 1, MAX_PAGE_SIZE),
            help="Ironic nodes per request (1 to "
                 f"{MAX_PAGE_SIZE}; default 1000)")
        common.add_missing_fraction_option(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, Any]:
        self.failed = False
        if parsed_args.watch:
            self._watch(parsed_args)  # returns only by an exception
        result = self._pass(parsed_args)
        rows = self._rows(result, parsed_args)
        self.found = len(rows)
        self.failed = bool(result.failures)
        return COLUMNS, rows

    def _pass(self, parsed_args: argparse.Namespace) -> sync.SyncResult:
        """One pass; CommandError, naming what went wrong, if it fails."""
        client = common.drain_client(self.app)
        with common.api_errors():
            ironic = client.ironic if client.has_ironic() else None
            engine = sync.TraitSync(
                lambda: [h.facts for h in client.nova.hypervisors()],
                ironic, client.placement, page_size=parsed_args.page_size,
                max_missing_fraction=parsed_args.max_missing_fraction)
            try:
                result = engine.run(dry_run=parsed_args.dry_run)
            except stale.UntrustedListing as exc:
                raise exceptions.CommandError(
                    "refusing to sync: " + common.untrusted(
                        client, exc.verdict,
                        parsed_args.max_missing_fraction)) from None
        ironic_nodes = ("no Ironic" if result.ironic_nodes is None
                        else f"{result.ironic_nodes} Ironic nodes")
        self.app.stderr.write(
            f"sync: {result.nodes} compute nodes, {ironic_nodes}, "
            f"{len(result.changes)} change(s), {len(result.failures)} "
            f"failure(s), {result.requests} requests\n")
        self.app.stderr.flush()
        return result

    @staticmethod
    def _rows(result: sync.SyncResult,
              parsed_args: argparse.Namespace) -> list[tuple[Any, ...]]:
        done = results.synced(parsed_args.dry_run)
        rows = [(c.target.value, c.uuid, c.trait, c.action.value, c.why,
                 done) for c in result.changes]
        rows += [(f.step.target.value, f.step.uuid, f.step.trait,
                  f.step.action.value, f.step.why,
                  results.synced(parsed_args.dry_run, f.error))
                 for f in result.failures]
        return rows

    def _watch(self, parsed_args: argparse.Namespace) -> NoReturn:
        """Pass after pass until a signal; a failed pass never ends it.

        Each pass prints its changes on stdout and its summary (or why it
        failed) on stderr. After a failure the wait doubles (``backoff``);
        the next good pass brings it back to the interval. Ctrl-C ends the
        command with exit status 130 (cliff's handling of
        KeyboardInterrupt); SIGTERM ends the process.
        """
        failures = 0
        while True:
            try:
                result = self._pass(parsed_args)
            except (exceptions.CommandError, http.ApiError) as exc:
                failures += 1
                wait = sync.backoff(parsed_args.interval, failures)
                self.app.stderr.write(
                    f"sync: pass failed ({failures} in a row): {exc}; next "
                    f"pass in {wait:g} s\n")
            else:
                failures = 0
                wait = sync.backoff(parsed_args.interval, 0)
                for row in self._rows(result, parsed_args):
                    self.app.stdout.write("  ".join(map(str, row)) + "\n")
                self.app.stdout.flush()
            self.app.stderr.flush()
            time.sleep(wait)

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.failed = False
        rc = super().run(parsed_args)
        return 1 if rc == 0 and self.failed else rc
