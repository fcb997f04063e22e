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

"""Every command's parser, and what the commands share (osc_plugin.v1.common)."""
import argparse
from typing import Any

from osc_lib import exceptions

from nova_drain_filters.clients import http
from osc_plugin.v1 import common
from osc_plugin.v1 import orphan
from osc_plugin.v1 import planned
from osc_plugin.v1 import stale
from osc_plugin.v1 import sync
from tests.unit.osc_plugin import fakes

U1, U2 = fakes.uuid(1), fakes.uuid(2)


class TestListStaleParser(fakes.CommandTestCase):
    cls, prog = stale.ListStale, "openstack drain stale list"

    def test_defaults(self) -> None:
        args = self.parse()
        self.assertEqual((False, None, None),
                         (args.exit_code, args.host, args.reason))

    def test_options(self) -> None:
        args = self.parse("--exit-code", "--host", "c1", "--reason",
                          "ironic_node_missing")
        self.assertEqual((True, "c1", "ironic_node_missing"),
                         (args.exit_code, args.host, args.reason))

    def test_reason_choices_are_the_codes(self) -> None:
        self.assertIn("provider_without_node", stale.REASONS)
        self.assertEqual(stale.REASONS, sorted(stale.REASONS))
        message = self.parse_error("--reason", "sleepy")
        self.assertIn("invalid choice: 'sleepy'", message)


class TestClearStaleParser(fakes.CommandTestCase):
    cls, prog = stale.ClearStale, "openstack drain stale clear"

    def test_defaults(self) -> None:
        args = self.parse("--all")
        self.assertEqual(([], True, False, False, None, 0.1, 0.1), (
            args.uuids, args.all, args.dry_run, args.yes, args.nova_config,
            args.max_fraction, args.max_missing_fraction))

    def test_names_and_flags(self) -> None:
        args = self.parse(U1, U2, "--dry-run", "--yes", "--nova-config",
                          "/etc/nova/nova.conf", "--max-fraction", "0.5",
                          "--max-missing-fraction", "1")
        self.assertEqual(([U1, U2], True, True, "/etc/nova/nova.conf", 0.5,
                          1.0), (args.uuids, args.dry_run, args.yes,
                                 args.nova_config, args.max_fraction,
                                 args.max_missing_fraction))
        self.assertIs(True, self.parse("--all").all)

    def test_rejects_a_non_uuid(self) -> None:
        message = self.parse_error(U1, "not-a-uuid")
        self.assertIn("stale record 'not-a-uuid' is not a UUID", message)

    def test_names_and_all_are_exclusive(self) -> None:
        # Bad arguments exit 2 (argparse), before any request.
        self.assertIn("argument --all: not allowed with argument <uuid>",
                      self.parse_error(U1, "--all"))
        self.assertIn("argument <uuid>: not allowed with argument --all",
                      self.parse_error("--all", U1))
        self.assertIn("one of the arguments <uuid> --all is required",
                      self.parse_error())
        self.assertIn("one of the arguments <uuid> --all is required",
                      self.parse_error("--yes"))

    def test_fractions_are_bounded(self) -> None:
        for option in ("--max-fraction", "--max-missing-fraction"):
            for value in ("-0.1", "1.5", "nan", "half", ""):
                self.assertIn(
                    f"{option} {value!r}: must be a fraction from 0.0 to 1.0",
                    self.parse_error("--all", option, value))


class TestOrphanParsers(fakes.CommandTestCase):
    def test_list(self) -> None:
        self.cls, self.prog = orphan.ListOrphan, "openstack drain orphan list"
        args = self.parse()
        self.assertEqual((False, None),
                         (args.exit_code, args.resource_provider))
        args = self.parse("--exit-code", "--resource-provider", U1)
        self.assertEqual((True, U1), (args.exit_code, args.resource_provider))
        message = self.parse_error("--resource-provider", "not-a-uuid")
        self.assertIn("resource provider 'not-a-uuid' is not a UUID", message)

    def test_clear(self) -> None:
        self.cls, self.prog = orphan.ClearOrphan, "openstack drain orphan clear"
        args = self.parse()
        self.assertEqual(([], None, False, False), (
            args.consumers, args.resource_provider, args.dry_run, args.yes))
        args = self.parse(U1, U2, "--resource-provider", U2, "--dry-run",
                          "--yes")
        self.assertEqual(([U1, U2], U2, True, True), (
            args.consumers, args.resource_provider, args.dry_run, args.yes))
        message = self.parse_error(U1, "not-a-uuid")
        self.assertIn("consumer 'not-a-uuid' is not a UUID", message)

    def test_uuid_spellings_are_normalized(self) -> None:
        # is_uuid_like accepts these, but the commands compare them as given
        # with placement's and Nova's lower-case, hyphenated UUIDs.
        self.cls, self.prog = orphan.ClearOrphan, "openstack drain orphan clear"
        spellings = [U1.upper(), U1.replace("-", ""), "{" + U1 + "}"]
        args = self.parse(*spellings)
        self.assertEqual(3, len(args.consumers))
        self.assertEqual([U1] * 3, args.consumers)


class TestSyncParser(fakes.CommandTestCase):
    cls, prog = sync.RunSync, "openstack drain sync"

    def test_defaults(self) -> None:
        args = self.parse()
        self.assertEqual((False, False, 60, 1000, False, 0.1), (
            args.dry_run, args.watch, args.interval, args.page_size,
            args.exit_code, args.max_missing_fraction))

    def test_options(self) -> None:
        args = self.parse("--dry-run", "--watch", "--interval", "5",
                          "--page-size", "50", "--exit-code",
                          "--max-missing-fraction", "0.25")
        self.assertEqual((True, True, 5, 50, True, 0.25), (
            args.dry_run, args.watch, args.interval, args.page_size,
            args.exit_code, args.max_missing_fraction))
        self.assertEqual(86400, self.parse("--interval", "86400").interval)

    def test_numbers_are_bounded_integers(self) -> None:
        # A bad value is an argparse error (exit 2) before any request; a
        # huge interval used to kill --watch after its first pass.
        for value in ("soon", "4", "0", "-5", "86401", "1e3",
                      "99999999999999999999"):
            self.assertIn(f"argument --interval: --interval {value!r}: must "
                          "be an integer from 5 to 86400",
                          self.parse_error("--watch", "--interval", value))
        for value in ("lots", "0", "-1", "10001"):
            self.assertIn(f"--page-size {value!r}: must be an integer from 1 "
                          "to 10000", self.parse_error("--page-size", value))


class TestCommon(fakes.CommandTestCase):
    cls, prog = orphan.ClearOrphan, "openstack drain orphan clear"

    def confirm(self, *argv: str, plan: Any = ("a", "b"), answer: str = "",
                tty: bool = False) -> bool:
        cmd = self.command(answer=answer, tty=tty)
        result: bool = cmd.confirm(self.parse(*argv, cmd=cmd),
                                   planned.Plan(lines=list(plan)))
        return result

    def test_a_403_names_the_policy_and_the_role_it_needs(self) -> None:
        def fail(service: str, status: int, message: str) -> None:
            with common.api_errors():
                raise http.error_type(status)(service, "GET", "/x", status,
                                              message, "req-1")

        exc = self.assertRaises(
            exceptions.CommandError, fail, "nova", 403, "Policy doesn't "
            "allow os_compute_api:os-services:list to be performed.")
        self.assertEqual(
            "nova GET /x: HTTP 403: Policy doesn't allow "
            "os_compute_api:os-services:list to be performed. (request-id "
            "req-1); the drain commands need the admin role, project-scoped, "
            "for Nova and placement", str(exc))
        exc = self.assertRaises(
            exceptions.CommandError, fail, "ironic", 403, "Access was denied "
            "to the following resource: baremetal:node:list_all")
        self.assertIn("baremetal:node:list_all (request-id req-1); listing "
                      "every Ironic node needs a system-scoped reader",
                      str(exc))
        self.assertIn("rbac_service_role_elevated_access", str(exc))
        # Any other failure is the API's words alone.
        exc = self.assertRaises(exceptions.CommandError, fail, "nova", 500,
                                "boom")
        self.assertEqual("nova GET /x: HTTP 500: boom (request-id req-1)",
                         str(exc))

    def test_dry_run_prints_the_plan_and_stops(self) -> None:
        self.assertIs(False, self.confirm("--dry-run", "--yes"))
        self.assertEqual("Plan:\n  a\n  b\n", self.app.stderr.getvalue())

    def test_empty_plan_asks_nothing(self) -> None:
        self.assertIs(False, self.confirm("--yes", plan=()))
        self.assertEqual("nothing to clear\n", self.app.stderr.getvalue())

    def test_yes_goes_ahead_without_asking(self) -> None:
        self.assertIs(True, self.confirm("--yes"))
        self.assertNotIn("[y/N]", self.app.stderr.getvalue())

    def test_no_terminal_and_no_yes_refuses(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.confirm,
                                answer="y\n")
        self.assertIn("pass --yes", str(exc))

    def test_terminal_answers(self) -> None:
        for answer, go in (("y\n", True), (" YES \n", True), ("n\n", False),
                           ("\n", False), ("", False)):
            self.assertIs(go, self.confirm(answer=answer, tty=True), answer)
            self.assertTrue(self.app.stderr.getvalue().endswith(
                "Carry out these 2 step(s)? [y/N] "))

    def test_disruption_budget(self) -> None:
        common.check_budget(1, 3, "records", 0.1)  # one is always allowed
        common.check_budget(2, 20, "records", 0.1)
        exc = self.assertRaises(exceptions.CommandError, common.check_budget,
                                3, 20, "compute nodes", 0.1)
        self.assertEqual(
            "refusing to act on 3 of 20 compute nodes in one run: "
            "--max-fraction 0.1 allows 2; check the plan, then raise "
            "--max-fraction or clear fewer at a time", str(exc))

    def test_confirm_over_budget_refuses_after_the_plan(self) -> None:
        cmd = self.command()
        plan = planned.Plan(lines=["a", "b"],
                            budget=planned.Budget(2, 5, "compute nodes"))
        exc = self.assertRaises(exceptions.CommandError, cmd.confirm,
                                self.parse("--yes", cmd=cmd), plan)
        self.assertIn("refusing to act on 2 of 5 compute nodes", str(exc))
        self.assertEqual("Plan:\n  a\n  b\n", self.app.stderr.getvalue())
        self.assertIs(True, cmd.confirm(
            self.parse("--yes", "--max-fraction", "0.4", cmd=cmd), plan))
        # A dry run shows the plan and says a real run would stop.
        cmd = self.command()
        self.assertIs(False, cmd.confirm(self.parse("--dry-run", cmd=cmd),
                                         plan))
        self.assertIn("A run without --dry-run would stop: refusing to act "
                      "on 2 of 5", self.app.stderr.getvalue())

    def test_api_errors_become_command_errors(self) -> None:
        error = http.ApiError("nova", "GET", "/servers", 503, "busy")

        def fail() -> None:
            with common.api_errors():
                raise error

        exc = self.assertRaises(exceptions.CommandError, fail)
        self.assertEqual(str(error), str(exc))
        self.assertEqual("nova GET /servers: HTTP 503: busy", str(exc))

    def test_api_errors_lets_other_errors_through(self) -> None:
        def fail() -> None:
            with common.api_errors():
                raise KeyError("x")

        self.assertRaises(KeyError, fail)

    def test_progress_only_on_a_terminal(self) -> None:
        quiet = common.Progress("reading")
        quiet(1, 2)
        quiet.close()
        self.assertEqual("", self.sys_stderr.getvalue())
        self.sys_stderr.tty = True
        shown = common.Progress("reading")
        shown(1, 2)
        shown(2, 2)
        shown.close()
        self.assertEqual("\rreading 1/2\rreading 2/2\n",
                         self.sys_stderr.getvalue())

    def test_unique_keeps_the_first_of_each_in_order(self) -> None:
        self.assertEqual(["c2", "c1", "c3"],
                         common.unique(["c2", "c1", "c2", "c3", "c1"]))
        self.assertEqual([], common.unique([]))

    def test_int_arg_without_an_upper_bound(self) -> None:
        check = common.int_arg("--timeout", 1)
        self.assertEqual((1, 10 ** 9), (check("1"), check(str(10 ** 9))))
        for value in ("0", "-3", "soon", "1.5"):
            exc = self.assertRaises(argparse.ArgumentTypeError, check, value)
            self.assertEqual(f"--timeout {value!r}: must be an integer of 1 "
                             "or more", str(exc))

    def test_uuid_arg(self) -> None:
        check = common.uuid_arg("thing")
        self.assertEqual(U1, check(U1))
        exc = self.assertRaises(argparse.ArgumentTypeError, check, "nope")
        self.assertEqual("thing 'nope' is not a UUID", str(exc))


class Found(common.DrainLister):
    """A lister that finds what the test tells it."""

    rows: list[tuple[str]] = []

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        self.found = len(self.rows)
        return ("X",), self.rows


class Failing(planned.PlannedChange[str]):
    """A changing command that records the failures the test tells it."""

    columns = ("X",)
    errors: list[str] = []

    def make_plan(self, parsed_args: argparse.Namespace) -> planned.Plan[str]:
        return planned.Plan(rows=[("row",)], failures=list(self.errors))


class TestExitCodes(fakes.CommandTestCase):
    cls = Found

    def test_exit_code_when_found(self) -> None:
        self.patch(Found, "rows", [("a",)])
        self.assertEqual(common.FOUND_EXIT, self.run_cmd(None, "--exit-code"))
        self.assertEqual(3, common.FOUND_EXIT)
        self.assertEqual("a\n", self.app.stdout.getvalue())
        self.assertEqual(0, self.run_cmd(None))

    def test_empty_table_prints_its_header(self) -> None:
        # cliff prints one blank line for an empty table without
        # --print-empty; ours print the header, and json stays [].
        self.patch(Found, "rows", [])
        cmd = self.command()
        self.assertEqual(0, cmd.run(self.parse("-f", "table", cmd=cmd)))
        self.assertEqual("+---+\n| X |\n+---+\n+---+\n",
                         self.app.stdout.getvalue())
        cmd = self.command()
        self.assertEqual(0, cmd.run(self.parse("-f", "json", cmd=cmd)))
        self.assertEqual("[]", self.app.stdout.getvalue().strip())

    def test_exit_code_when_nothing_found(self) -> None:
        self.patch(Found, "rows", [])
        self.assertEqual(0, self.run_cmd(None, "--exit-code"))

    def test_clear_failures(self) -> None:
        self.cls = Failing
        self.patch(Failing, "errors", ["step one: boom", "step two: bang"])
        self.assertEqual(1, self.run_cmd(None))
        self.assertEqual("failed: step one: boom\nfailed: step two: bang\n"
                         "2 step(s) failed\n", self.app.stderr.getvalue())
        self.assertEqual("row\n", self.app.stdout.getvalue())
        self.patch(Failing, "errors", [])
        self.assertEqual(0, self.run_cmd(None))
        self.assertEqual("nothing to do\n", self.app.stderr.getvalue())
