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

"""``openstack drain host start|show|finish|cancel`` against a fake cloud."""
from osc_lib import exceptions

from osc_plugin.v1 import host
from tests.unit.osc_plugin import drain_cloud
from tests.unit.osc_plugin import fakes
from tests.unit.osc_plugin.drain_cloud import MARK

STEP_COLUMNS = ("Host", "Step", "Target", "Result")


class HostCase(fakes.CommandTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.cloud = drain_cloud.Cloud()
        self.sleeps: list[float] = []
        self.now = [100.0]

        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.now[0] += seconds

        self.patch(host.time, "sleep", sleep)
        self.patch(host.time, "monotonic", lambda: self.now[0])

    def results(self, rows: list) -> list[tuple[str, str, str]]:
        return [(r[0], r[1], r[3]) for r in rows]


class TestShowHost(HostCase):
    cls, prog = host.ShowHost, "openstack drain host show"

    def test_parser(self) -> None:
        self.assertEqual([], self.parse().hosts)
        self.assertEqual(["a", "b"], self.parse("a", "b").hosts)

    def test_columns_and_rows(self) -> None:
        self.assertEqual(("Host", "Phase", "Instances", "Migrations",
                          "Allocations", "Disabled Reason", "Blocked By"),
                         host.COLUMNS)
        self.cloud.disable("c1", "drain: retire")
        self.cloud.add_server("s1", "c1", "rp-c1")
        self.cloud.allocations["rp-c1"]["dead"] = {"VCPU": 1}
        self.cloud.migrations.append(drain_cloud.df.compute.Migration(
            "m1", "s9", "running", "x", "rp-c1", "c9", "c1"))
        columns, rows = self.take(self.cloud.client(), "c1", "c2")
        self.assertEqual(host.COLUMNS, columns)
        self.assertEqual([
            ("c1", "Draining", 1, 1, 2, "drain: retire",
             "server s1, migration m1, consumer dead"),
            ("c2", "Active", 0, 0, 0, "", "")], rows)
        # Named hosts: their own servers and migrations, not every page.
        self.assertEqual([("c1",), ("c2",)],
                         self.cloud.nova.called("servers"))

    def test_no_host_shows_every_host_not_active(self) -> None:
        self.cloud.disable("c2", "hardware ticket 42")
        self.cloud.traits["rp-c1"].add(MARK)
        self.cloud.node_traits["n1"] = {MARK}  # a node drain only
        _, rows = self.take(self.cloud.client())
        self.assertEqual([("c1", "Drained"), ("c2", "Disabled")],
                         [r[:2] for r in rows])
        self.assertEqual([(None,)], self.cloud.nova.called("servers"))
        self.assertEqual(["rp-c1", "rp-c2"], sorted(
            c[0] for c in self.cloud.placement.called("provider_allocations")))

    def test_unknown_name_is_an_error_not_released(self) -> None:
        # Nothing tells a typo from a cleanly released host: refused as
        # 'start' refuses it, exit 1.
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(), "c1", "nosuch")
        self.assertEqual("nosuch: no compute service (unknown host, or "
                         "released)", str(exc))

    def test_released_while_nova_left_compute_nodes(self) -> None:
        # finish deleted the service, but a compute node record stayed.
        del self.cloud.services["c2"]
        _, rows = self.take(self.cloud.client(), "c2")
        self.assertEqual([("c2", "Released")], [r[:2] for r in rows])
        _, rows = self.take(self.cloud.client())
        self.assertIn(("c2", "Released"), [r[:2] for r in rows])

    def test_api_error(self) -> None:
        self.cloud.nova.errors["services"] = fakes.api_error(503, "nova")
        self.assertRaises(exceptions.CommandError, self.take,
                          self.cloud.client(), "c1")


class TestStartHost(HostCase):
    cls, prog = host.StartHost, "openstack drain host start"

    def test_parser(self) -> None:
        parsed = self.parse("a", "b", "--reason", "rack 7", "--yes")
        self.assertEqual((["a", "b"], "rack 7", True, False),
                         (parsed.hosts, parsed.reason, parsed.yes,
                          parsed.dry_run))
        self.assertIn("--reason", self.parse_error("a"))
        self.assertIn("<host>", self.parse_error("--reason", "x"))

    def test_marks_all_then_disables(self) -> None:
        columns, rows = self.take(self.cloud.client(), "c1", "c2",
                                  "--reason", "rack 7", "--yes")
        self.assertEqual(STEP_COLUMNS, columns)
        self.assertEqual([
            ("c1", "mark provider", "done"), ("c2", "mark provider", "done"),
            ("c1", "disable service", "done"),
            ("c2", "disable service", "done")], self.results(rows))
        self.assertEqual(("disabled", "drain: rack 7"), (
            self.cloud.services["c1"].status,
            self.cloud.services["c1"].disabled_reason))
        self.assertIn("Plan:\n  c1: mark provider rp-c1", self.app.stderr.getvalue())
        # Again: nothing to do, nothing written.
        before = len(self.cloud.writes())
        _, rows = self.take(self.cloud.client(), "c1", "c2", "--reason",
                            "other", "--yes")
        self.assertEqual([("c1", "nothing to do", "already draining"),
                          ("c2", "nothing to do", "already draining")],
                         self.results(rows))
        self.assertEqual(before, len(self.cloud.writes()))

    def test_dry_run_and_no_terminal(self) -> None:
        _, rows = self.take(self.cloud.client(), "c1", "--reason", "x",
                            "--dry-run")
        self.assertEqual({"planned"}, {r[3] for r in rows})
        self.assertEqual([], self.cloud.writes())
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(), "c1", "--reason", "x")
        self.assertIn("refusing to change anything without a terminal",
                      str(exc))

    def test_asks_and_no_means_no(self) -> None:
        _, rows = self.take(self.cloud.client(), "c1", "--reason", "x",
                            answer="n\n", tty=True)
        self.assertEqual({"not done"}, {r[3] for r in rows})
        self.assertEqual([], self.cloud.writes())

    def test_ironic_host_says_it_fronts_every_node(self) -> None:
        self.take(self.cloud.client(), "bm", "--reason", "x", "--dry-run")
        self.assertIn("Note: bm is an Ironic nova-compute service fronting "
                      "2 node(s)", self.app.stderr.getvalue())

    def test_unknown_host_changes_nothing(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(), "c1", "nosuch",
                                "--reason", "x", "--yes")
        self.assertEqual("nothing changed: nosuch: no compute service "
                         "(unknown host, or released)", str(exc))
        self.assertEqual([], self.cloud.writes())

    def test_bad_reason(self) -> None:
        for reason in (" ", "x" * 250):
            exc = self.assertRaises(exceptions.CommandError, self.take,
                                    self.cloud.client(), "c1", "--reason",
                                    reason, "--yes")
            self.assertEqual("--reason must be 1 to 248 characters", str(exc))

    def test_failure_rolls_back_this_runs_changes(self) -> None:
        self.cloud.disable("c2", "hardware ticket 42")
        self.cloud.nova.errors["update_service"] = drain_cloud.conflict("nova")
        rc = self.run_cmd(self.cloud.client(), "c1", "c2", "--reason", "x",
                          "--yes")
        self.assertEqual(1, rc)
        err = self.app.stderr.getvalue()
        self.assertIn(
            "failed: c1: disable service svc-c1: nova PUT /resource_providers"
            "/rp-c2/traits: HTTP 409: Resource provider's generation already "
            "changed. Please update the generation and try again. (request-id "
            "req-42); rolled "
            "back this run's changes on c1, c2\n", err)
        self.assertEqual(set(), self.cloud.traits["rp-c1"])
        self.assertEqual(set(), self.cloud.traits["rp-c2"])
        self.assertEqual("hardware ticket 42",
                         self.cloud.services["c2"].disabled_reason)

    def test_failed_rollback_is_reported(self) -> None:
        placement = self.cloud.placement

        def refuse(*args: object, **kwargs: object) -> None:
            # placement goes away between the marks and their rollback
            placement.errors["update_provider_traits"] = fakes.api_error(503)
            raise fakes.api_error(500, "nova", "PUT", "/os-services/svc-c1")

        self.cloud.nova.update_service = refuse  # type: ignore[method-assign]
        rc = self.run_cmd(self.cloud.client(), "c1", "--reason", "x", "--yes")
        self.assertEqual(1, rc)
        err = self.app.stderr.getvalue()
        self.assertIn("failed: c1: disable service svc-c1: nova PUT "
                      "/os-services/svc-c1: HTTP 500: boom; rolled back this "
                      "run's changes on c1\n", err)
        self.assertIn("failed: rollback c1: unmark provider rp-c1: placement "
                      "DELETE /x: HTTP 503: boom\n", err)
        self.assertIn("2 step(s) failed", err)

    def test_first_step_failing_made_no_change(self) -> None:
        self.cloud.placement.errors["update_provider_traits"] = (
            fakes.api_error(500))
        rc = self.run_cmd(self.cloud.client(), "c1", "--reason", "x", "--yes")
        self.assertEqual(1, rc)
        self.assertIn("failed: c1: mark provider rp-c1: placement DELETE /x: "
                      "HTTP 500: boom; rolled back this run's changes (none "
                      "were made)", self.app.stderr.getvalue())
        self.assertEqual("enabled", self.cloud.services["c1"].status)


class TestCancelHost(HostCase):
    cls, prog = host.CancelHost, "openstack drain host cancel"

    def test_enables_only_ours(self) -> None:
        for h, reason in (("c1", "drain: x"), ("c2", "ticket 42")):
            self.cloud.disable(h, reason)
            self.cloud.traits[f"rp-{h}"].add(MARK)
        _, rows = self.take(self.cloud.client(), "c1", "c2", "--yes")
        self.assertEqual([("c1", "unmark provider", "done"),
                          ("c2", "unmark provider", "done"),
                          ("c1", "enable service", "done")],
                         self.results(rows))
        self.assertEqual(("enabled", "disabled"), (
            self.cloud.services["c1"].status,
            self.cloud.services["c2"].status))
        self.assertIn("Note: c2 stays disabled", self.app.stderr.getvalue())

    def test_reason_changed_since_we_looked(self) -> None:
        self.cloud.disable("c1", "drain: x")
        real = self.cloud.nova.services

        def services(host_: str | None = None) -> list:
            if host_ is not None:  # the re-check right before enabling
                self.cloud.disable("c1", "ticket 43")
            return real(host_)

        self.cloud.nova.services = services  # type: ignore[method-assign]
        _, rows = self.take(self.cloud.client(), "c1", "--yes")
        self.assertEqual([("c1", "enable service", "left disabled: no "
                           "longer disabled by a drain")], self.results(rows))
        self.assertEqual("ticket 43",
                         self.cloud.services["c1"].disabled_reason)

    def test_ironic_node_marks_go_first(self) -> None:
        self.cloud.node_traits = {"n1": {MARK}, "n2": {MARK}}
        self.cloud.traits["n1"].add(MARK)
        self.take(self.cloud.client(), "bm", "--yes")
        self.assertEqual([("remove_trait", "n1", MARK),
                          ("update_provider_traits", "n1", set(), {MARK}),
                          ("remove_trait", "n2", MARK)],
                         self.cloud.writes())

    def test_released_host_fails(self) -> None:
        rc = self.run_cmd(self.cloud.client(), "gone", "--yes")
        self.assertEqual(1, rc)
        self.assertIn("failed: gone: no compute service",
                      self.app.stderr.getvalue())


class TestFinishHost(HostCase):
    cls, prog = host.FinishHost, "openstack drain host finish"

    def drained(self, h: str = "c1", down: bool = True) -> None:
        self.cloud.disable(h, "drain: x")
        self.cloud.traits[f"rp-{h}"].add(MARK)
        if down:
            self.cloud.down(h)

    def test_parser(self) -> None:
        parsed = self.parse("a", "--wait", "--timeout", "5")
        self.assertEqual((["a"], True, 5), (parsed.hosts, parsed.wait,
                                            parsed.timeout))
        self.assertIsNone(self.parse("a").timeout)
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.cloud.client(), "a", "--timeout", "5")
        self.assertEqual("--timeout needs --wait", str(exc))
        self.assertIn("--timeout '0': must be an integer of 1 or more",
                      self.parse_error("a", "--timeout", "0"))

    def test_releases_and_checks(self) -> None:
        self.drained()
        _, rows = self.take(self.cloud.client(), "c1", "--yes")
        self.assertEqual([("c1", "delete compute service", "released")],
                         self.results(rows))
        self.assertNotIn("c1", self.cloud.services)
        self.assertEqual([("c1",)], self.cloud.nova.called("host_mapped"))
        _, rows = self.take(self.cloud.client(), "c1", "--yes")
        self.assertEqual([("c1", "nothing to do", "already released")],
                         self.results(rows))

    def test_leftovers_are_failures(self) -> None:
        self.drained()
        self.cloud.keep_providers = True
        rc = self.run_cmd(self.cloud.client(), "c1", "--yes")
        self.assertEqual(1, rc)
        self.assertIn("failed: c1: released, but Nova left behind provider "
                      "rp-c1, membership of aggregate rack7 (see 'openstack "
                      "drain stale list')", self.app.stderr.getvalue())

    def test_refusals(self) -> None:
        self.drained("c2", down=False)
        self.cloud.add_server("s1", "c1", "rp-c1")
        self.drained("c1")
        rc = self.run_cmd(self.cloud.client(), "c1", "c2", "--yes")
        self.assertEqual(1, rc)
        err = self.app.stderr.getvalue()
        self.assertIn("failed: c1: still Draining, blocked by server s1\n",
                      err)
        self.assertIn("failed: c2: Drained, but its nova-compute still "
                      "reports", err)
        self.assertEqual([], self.cloud.nova.called("delete_service"))

    def test_nova_refusal_is_quoted(self) -> None:
        self.drained()
        self.cloud.nova.errors["delete_service"] = fakes.api_error(
            409, "nova", "DELETE", "/os-services/svc-c1")
        rc = self.run_cmd(self.cloud.client(), "c1", "--yes")
        self.assertEqual(1, rc)
        self.assertIn("failed: c1: delete compute service svc-c1: nova "
                      "DELETE /os-services/svc-c1: HTTP 409: boom",
                      self.app.stderr.getvalue())

    def test_wait_releases_when_the_server_leaves(self) -> None:
        self.drained()
        self.cloud.add_server("s1", "c1", "rp-c1")

        def leave(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.now[0] += seconds
            if len(self.sleeps) == 3:
                self.cloud.servers.clear()
                self.cloud.allocations.clear()

        self.patch(host.time, "sleep", leave)
        _, rows = self.take(self.cloud.client(), "c1", "--wait", "--yes")
        self.assertEqual([("c1", "delete compute service", "released")],
                         self.results(rows))
        self.assertEqual([1.0, 2.0, 4.0], self.sleeps)
        self.assertIn("c1: wait up to 600s until it is Drained",
                      self.app.stderr.getvalue())

    def test_wait_gives_up_at_the_deadline(self) -> None:
        self.drained()
        self.cloud.add_server("s1", "c1", "rp-c1")
        rc = self.run_cmd(self.cloud.client(), "c1", "--wait", "--timeout",
                          "5", "--yes")
        self.assertEqual(1, rc)
        self.assertEqual([1.0, 2.0, 2.0], self.sleeps)
        self.assertIn("failed: gave up waiting after 5s: c1: still Draining, "
                      "blocked by server s1", self.app.stderr.getvalue())
        self.assertIn("c1", self.cloud.services)

    def test_wait_does_not_wait_for_a_host_never_drained(self) -> None:
        rc = self.run_cmd(self.cloud.client(), "c1", "--wait", "--yes")
        self.assertEqual(1, rc)
        self.assertEqual([], self.sleeps)
        self.assertIn("failed: c1: not draining (Active)",
                      self.app.stderr.getvalue())

    def flaky_reads(self, fail: set[int]) -> list[int]:
        """Make the hypervisor reads numbered in ``fail`` (1 = the first,
        before any wait) answer 503."""
        real, calls = self.cloud.nova.hypervisors, []

        def hypervisors() -> list:
            calls.append(1)
            if len(calls) in fail:
                raise fakes.api_error(503, "nova", "GET", "/os-hypervisors")
            return real()

        self.cloud.nova.hypervisors = hypervisors  # type: ignore[method-assign]
        return calls

    def test_wait_rides_out_a_failed_read(self) -> None:
        self.drained()
        self.cloud.add_server("s1", "c1", "rp-c1")
        calls = self.flaky_reads({2})  # the first poll fails

        def leave(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.now[0] += seconds
            if len(self.sleeps) == 2:  # the server leaves before the second
                self.cloud.servers.clear()
                self.cloud.allocations.clear()

        self.patch(host.time, "sleep", leave)
        _, rows = self.take(self.cloud.client(), "c1", "--wait", "--yes")
        self.assertEqual([("c1", "delete compute service", "released")],
                         self.results(rows))
        self.assertEqual((3, [1.0, 2.0], []),
                         (len(calls), self.sleeps, self.cmd.failures))

    def test_wait_reports_the_last_failed_read_at_the_deadline(self) -> None:
        self.drained()
        self.cloud.add_server("s1", "c1", "rp-c1")
        self.flaky_reads({2, 3, 4, 5})
        rc = self.run_cmd(self.cloud.client(), "c1", "--wait", "--timeout",
                          "3", "--yes")
        self.assertEqual(1, rc)
        self.assertIn("failed: gave up waiting after 3s: c1: could not read: "
                      "nova GET /os-hypervisors: HTTP 503: boom",
                      self.app.stderr.getvalue())

    def test_ironic_release_notes_the_node_marks(self) -> None:
        self.cloud.disable("bm", "drain: x")
        self.cloud.down("bm")
        self.take(self.cloud.client(), "bm", "--dry-run")
        self.assertIn("Note: bm's Ironic nodes keep the mark in Ironic",
                      self.app.stderr.getvalue())
