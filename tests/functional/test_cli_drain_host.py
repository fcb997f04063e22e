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

"""``openstack drain host start|show|finish|cancel`` through the real shell,
against Nova's real API, scheduler, conductor, computes and placement."""
import json
from typing import Any

import fixtures
import webob
from nova import exception as nova_exc
from nova import objects
from placement.objects import resource_provider

from nova_drain_filters import traits
from tests.functional import cli_harness

MARK = traits.DRAIN_HOST


class HostDrainTestBase(cli_harness.CliTestBase):
    HOSTS = ("host1", "host2", "host3")

    def service(self, host: str) -> dict[str, Any]:
        found = self.admin_api.get_services(binary="nova-compute", host=host)
        self.assertEqual(1, len(found), found)
        return found[0]

    def marked(self, host: str) -> bool:
        rp = self._get_provider_uuid_by_host(host)
        return MARK in self._get_provider_traits(rp)

    def show(self, *hosts: str) -> dict[str, dict[str, Any]]:
        rows = self.cli_json("drain", "host", "show", *hosts)
        return {r["Host"]: r for r in rows}

    def change(self, *argv: str, rc: int = 0) -> cli_harness.CliResult:
        """Run a changing command with --yes; check rc and no traceback."""
        run = self.cli("drain", "host", *argv, "--yes", "-f", "json")
        self.assertEqual(rc, run.rc, run)
        self.assertNotIn("Traceback", run.stderr)
        return run


class LifecycleTest(HostDrainTestBase):
    """host1 and host2 are drained together; host1 is retired, host2 comes
    back; host3 takes the boots meanwhile."""

    def test_start_show_finish_cancel(self) -> None:
        s1 = self._create_server(networks="none", host="host1")
        s2 = self._create_server(networks="none", host="host2")
        agg = self._create_aggregate("rack7")
        self.admin_api.add_host_to_aggregate(agg, "host1")

        dry = self.cli("drain", "host", "start", "host1", "host2",
                       "--reason", "rack 7 retire", "--dry-run")
        self.assertEqual(0, dry.rc, dry)
        self.assertIn("host1: mark provider", dry.stderr)
        self.assertFalse(self.marked("host1"))

        self.change("start", "host1", "host2", "--reason", "rack 7 retire")
        for host in ("host1", "host2"):
            service = self.service(host)
            self.assertEqual(("disabled", "drain: rack 7 retire"),
                             (service["status"], service["disabled_reason"]))
            self.assertTrue(self.marked(host))
        for _ in range(2):
            self.assertEqual("host3", self.host_of(self.boot()))
        # Running it again is a no-op.
        again = self.change("start", "host1", "host2", "--reason", "other")
        self.assertEqual({("host1", "nothing to do"),
                          ("host2", "nothing to do")},
                         {(r["Host"], r["Step"])
                          for r in json.loads(again.stdout)})
        self.assertEqual("drain: rack 7 retire",
                         self.service("host1")["disabled_reason"])

        shown = self.show("host1", "host2")
        self.assertEqual(
            ["Host", "Phase", "Instances", "Migrations", "Allocations",
             "Disabled Reason", "Blocked By"], list(shown["host1"]))
        self.assertEqual(
            {"Host": "host1", "Phase": "Draining", "Instances": 1,
             "Migrations": 0, "Allocations": 1,
             "Disabled Reason": "drain: rack 7 retire",
             "Blocked By": f"server {s1['id']}"}, shown["host1"])
        self.assertEqual(f"server {s2['id']}", shown["host2"]["Blocked By"])
        self.assertEqual({"host1", "host2"}, set(self.show()))

        refused = self.change("finish", "host1", rc=1)
        self.assertIn(f"host1: still Draining, blocked by server {s1['id']}",
                      refused.stderr)

        self._delete_server(s1)
        self.assertEqual("Drained", self.show("host1")["host1"]["Phase"])
        up = self.change("finish", "host1", rc=1)
        self.assertIn("host1: Drained, but its nova-compute still reports",
                      up.stderr)
        self.assertEqual("host1", self.service("host1")["host"])

        rp1 = self._get_provider_uuid_by_host("host1")
        self.computes["host1"].stop()
        self.admin_api.put_service_force_down(self.service_id("host1"), True)
        done = self.change("finish", "host1")
        self.assertEqual([("host1", "delete compute service", "released")],
                         [(r["Host"], r["Step"], r["Result"])
                          for r in json.loads(done.stdout)])
        self.assertEqual([], self.admin_api.get_services(
            binary="nova-compute", host="host1"))
        self.assertEqual([], self.placement.get(
            f"/resource_providers?uuid={rp1}", version="1.14"
        ).body["resource_providers"])
        self.assertRaises(nova_exc.HostMappingNotFound,
                          objects.HostMapping.get_by_host, self.ctxt, "host1")
        self.assertEqual([], self.admin_api.api_get(
            f"/os-aggregates/{agg}").body["aggregate"]["hosts"])
        # Nova left nothing of host1: show cannot tell it from a typo and
        # says so, as start would, instead of claiming Released.
        gone = self.cli("drain", "host", "show", "host1")
        self.assertEqual((1, ["host1: no compute service (unknown host, or "
                              "released)"]),
                         (gone.rc, gone.stderr.strip().splitlines()))
        second = self.change("finish", "host1")
        self.assertEqual([("host1", "nothing to do", "already released")],
                         [(r["Host"], r["Step"], r["Result"])
                          for r in json.loads(second.stdout)])

        # host2 comes back: a boot asked onto it fails while it drains, and
        # lands there once the drain is cancelled.
        self.assertEqual("ERROR", self.boot(expected_state="ERROR",
                                            host="host2")["status"])
        self.change("cancel", "host2")
        self.assertEqual(("enabled", None), (
            self.service("host2")["status"],
            self.service("host2")["disabled_reason"]))
        self.assertFalse(self.marked("host2"))
        self.assertEqual("host2", self.host_of(self.boot(host="host2")))
        self.assertEqual([], [h for h in self.show() if h != "host1"])


class SomeoneElsesDisableTest(HostDrainTestBase):
    def test_other_disable_survives_drain_and_cancel(self) -> None:
        self.admin_api.put_service(self.service_id("host2"), {
            "status": "disabled", "disabled_reason": "hardware ticket 42"})
        self.assertEqual("Disabled", self.show("host2")["host2"]["Phase"])

        run = self.change("start", "host2", "--reason", "retire")
        self.assertIn("host2 was disabled by someone else (hardware ticket "
                      "42): it keeps that and gets only the mark", run.stderr)
        self.assertEqual([("mark provider", "done")],
                         [(r["Step"], r["Result"])
                          for r in json.loads(run.stdout)])
        self.assertTrue(self.marked("host2"))
        shown = self.show("host2")["host2"]
        self.assertEqual(("Drained", "hardware ticket 42"),
                         (shown["Phase"], shown["Disabled Reason"]))

        cancel = self.change("cancel", "host2")
        self.assertIn("host2 stays disabled: someone else disabled it "
                      "(hardware ticket 42)", cancel.stderr)
        self.assertFalse(self.marked("host2"))
        service = self.service("host2")
        self.assertEqual(("disabled", "hardware ticket 42"),
                         (service["status"], service["disabled_reason"]))
        self.assertEqual("Disabled", self.show("host2")["host2"]["Phase"])


class StartRollbackTest(HostDrainTestBase):
    """A start of three hosts where one fails leaves all three as they were."""

    def assert_untouched(self) -> None:
        for host in self.HOSTS:
            self.assertEqual(("enabled", None), (
                self.service(host)["status"],
                self.service(host)["disabled_reason"]), host)
            self.assertFalse(self.marked(host), host)

    def test_unknown_host_and_non_admin_roles(self) -> None:
        run = self.change("start", "host1", "nosuch", "host2", "--reason",
                          "x", rc=1)
        self.assertEqual(
            ["nothing changed: nosuch: no compute service (unknown host, or "
             "released)"], run.stderr.strip().splitlines())
        self.assert_untouched()
        # A member or a reader: Nova's own 403, naming its policy, in one
        # line with the role the commands need; exit 1; nothing changes.
        for roles, argv in (("member,reader", ("host", "start", "host1",
                                               "--reason", "x", "--yes")),
                            ("reader", ("stale", "list"))):
            auth = cli_harness.HarnessAuth(
                self.cli_endpoints(), user="demo", roles=roles,
                project=self.api_fixture.project_id)
            refused = self.cli("drain", *argv, auth=auth)
            [line] = refused.stderr.strip().splitlines()
            self.assertEqual(1, refused.rc, refused)
            # The first read refused: os-services for host start,
            # os-hypervisors for stale list.
            self.assertRegex(line, r"^nova GET /os-\S+: HTTP 403: Policy "
                             r"doesn't allow os_compute_api:os-\S+ to be "
                             r"performed\. \(request-id req-\S+\); ")
            self.assertTrue(line.endswith(
                "the drain commands need the admin role, project-scoped, "
                "for Nova and placement"), line)
        self.assert_untouched()

    def test_conflict_on_the_third_hosts_trait_write(self) -> None:
        victim = self._get_provider_uuid_by_host("host3")
        set_traits = resource_provider.ResourceProvider.set_traits

        def conflict(rp: Any, traits_: Any) -> Any:
            if rp.uuid == victim:
                raise webob.exc.HTTPConflict("injected: resource provider "
                                             "is being updated elsewhere")
            return set_traits(rp, traits_)

        self.useFixture(fixtures.MonkeyPatch(
            "placement.objects.resource_provider.ResourceProvider.set_traits",
            conflict))
        run = self.change("start", "host1", "host2", "host3", "--reason",
                          "x", rc=1)
        failed = [line for line in run.stderr.splitlines()
                  if line.startswith("failed: ")]
        self.assertEqual(1, len(failed), run.stderr)
        self.assertIn(f"failed: host3: mark provider {victim}: ", failed[0])
        self.assertIn("HTTP 409", failed[0])
        self.assertIn("rolled back this run's changes on host1, host2",
                      failed[0])
        results = [(r["Host"], r["Result"]) for r in json.loads(run.stdout)]
        self.assertEqual([("host1", "done"), ("host2", "done"),
                          ("host3", "failed"), ("host2", "rolled back"),
                          ("host1", "rolled back")], results)
        self.assert_untouched()


class WaitTimeoutTest(HostDrainTestBase):
    HOSTS = ("host1",)

    def test_wait_gives_up_naming_the_server(self) -> None:
        server = self._create_server(networks="none", host="host1")
        self.change("start", "host1", "--reason", "x")
        run = self.change("finish", "host1", "--wait", "--timeout", "5",
                          rc=1)
        self.assertIn(f"gave up waiting after 5s: host1: still Draining, "
                      f"blocked by server {server['id']}", run.stderr)
        self.assertEqual("Draining", self.show("host1")["host1"]["Phase"])

