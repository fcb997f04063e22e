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

"""What every drain command shares: arguments, errors, progress, exit codes."""
import argparse
import contextlib
import sys
import typing
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from cliff import app as cliff_app
from osc_lib import exceptions
from osc_lib import shell as osc_shell
from osc_lib.command import command
from oslo_utils import uuidutils

from nova_drain_filters import decisions
from nova_drain_filters import listing_trust
from nova_drain_filters import orphans
from nova_drain_filters import stale
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from nova_drain_filters.clients import nova_db
from osc_plugin import client as drain_client_mod
from osc_plugin import scope

#: Exit status of a list command given --exit-code when it found anything.
FOUND_EXIT = 3

#: The CLI's default for both fractions: the option's default.
DEFAULT_FRACTION = stale.DEFAULT_MAX_MISSING_FRACTION

T = TypeVar("T")


def drain_client(app: cliff_app.App) -> drain_client_mod.DrainClient:
    """The plugin's client that openstackclient built (see plugin.py)."""
    # The App is openstackclient's shell (osc_lib/shell.py OpenStackShell),
    # whose ClientManager gets one attribute per plugin, set at run time
    # (openstackclient/common/clientmanager.py get_plugin_modules).
    manager: Any = typing.cast(osc_shell.OpenStackShell, app).client_manager
    client: drain_client_mod.DrainClient = manager.drain
    return client


def uuid_arg(what: str) -> Callable[[str], str]:
    """An argparse type that accepts only a UUID, naming ``what`` if not."""
    def check(value: str) -> str:
        if not uuidutils.is_uuid_like(value):
            raise argparse.ArgumentTypeError(f"{what} {value!r} is not a UUID")
        return str(uuid.UUID(value))  # the spelling the APIs return
    return check


def int_arg(what: str, low: int,
            high: int | None = None) -> Callable[[str], int]:
    """An argparse type for an integer from ``low`` to ``high`` (or up)."""
    def check(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if number < low or (high is not None and number > high):
            bounds = (f"from {low} to {high}" if high is not None
                      else f"of {low} or more")
            raise argparse.ArgumentTypeError(
                f"{what} {value!r}: must be an integer {bounds}")
        return number
    return check


def unique(items: Iterable[T]) -> list[T]:
    """Each item once, in the order given: ``host start c1 c1`` acts once."""
    return list(dict.fromkeys(items))


def fraction_arg(what: str) -> Callable[[str], float]:
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


def untrusted(client: drain_client_mod.DrainClient,
              verdict: listing_trust.ListingVerdict,
              fraction: float) -> str:
    """Why an Ironic listing is not believed, and what to do about it."""
    scope = client.token_scope()
    return (f"{verdict}, more than --max-missing-fraction {fraction} "
            "([drain_filters] ironic_missing_max_fraction) allows: the "
            "credentials may not see every node"
            + (f" ({scope})" if scope else "")
            + "; if the nodes really are gone, raise --max-missing-fraction")


def nova_view_refused(verdict: listing_trust.ListingVerdict, what: str,
                      nova_config: str | None,
                      fraction: float) -> exceptions.CommandError:
    """The one-line refusal when Nova's records lack placement's compute
    node providers (``orphans.NovaViewIncomplete``): ``refusing to
    <what>: ...``."""
    source = ("--nova-config may name another cloud's nova.conf, or a "
              "cell may not be mapped" if nova_config else
              "the credentials may not see every compute node")
    if not verdict.listed:
        # Nothing could make an empty listing believable.
        return exceptions.CommandError(
            f"refusing to {what}: Nova lists no compute node record, while "
            f"placement has {verdict.known} compute node providers "
            f"(COMPUTE_NODE): {source}")
    return exceptions.CommandError(
        f"refusing to {what}: {verdict}, more than --max-missing-fraction "
        f"{fraction} allows: {source}; if those nodes really are gone, "
        "raise --max-missing-fraction")


def nova_side(client: drain_client_mod.DrainClient,
              nova_config: str | None) -> orphans.NovaSide:
    """Nova's records: the compute API, or with ``--nova-config`` the cell
    databases (``nova_db.NovaRecords``)."""
    if not nova_config:
        return client.nova
    with api_errors():
        return nova_db.NovaRecords(nova_config)


def ironic_listing(
    client: drain_client_mod.DrainClient,
    hypervisors: Iterable[compute.Hypervisor], fraction: float,
    extra_fields: Sequence[str] = (),
) -> tuple[dict[str, decisions.IronicNodeFacts] | None,
           listing_trust.ListingVerdict | None]:
    """Ironic's nodes by UUID and the listing's verdict; (None, None)
    without Ironic in the catalog, (None, verdict) when it is not trusted
    (``stale.judge_listing``: empty, or lacking too many nodes Nova knows).

    Read after Nova's records: Nova learns nodes only from Ironic.
    """
    if not client.has_ironic():
        return None, None
    nodes = {n.uuid: n for n in client.ironic.list_nodes(1000, extra_fields)}
    verdict = stale.judge_listing([h.facts for h in hypervisors], nodes,
                                  fraction)
    return (nodes if verdict.trusted else None), verdict


def check_budget(acting: int, total: int, what: str,
                 max_fraction: float) -> None:
    """Refuse to touch more than ``max_fraction`` of ``total`` in one run.

    A disruption budget: a partial view of the cloud (a project-scoped
    token, a missing cell) makes everything look stale or orphaned; one run
    must not act on all of it.
    """
    allowed = listing_trust.allowed_count(total, max_fraction)
    if acting > allowed:
        raise exceptions.CommandError(
            f"refusing to act on {acting} of {total} {what} in one run: "
            f"--max-fraction {max_fraction} allows {allowed}; check the plan, "
            "then raise --max-fraction or clear fewer at a time")


#: What a 403 needs, after the service's own words (which name the policy:
#: Nova's PolicyNotAuthorized, placement's, Ironic's HTTPForbidden).
NEEDS = {
    "nova": "the drain commands need the admin role, project-scoped, for "
            "Nova and placement",
    "placement": "the drain commands need the admin role, project-scoped, "
                 "for Nova and placement",
    "ironic": "listing every Ironic node needs a system-scoped reader or "
              "the service role: " + scope.CONFIGURE,
}


def refused(exc: http.ApiError) -> str:
    """A failed request in one line; a 403 says which role it needs."""
    if isinstance(exc, http.Forbidden) and exc.service in NEEDS:
        return f"{exc}; {NEEDS[exc.service]}"
    return str(exc)


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Turn a failed request (or an unreadable Nova database, with
    --nova-config) into osc's one-line error, never a traceback."""
    try:
        yield
    except http.ApiError as exc:
        raise exceptions.CommandError(refused(exc)) from None
    except nova_db.Unavailable as exc:
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


class Table(command.Lister):
    """A Lister whose empty table still shows its header.

    cliff's table formatter prints an empty result as one blank line unless
    ``--print-empty`` is given (``cliff/formatters/table.py``
    ``emit_list``: ``PrettyTable(print_empty=...)``); ``openstack server
    list`` does the same, and a blank line reads like a failure. Every drain
    table prints its header instead; ``-f json`` prints ``[]`` as before.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        # The table formatter's own --print-empty, on by default here.
        parser.set_defaults(print_empty=True)
        return parser


class DrainLister(Table):
    """A Lister with ``--exit-code``: exit 3 when it found anything."""

    found = 0
    #: What ``--exit-code`` does, for its help.
    exit_help = f"exit {FOUND_EXIT} when anything is found (for monitoring)"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--exit-code", action="store_true", help=self.exit_help)
        return parser

    def run(self, parsed_args: argparse.Namespace) -> int:
        rc = super().run(parsed_args)
        if rc == 0 and parsed_args.exit_code and self.found:
            return FOUND_EXIT
        return rc

