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

"""``openstack drain stale list|clear`` through the real openstack shell,
with stale records made the way they happen in real life."""
import datetime
import json

import fixtures
from nova import objects
from oslo_utils import uuidutils

from nova_drain_filters.clients import nova_db
from tests.functional import base
from tests.functional import cli_harness


class StoppedServiceTest(cli_harness.CliTestBase):
    """host3's nova-compute stops; host2 is busy and stops too."""

    HOSTS = ("host1", "host2", "host3")

    def stop(self, host: str) -> None:
        """Stop a compute and let its heartbeat age past service_down_time."""
        self.computes[host].stop()
        base.age_service(self.ctxt, host, datetime.timedelta(hours=2))

    def test_list_clear_and_refuse(self) -> None:
        busy = self._create_server(networks="none", host="host2")
        self.stop("host3")
        self.stop("host2")

        rows = self.cli_json("drain", "stale", "list")
        by_host = {r["Host"]: r for r in rows}
        self.assertEqual({"host2", "host3"}, set(by_host))
        self.assertEqual(
            ["UUID", "Kind", "Host", "Node", "Hypervisor Type", "Reasons",
             "Reason Codes", "Instances", "Allocations"], list(rows[0]))
        self.assertIn("service down: last seen", by_host["host3"]["Reasons"])
        self.assertEqual("service_down", by_host["host3"]["Reason Codes"])
        # host2 still has its server: not stale, and the list says why.
        self.assertEqual("service_down_with_servers",
                         by_host["host2"]["Reason Codes"])
        self.assertEqual((1, 1), (by_host["host2"]["Instances"],
                                  by_host["host2"]["Allocations"]))
        self.assertEqual(["host3"], [r["Host"] for r in self.cli_json(
            "drain", "stale", "list", "--host", "host3")])
        unknown = self.cli("drain", "stale", "list", "--host", "nosuch")
        self.assertEqual((1, ["unknown compute host 'nosuch'"]),
                         (unknown.rc, unknown.stderr.strip().splitlines()))
        exit_code = self.cli("drain", "stale", "list", "--exit-code")
        self.assertEqual(3, exit_code.rc)

        dry = self.cli("drain", "stale", "clear", "--all", "--dry-run",
                       "-f", "json")
        self.assertEqual(0, dry.rc, dry.stderr)
        self.assertIn("delete compute service", dry.stderr)
        self.assertEqual(2, len(self.cli_json("drain", "stale", "list")))

        done = self.cli("drain", "stale", "clear", "--all", "--yes",
                        "-f", "json")
        self.assertEqual(0, done.rc, done.stderr)
        results = {r["Result"] for r in json.loads(done.stdout)}
        self.assertIn("deleted", results)
        self.assertIn("service has 1 instance(s)", results)
        hosts = {s["host"] for s in self.admin_api.get_services(
            binary="nova-compute")}
        self.assertEqual({"host1", "host2"}, hosts)  # host2 was refused
        self.assertIsNone(self._get_provider_uuid_by_host_or_none("host3"))
        self.assertEqual(busy["id"], self.api.get_server(busy["id"])["id"])

        again = self.cli("drain", "stale", "clear", "--all", "--yes",
                         "-f", "json")
        self.assertEqual((0, "nothing to clear\n"), (again.rc, again.stderr))
        self.assertEqual([("skip", "service has 1 instance(s)")],
                         [(r["Step"], r["Result"])
                          for r in json.loads(again.stdout)])

    def test_provider_nova_leaves_behind_is_cleared_next(self) -> None:
        # An instance on host3 is deleted while placement is unreachable: its
        # allocation stays. Then host3's nova-compute stops for good.
        doomed = self._create_server(networks="none", host="host3")
        rp = self._get_provider_uuid_by_host("host3")
        with fixtures.MockPatch(
                "nova.scheduler.client.report.SchedulerReportClient."
                "delete_allocation_for_instance", return_value=False):
            self._delete_server(doomed)
        self.stop("host3")

        # Nova deletes the service but cannot delete a provider that holds
        # allocations, and says nothing (services.py delete): reported.
        first = self.clear_all()
        self.assertEqual(
            [("delete compute service",
              f"deleted; provider(s) left behind: {rp}")],
            [(r["Step"], r["Result"]) for r in first])
        rows = self.cli_json("drain", "stale", "list")
        self.assertEqual([(rp, "resource_provider", 1)],
                         [(r["UUID"], r["Kind"], r["Allocations"])
                          for r in rows])

        # The next run clears the dead consumer's allocation, then the
        # provider; a third run has nothing to do.
        second = self.clear_all()
        self.assertEqual(
            [("delete resource provider", rp,
              "provider deleted (1 dead consumer(s) cleared)")],
            [(r["Step"], r["Target"], r["Result"]) for r in second])
        self.assertEqual([], self.cli_json("drain", "stale", "list"))
        self.assertEqual([], self.clear_all())

    def test_instance_landing_after_the_plan_keeps_its_allocation(
            self) -> None:
        # host1 dies; its instance is evacuated to host2, and Nova leaves
        # the source allocation on host1's provider until host1 is back.
        server = self._create_server(networks="none", host="host1")
        rp = self._get_provider_uuid_by_host("host1")
        self.stop("host1")
        self._evacuate_server(server, {"host": "host2"}, "host2")
        server = self._start_server(server)  # evacuated instances stay off
        self.assertEqual({rp, self._get_provider_uuid_by_host("host2")},
                         set(self.allocations(server["id"])))
        # host1's compute node record goes (through Nova's object layer,
        # as 'stale clear --nova-config' does); its provider stays, with
        # the evacuated instance's allocation: a provider without a node.
        nova_db.delete_compute_node(rp, None)
        self.assertEqual([(rp, "resource_provider", 1)], [
            (r["UUID"], r["Kind"], r["Allocations"])
            for r in self.cli_json("drain", "stale", "list")])

        def land() -> None:
            # While the operator reads the plan, host1 comes back (Nova
            # undeletes its compute node: same uuid, same provider) and the
            # instance is migrated onto it: its allocation is now on rp.
            self.restart_compute_service(self.computes["host1"])
            self.heartbeat("host1")
            self._confirm_resize(self._migrate_server(server, host="host1"))
            self.assertEqual([rp], list(self.allocations(server["id"])))

        run = self.cli("drain", "stale", "clear", rp, "-f", "json",
                       stdin_text="y\n", tty=True, before_answer=land)
        self.assertIn(f"delete resource provider {rp} (no compute node)",
                      run.stderr)
        self.assertEqual(1, run.rc, run.stderr)
        self.assertIn(f"failed: delete resource provider {rp}: kept: "
                      f"consumer {server['id']}: instance is on host1 now",
                      run.stderr)
        self.assertEqual([rp], list(self.allocations(server["id"])))
        self.assertEqual(rp, self._get_provider_uuid_by_host("host1"))

    def heartbeat(self, host: str) -> None:
        """The heartbeat a started compute sends (the harness runs no timer)."""
        service = objects.Service.get_by_compute_host(self.ctxt, host)
        service.last_seen_up = datetime.datetime.now(datetime.timezone.utc)
        service.save()

    def allocations(self, consumer: str) -> dict:
        """The consumer's allocations in placement, by provider."""
        found: dict = self.placement.get(
            f"/allocations/{consumer}").body["allocations"]
        return found

    def clear_all(self) -> list[dict]:
        """``stale clear --all --yes -f json``; the plan goes to stderr."""
        run = self.cli("drain", "stale", "clear", "--all", "--yes", "-f",
                       "json")
        self.assertEqual(0, run.rc, run.stderr)
        self.assertNotIn("Traceback", run.stderr)
        return json.loads(run.stdout)

    def _get_provider_uuid_by_host_or_none(self, host: str) -> str | None:
        providers = self.placement.get(
            f"/resource_providers?name={host}", version="1.14").body
        found = providers["resource_providers"]
        return found[0]["uuid"] if found else None


class DuplicateAndProviderTest(cli_harness.CliTestBase,
                               base.RebalanceDuplicateMixin):
    """A rebalance duplicate and a provider whose compute node is gone."""

    def setUp(self) -> None:
        super().setUp()
        self.lonely = uuidutils.generate_uuid()
        self.placement.post("/resource_providers", {
            "name": "gone-node", "uuid": self.lonely}, version="1.20")
        self._set_provider_traits(self.lonely, ["COMPUTE_NODE"])

    def test_partial_failure_then_object_layer(self) -> None:
        rows = {r["UUID"]: r for r in self.cli_json("drain", "stale", "list")}
        self.assertEqual({self.dup_uuid, self.lonely}, set(rows))
        self.assertIn("duplicate compute node: node-x is also on host host2",
                      rows[self.dup_uuid]["Reasons"])
        self.assertEqual("resource provider with no compute node",
                         rows[self.lonely]["Reasons"])
        only = self.cli_json("drain", "stale", "list", "--reason",
                             "duplicate_node")
        self.assertEqual([self.dup_uuid], [r["UUID"] for r in only])

        # Two records at once is more than the default budget allows.
        over = self.cli("drain", "stale", "clear", "--all", "--yes")
        self.assertEqual(1, over.rc)
        self.assertIn("refusing to act on 2 of ", over.stderr)
        self.assertIn("--max-fraction 0.1 allows 1", over.stderr)

        # No API removes one compute node row: that step fails, the other
        # goes on, and the command says so and exits 1.
        run = self.cli("drain", "stale", "clear", "--all", "--yes",
                       "--max-fraction", "1", "-f", "json")
        self.assertEqual(1, run.rc)
        self.assertIn(f"failed: delete compute node record {self.dup_uuid}: "
                      "no API removes a single compute node record",
                      run.stderr)
        self.assertIn("1 step(s) failed", run.stderr)
        self.assertNotIn("Traceback", run.stderr)
        self.assertEqual([self.dup_uuid], [r["UUID"] for r in self.cli_json(
            "drain", "stale", "list")])

        # On a controller, Nova's object layer does it (here: the harness's
        # own, already loaded, Nova configuration).
        self.assertEqual("host1/node-x",
                         nova_db.delete_compute_node(self.dup_uuid, None))
        self.placement.delete(f"/resource_providers/{self.dup_uuid}",
                              version="1.14")
        self.assertEqual([], self.cli_json("drain", "stale", "list"))
        nothing = self.cli("drain", "stale", "clear", "--all", "--yes")
        self.assertEqual((0, "nothing to clear\n"),
                         (nothing.rc, nothing.stderr))
        # An empty table still shows its header (cliff alone prints one
        # blank line); json is [].
        self.assertEqual("Step", nothing.stdout.split("|")[1].strip())
        listed = self.cli("drain", "stale", "list")
        self.assertIn("| Reason Codes |", listed.stdout)

    def test_bad_input(self) -> None:
        # Bad arguments exit 2 (argparse), as cli.rst says.
        neither = self.cli("drain", "stale", "clear", "--yes")
        self.assertEqual(2, neither.rc)
        self.assertIn("one of the arguments <uuid> --all is required",
                      neither.stderr)
        both = self.cli("drain", "stale", "clear", "--all", self.lonely)
        self.assertEqual(2, both.rc)
        self.assertIn("argument <uuid>: not allowed with argument --all",
                      both.stderr)
        self.assertNotIn("Traceback", both.stderr)
        bad = self.cli("drain", "stale", "clear", "xyz")
        self.assertEqual(2, bad.rc)
        self.assertIn("stale record 'xyz' is not a UUID", bad.stderr)
        live = self.compute_node("host2", "node-x").uuid
        notstale = self.cli("drain", "stale", "clear", live, "--yes")
        self.assertEqual(1, notstale.rc)
        self.assertIn(f"not a stale record: {live}", notstale.stderr)
