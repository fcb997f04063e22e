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

"""``openstack drain orphan list|clear`` against a fake cloud."""
from unittest import mock

from osc_lib import exceptions

from nova_drain_filters.clients import nova_db
from osc_plugin.v1 import orphan
from tests.unit import drain_fakes as df
from tests.unit.osc_plugin import fakes
from tests.unit.osc_plugin.fakes import ELSE
from tests.unit.osc_plugin.fakes import GONE
from tests.unit.osc_plugin.fakes import HERE
from tests.unit.osc_plugin.fakes import RP_GPU
from tests.unit.osc_plugin.fakes import RP_N1
from tests.unit.osc_plugin.fakes import RP_N2
from tests.unit.osc_plugin.fakes import RP_SHARED

ROW_ELSE = (ELSE, RP_N1, "c1", "n1", "VCPU=2",
            "instance lives elsewhere: on host c2 node n2", "p-else")
ROW_GONE_N1 = (GONE, RP_N1, "c1", "n1", "CUSTOM_BAREMETAL_GOLD=1",
               "consumer does not exist", "p-gone")
ROW_GONE_GPU = (GONE, RP_GPU, "c1", "n1", "VGPU=1", "consumer does not exist",
                "p-gone")
BOTH = f"{RP_N1},{RP_GPU}"


class TestListOrphan(fakes.CommandTestCase):
    cls, prog = orphan.ListOrphan, "openstack drain orphan list"

    def test_columns(self) -> None:
        self.assertEqual(("Consumer", "Resource Provider", "Host", "Node",
                          "Resources", "Reason", "Project"), orphan.COLUMNS)

    def test_rows(self) -> None:
        client = fakes.orphan_cloud()
        columns, rows = self.take(client)
        self.assertEqual(orphan.COLUMNS, columns)
        self.assertEqual([ROW_ELSE, ROW_GONE_N1, ROW_GONE_GPU], rows)
        self.assertNotIn((RP_SHARED,),
                         client.placement.called("provider_allocations"))
        self.assertEqual([], client.placement.writes)

    def test_resource_provider_filter(self) -> None:
        _, rows = self.take(fakes.orphan_cloud(), "--resource-provider",
                            RP_GPU)
        self.assertEqual([ROW_GONE_GPU], rows)

    def test_exit_code(self) -> None:
        self.assertEqual(3, self.run_cmd(fakes.orphan_cloud(), "--exit-code"))
        self.assertIn("CUSTOM_BAREMETAL_GOLD=1", self.app.stdout.getvalue())
        self.assertEqual(0, self.run_cmd(fakes.orphan_cloud()))
        self.assertEqual(0, self.run_cmd(
            fakes.orphan_cloud(), "--exit-code", "--resource-provider", RP_N2))

    def test_api_error_is_a_command_error(self) -> None:
        client = fakes.orphan_cloud()
        error = fakes.api_error(500, "nova", "GET", "/os-migrations")
        client.nova.errors["migrations_in_progress"] = error
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertEqual(str(error), str(exc))


    def test_nova_config_reads_nova_from_its_databases(self) -> None:
        client = fakes.orphan_cloud()
        records = fakes.orphan_cloud().nova  # the same cloud, another source
        with mock.patch.object(nova_db, "NovaRecords",
                               return_value=records) as made:
            _, rows = self.take(client, "--nova-config", "/etc/nova/nova.conf")
        made.assert_called_once_with("/etc/nova/nova.conf")
        self.assertEqual([ROW_ELSE, ROW_GONE_N1, ROW_GONE_GPU], rows)
        self.assertEqual([], client.nova.calls)
        self.assertEqual({"hypervisors", "servers", "migrations_in_progress"},
                         {c[0] for c in records.calls})

    def test_nova_config_that_cannot_be_used_is_one_line(self) -> None:
        why = nova_db.Unavailable("cannot read cell cell1: unable to open "
                                  "database file")
        with mock.patch.object(nova_db, "NovaRecords", side_effect=why):
            exc = self.assertRaises(exceptions.CommandError, self.take,
                                    fakes.orphan_cloud(), "--nova-config",
                                    "/etc/nova/nova.conf")
        self.assertEqual(str(why), str(exc))


    def test_empty_nova_config_is_a_usage_error(self) -> None:
        # "--nova-config $NOVA_CONF" with the variable unset must not fall
        # back to the API quietly.
        self.assertIn("argument --nova-config: empty path",
                      self.parse_error("--nova-config", ""))

    def test_incomplete_nova_view_is_refused_in_one_line(self) -> None:
        client = fakes.orphan_cloud()
        client.nova.hypervisor_list = []  # Nova lists no compute node
        client.placement.compute = {fakes.RP_N1, fakes.RP_N2}
        with mock.patch.object(nova_db, "NovaRecords",
                               return_value=client.nova):
            exc = self.assertRaises(exceptions.CommandError, self.take,
                                    client, "--nova-config", "/etc/nova/x")
        self.assertIn("refusing to judge any allocation: Nova lists no compute "
                      "node record, while placement has 2 compute node "
                      "providers", str(exc))
        self.assertIn("--nova-config may name another cloud's nova.conf",
                      str(exc))
        self.assertNotIn("\n", str(exc))
        self.assertEqual([], client.placement.called("provider_allocations"))


class TestClearOrphan(fakes.CommandTestCase):
    cls, prog = orphan.ClearOrphan, "openstack drain orphan clear"

    def setUp(self) -> None:
        super().setUp()
        self.client = fakes.orphan_cloud()

    def test_dry_run(self) -> None:
        columns, rows = self.take(self.client, "--dry-run")
        self.assertEqual(("Consumer", "Resource Providers", "Result"), columns)
        self.assertEqual([(ELSE, RP_N1, "planned"), (GONE, BOTH, "planned")],
                         rows)
        self.assertEqual(
            f"Plan:\n  {ELSE}: remove its allocations on {RP_N1}\n"
            f"  {GONE}: remove its allocations on {RP_N1}, {RP_GPU}\n",
            self.app.stderr.getvalue())
        self.assertEqual([], self.client.placement.writes)

    def test_yes_removes_only_the_orphaned_part(self) -> None:
        _, rows = self.take(self.client, "--yes")
        self.assertEqual([(ELSE, RP_N1, "rewritten, kept 1 provider(s)"),
                          (GONE, BOTH, "deleted")], rows)
        replace, delete = self.client.placement.writes
        self.assertEqual(("delete_consumer_allocations", GONE), delete)
        name, uuid, keep, current = replace
        self.assertEqual(("replace_consumer_allocations", ELSE, [RP_N2], 4),
                         (name, uuid, list(keep), current["consumer_generation"]))

    def test_named_consumer_only(self) -> None:
        _, rows = self.take(self.client, GONE, "--yes")
        self.assertEqual([(GONE, BOTH, "deleted")], rows)
        self.assertEqual([("delete_consumer_allocations", GONE)],
                         self.client.placement.writes)

    def test_named_consumer_and_provider(self) -> None:
        _, rows = self.take(self.client, GONE, "--resource-provider", RP_GPU,
                            "--yes")
        self.assertEqual([(GONE, RP_GPU, "rewritten, kept 1 provider(s)")],
                         rows)

    def test_not_an_orphan(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, HERE, GONE, "--yes")
        self.assertEqual(f"not an orphaned consumer: {HERE}", str(exc))
        self.assertEqual([], self.client.placement.writes)

    def test_disruption_budget_counts_compute_nodes(self) -> None:
        # A dead consumer on n2 too: both of the cloud's nodes touched,
        # which a partial server list (a project-scoped token) looks like.
        self.client.placement.allocations[RP_N2][GONE] = {"VCPU": 1}
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, "--yes")
        self.assertEqual(
            "refusing to act on 2 of 2 compute nodes in one run: "
            "--max-fraction 0.1 allows 1; check the plan, then raise "
            "--max-fraction or clear fewer at a time", str(exc))
        self.assertEqual([], self.client.placement.writes)
        # Within the budget: one node's orphans, or the operator's say-so.
        _, rows = self.take(self.client, "--yes", "--resource-provider",
                            RP_GPU)
        self.assertEqual([(GONE, RP_GPU, "rewritten, kept 1 provider(s)")],
                         rows)
        _, rows = self.take(self.client, "--yes", "--max-fraction", "1")
        self.assertEqual(2, len(rows))

    def test_instance_back_on_the_node_is_skipped(self) -> None:
        self.client.nova.server = lambda uuid: df.server(uuid, "n1", "c1")
        _, rows = self.take(self.client, ELSE, "--yes")
        self.assertEqual([(ELSE, RP_N1, "skipped (instance is on n1 now)")],
                         rows)
        self.assertEqual([], self.client.placement.writes)

    def test_failure_is_reported_and_the_rest_goes_on(self) -> None:
        error = fakes.api_error(500, url=f"/allocations/{GONE}")
        self.client.placement.errors["delete_consumer_allocations"] = error
        self.assertEqual(1, self.run_cmd(self.client, "--yes"))
        self.assertEqual([f"consumer {GONE}: {error}"], self.cmd.failures)
        stderr = self.app.stderr.getvalue()
        self.assertTrue(stderr.endswith(
            f"\nfailed: consumer {GONE}: {error}\n1 step(s) failed\n"), stderr)
        out = self.app.stdout.getvalue()
        self.assertIn(f"{GONE} {BOTH} failed", out)
        self.assertIn(f"{ELSE} {RP_N1} rewritten, kept 1 provider(s)", out)

    def test_removed_by_another_run_meanwhile_is_already_gone(self) -> None:
        # Another clear deletes GONE between this run's read and its write:
        # placement answers 409, the re-read finds nothing left.
        placement = self.client.placement
        delete = placement.delete_consumer_allocations

        def raced(uuid: str, current: dict) -> None:
            delete(uuid, current)
            placement.consumers[uuid] = {"allocations": {}}
            raise fakes.api_error(409, url=f"/allocations/{uuid}")

        placement.delete_consumer_allocations = raced
        self.assertEqual(0, self.run_cmd(self.client, "--yes", GONE))
        self.assertEqual([], self.cmd.failures)
        self.assertIn(f"{GONE} {BOTH} already gone (after 1 consumer "
                      "generation conflict)", self.app.stdout.getvalue())

    def test_terminal_answer_no(self) -> None:
        _, rows = self.take(self.client, answer="no\n", tty=True)
        self.assertEqual([(ELSE, RP_N1, "not done"), (GONE, BOTH, "not done")],
                         rows)
        self.assertEqual([], self.client.placement.writes)

    def test_no_terminal_no_yes(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client)
        self.assertIn("--yes", str(exc))
        self.assertEqual([], self.client.placement.writes)

    def test_nova_config_feeds_the_plan_and_the_budget(self) -> None:
        records = fakes.orphan_cloud().nova
        with mock.patch.object(nova_db, "NovaRecords", return_value=records):
            self.take(self.client, "--dry-run", "--nova-config",
                      "/etc/nova/nova.conf")
        self.assertEqual([], self.client.nova.called("servers"))
        self.assertEqual([], self.client.nova.called("hypervisors"))
        self.assertEqual(2, len(records.called("hypervisors")))

    def test_nothing_to_do(self) -> None:
        _, rows = self.take(fakes.FakeDrainClient(), "--yes")
        self.assertEqual([], rows)
        self.assertEqual("nothing to clear\n", self.app.stderr.getvalue())
