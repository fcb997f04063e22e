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

from nova_drain_filters.clients import http
from osc_plugin import client as drain_client_mod

#: Exit status of a list command given --exit-code when it found anything.
FOUND_EXIT = 3


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


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Turn a failed request into osc's one-line error, never a traceback."""
    try:
        yield
    except http.ApiError as exc:
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

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--dry-run", action="store_true",
                            help="show the plan and change nothing")
        parser.add_argument("--yes", action="store_true",
                            help="do not ask for confirmation")
        return parser

    def confirm(self, parsed_args: argparse.Namespace,
                plan: list[str]) -> bool:
        """Print the plan on stderr; True to go ahead."""
        if not plan:
            return False
        stderr = self.app.stderr
        stderr.write("Plan:\n" + "".join(f"  {line}\n" for line in plan))
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
