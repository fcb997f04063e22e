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

"""What every drain command shares: errors, confirmation, progress, exit codes."""
import argparse
import contextlib
import sys
import uuid
from collections.abc import Iterator
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command
from oslo_utils import uuidutils

from nova_drain_filters import decisions
from nova_drain_filters import stale
from nova_drain_filters.clients import http
from nova_drain_filters.clients import nova_db
from osc_plugin import client as drain_client_mod

#: Exit status of a list command given --exit-code when it found anything.
FOUND_EXIT = 3

#: The CLI's default for both fractions: the option's default.
DEFAULT_FRACTION = stale.DEFAULT_MAX_MISSING_FRACTION


def drain_client(app: Any) -> drain_client_mod.DrainClient:
    """The plugin's client that openstackclient built (see plugin.py)."""
    manager: Any = app.client_manager
    return manager.drain


def uuid_arg(what: str) -> Any:
    """An argparse type that accepts only a UUID, naming ``what`` if not."""
    def check(value: str) -> str:
        if not uuidutils.is_uuid_like(value):
            raise argparse.ArgumentTypeError(f"{what} {value!r} is not a UUID")
        return str(uuid.UUID(value))  # the spelling the APIs return
    return check


def int_arg(what: str, low: int, high: int) -> Any:
    """An argparse type for an integer from ``low`` to ``high``."""
    def check(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(
                f"{what} {value!r}: must be an integer from {low} to {high}")
        return number
    return check


def fraction_arg(what: str) -> Any:
    """An argparse type for a fraction from 0.0 to 1.0."""
    def check(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= 1.0:  # NaN fails too
            raise argparse.ArgumentTypeError(
                f"{what} {value!r}: must be a fraction from 0.0 to 1.0")
        return number
    return check


def nova_config_arg(value: str) -> str:
    """An argparse type for ``--nova-config``: an empty value (an unset
    shell variable, say) is an error, not a quiet fall-back to the API."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty path")
    return value


def add_missing_fraction_option(parser: argparse.ArgumentParser,
                                what: str | None = None) -> None:
    """``--max-missing-fraction``: the CLI's ironic_missing_max_fraction."""
    what = what or ("largest share of the Ironic compute nodes Nova knows "
                    "that the Ironic listing may lack")
    parser.add_argument(
        "--max-missing-fraction", metavar="<fraction>",
        type=fraction_arg("--max-missing-fraction"), default=DEFAULT_FRACTION,
        help=f"{what} and still be believed (default {DEFAULT_FRACTION}, as "
             "[drain_filters] ironic_missing_max_fraction)")


def untrusted(client: Any, verdict: decisions.ListingVerdict,
              fraction: float) -> str:
    """Why an Ironic listing is not believed, and what to do about it."""
    scope = client.token_scope()
    return (f"{verdict}, more than --max-missing-fraction {fraction} "
            "([drain_filters] ironic_missing_max_fraction) allows: the "
            "credentials may not see every node"
            + (f" ({scope})" if scope else "")
            + "; if the nodes really are gone, raise --max-missing-fraction")


def check_budget(acting: int, total: int, what: str,
                 max_fraction: float) -> None:
    """Refuse to touch more than ``max_fraction`` of ``total`` in one run.

    A disruption budget: a partial view of the cloud (a project-scoped
    token, a missing cell) makes everything look stale or orphaned; one run
    must not act on all of it.
    """
    allowed = decisions.allowed_count(total, max_fraction)
    if acting > allowed:
        raise exceptions.CommandError(
            f"refusing to act on {acting} of {total} {what} in one run: "
            f"--max-fraction {max_fraction} allows {allowed}; check the plan, "
            "then raise --max-fraction or clear fewer at a time")


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Turn a failed request (or an unreadable Nova database, with
    --nova-config) into osc's one-line error, never a traceback."""
    try:
        yield
    except (http.ApiError, nova_db.Unavailable) as exc:
        raise exceptions.CommandError(str(exc)) from None


class Progress:
    """``\\r``-updated progress on stderr, only when stderr is a terminal."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{self.what} {done}/{total}")
            sys.stderr.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


class DrainLister(command.Lister):
    """A Lister with ``--exit-code``: exit 3 when it found anything."""

    found = 0

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--exit-code", action="store_true",
            help=f"exit {FOUND_EXIT} when anything is found (for monitoring)")
        return parser

    def run(self, parsed_args: argparse.Namespace) -> int:
        rc = super().run(parsed_args)
        if rc == 0 and parsed_args.exit_code and self.found:
            return FOUND_EXIT
        return rc


class ClearCommand(command.Lister):
    """Shows its plan, asks, acts, and reports every failure at the end."""

    failures: list[str]
    #: Whether ``confirm`` is given a disruption budget, so the command
    #: takes ``--max-fraction``. The drain commands act only on the hosts
    #: and nodes named on their command line, and take no budget.
    budgeted = True

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--dry-run", action="store_true",
                            help="print the plan on stderr and change "
                                 "nothing")
        parser.add_argument("--yes", action="store_true",
                            help="do not ask before carrying out the plan "
                                 "(needed when stdin is not a terminal)")
        if self.budgeted:
            parser.add_argument(
                "--max-fraction", metavar="<fraction>",
                type=fraction_arg("--max-fraction"), default=DEFAULT_FRACTION,
                help="refuse a plan that touches more than this share of "
                     f"the cloud's compute nodes (default {DEFAULT_FRACTION}"
                     "; a plan that touches one is always allowed)")
        return parser

    def confirm(self, parsed_args: argparse.Namespace, plan: list[str],
                budget: tuple[int, int, str] | None = None) -> bool:
        """Print the plan on stderr; True to go ahead.

        :param budget: (records the plan touches, records in the cloud, what
            they are) for ``check_budget``: a plan over budget is refused
            (a dry run only says so).
        """
        if not plan:
            return False
        stderr = self.app.stderr
        stderr.write("Plan:\n" + "".join(f"  {line}\n" for line in plan))
        stderr.flush()
        if budget is not None:
            try:
                check_budget(*budget, parsed_args.max_fraction)
            except exceptions.CommandError as exc:
                if not parsed_args.dry_run:
                    raise
                stderr.write(f"A run without --dry-run would stop: {exc}\n")
        if parsed_args.dry_run:
            return False
        if parsed_args.yes:
            return True
        if not self.app.stdin.isatty():
            raise exceptions.CommandError(
                "refusing to change anything without a terminal to ask on: "
                "pass --yes, or --dry-run to see the plan")
        stderr.write(f"Carry out these {len(plan)} step(s)? [y/N] ")
        stderr.flush()
        return self.app.stdin.readline().strip().lower() in ("y", "yes")

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.failures = []
        rc = super().run(parsed_args)
        for failure in self.failures:
            self.app.stderr.write(f"failed: {failure}\n")
        if self.failures:
            self.app.stderr.write(f"{len(self.failures)} step(s) failed\n")
            return 1
        return rc
