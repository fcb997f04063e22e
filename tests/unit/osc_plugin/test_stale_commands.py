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

"""``openstack drain stale list|clear`` against a fake cloud."""
import datetime

from osc_lib import exceptions

from nova_drain_filters.clients import http
from osc_plugin.v1 import stale
from tests.unit import drain_fakes as df
from tests.unit.osc_plugin import fakes
from tests.unit.osc_plugin.fakes import DEAD
from tests.unit.osc_plugin.fakes import NODE_DOWN
from tests.unit.osc_plugin.fakes import NODE_GONE
from tests.unit.osc_plugin.fakes import NODE_OK
from tests.unit.osc_plugin.fakes import RP_ORPHAN
from tests.unit.osc_plugin.fakes import SVC2

ROW_GONE = (NODE_GONE, "compute_node", "c1", NODE_GONE, "ironic",
            f"node missing from Ironic: {NODE_GONE}", "ironic_node_missing",
            0, 0)
ROW_DOWN = (NODE_DOWN, "compute_node", "c2", NODE_DOWN, "ironic",
            "service forced down", "service_forced_down", 0, 0)
ROW_RP = (RP_ORPHAN, "resource_provider", "", RP_ORPHAN, "",  # node: its name
          "resource provider with no compute node", "provider_without_node",
          0, 1)
DELETE_SERVICE = ("delete compute service", SVC2)
DELETE_NODE = ("delete compute node record", NODE_GONE)
DELETE_RP = ("delete resource provider", RP_ORPHAN)


class TestListStale(fakes.CommandTestCase):
    cls, prog = stale.ListStale, "openstack drain stale list"

    def test_columns(self) -> None:
        self.assertEqual(("UUID", "Kind", "Host", "Node", "Hypervisor Type",
                          "Reasons", "Reason Codes", "Instances",
                          "Allocations"), stale.COLUMNS)

    def test_rows(self) -> None:
        client = fakes.stale_cloud()
        columns, rows = self.take(client)
        self.assertEqual(stale.COLUMNS, columns)
        self.assertEqual([ROW_GONE, ROW_DOWN, ROW_RP], rows)
        self.assertEqual([1000], client.ironic.page_sizes)
        self.assertEqual([(None,), ("COMPUTE_NODE",)],
                         client.placement.called("providers"))
        self.assertEqual(sorted([NODE_GONE, NODE_DOWN, RP_ORPHAN]), sorted(
            c[0] for c in client.placement.called("provider_allocations")))

    def test_grace_option(self) -> None:
        self.assertEqual(600, self.parse().grace)
        self.assertEqual(0, self.parse("--grace", "0").grace)
        self.assertIn("--grace '-1': must be an integer of 0 or more",
                      self.parse_error("--grace", "-1"))

    def test_grace_reaches_the_decision(self) -> None:
        # c2 went down 10 s ago (not forced): within the default grace it
        # may be rebooting and is not listed; with --grace 0 it is.
        client = fakes.stale_cloud()
        ten_ago = (datetime.datetime.now(datetime.timezone.utc)
                   - datetime.timedelta(seconds=10)).strftime(
                       "%Y-%m-%dT%H:%M:%S.000000")
        client.nova.service_list[1] = df.service(
            "c2", "down", updated_at=ten_ago, uuid=fakes.SVC2)
        _, rows = self.take(client)
        self.assertNotIn(NODE_DOWN, [r[0] for r in rows])
        _, rows = self.take(client, "--grace", "0")
        self.assertEqual(["service_down"],
                         [r[6] for r in rows if r[0] == NODE_DOWN])

    def test_untrusted_listing_reports_no_missing_node(self) -> None:
        # The token lists no node at all: NODE_GONE is not called missing,
        # and stderr says why.
        client = fakes.stale_cloud()
        client.ironic.nodes = []
        _, rows = self.take(client)
        self.assertEqual([ROW_DOWN, ROW_RP], rows)
        self.assertEqual(
            "not reporting ironic_node_missing: the Ironic listing lacks 3 of "
            "the 3 Ironic compute nodes Nova knows (at most 1 may be "
            "missing), more than --max-missing-fraction 0.1 ([drain_filters] "
            "ironic_missing_max_fraction) allows: the credentials may not see "
            "every node; if the nodes really are gone, raise "
            "--max-missing-fraction\n", self.app.stderr.getvalue())

    def test_missing_fraction_option(self) -> None:
        # Two of three gone: believed only when the operator says so.
        client = fakes.stale_cloud()
        client.ironic.nodes = client.ironic.nodes[:1]
        _, rows = self.take(client)
        self.assertEqual(0, sum("ironic_node_missing" in r[6] for r in rows))
        _, rows = self.take(client, "--max-missing-fraction", "0.7")
        self.assertEqual(2, sum("ironic_node_missing" in r[6] for r in rows))
        self.assertEqual("", self.app.stderr.getvalue())

    def test_without_ironic(self) -> None:
        client = fakes.stale_cloud(ironic=False)
        _, rows = self.take(client)
        self.assertEqual([ROW_DOWN, ROW_RP], rows)
        self.assertEqual([], client.ironic.page_sizes)

    def test_host_filter(self) -> None:
        _, rows = self.take(fakes.stale_cloud(), "--host", "c1")
        self.assertEqual([ROW_GONE], rows)

    def test_unknown_host(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                fakes.stale_cloud(), "--host", "nope")
        self.assertEqual("unknown compute host 'nope'", str(exc))

    def test_reason_filter(self) -> None:
        _, rows = self.take(fakes.stale_cloud(), "--reason",
                            "provider_without_node")
        self.assertEqual([ROW_RP], rows)

    def test_exit_code(self) -> None:
        self.assertEqual(3, self.run_cmd(fakes.stale_cloud(), "--exit-code"))
        self.assertIn(NODE_GONE, self.app.stdout.getvalue())
        self.assertEqual(0, self.run_cmd(fakes.stale_cloud()))
        self.assertEqual(0, self.run_cmd(
            fakes.stale_cloud(), "--exit-code", "--reason", "duplicate_node"))
        self.assertEqual("", self.app.stdout.getvalue())

    def test_api_error_is_a_command_error(self) -> None:
        client = fakes.stale_cloud()
        error = fakes.api_error(503, "nova", "GET", "/os-services")
        client.nova.errors["services"] = error
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertEqual(str(error), str(exc))


class TestClearStale(fakes.CommandTestCase):
    cls, prog = stale.ClearStale, "openstack drain stale clear"

    def setUp(self) -> None:
        super().setUp()
        self.client = fakes.stale_cloud()
        self.deleted: list[str] = []
        self.patch(stale.nova_db, "delete_compute_node", self.fake_delete)

    def fake_delete(self, uuid: str, config: str | None) -> str:
        self.deleted.append(uuid)
        self.assertEqual("/etc/nova/nova.conf", config)
        return f"c1/{uuid}"

    def test_dry_run(self) -> None:
        columns, rows = self.take(self.client, "--all", "--dry-run",
                                  "--max-fraction", "1")
        self.assertEqual(("Step", "Target", "Result"), columns)
        self.assertEqual([(*DELETE_SERVICE, "planned"),
                          (*DELETE_NODE, "planned"),
                          (*DELETE_RP, "planned")], rows)
        self.assertEqual(
            "Plan:\n"
            f"  delete compute service {SVC2} (host c2, 1 node(s))\n"
            f"  delete compute node record {NODE_GONE} (host c1 node "
            f"{NODE_GONE}: node missing from Ironic: {NODE_GONE})\n"
            f"  delete resource provider {RP_ORPHAN} (no compute node)\n",
            self.app.stderr.getvalue())
        self.assertEqual([], self.client.placement.writes)
        self.assertEqual([], self.client.nova.called("delete_service"))

    def test_yes_carries_out_everything(self) -> None:
        self.client.nova.on_delete_service = (
            lambda _svc: self.client.placement.provider_roots.pop(NODE_DOWN))
        _, rows = self.take(self.client, "--all", "--yes", "--nova-config",
                            "/etc/nova/nova.conf", "--max-fraction", "0.75")
        self.assertEqual([
            (*DELETE_SERVICE, "deleted"),
            (*DELETE_NODE, f"deleted c1/{NODE_GONE}; provider deleted "
                           "(0 dead consumer(s) cleared)"),
            (*DELETE_RP, "provider deleted (1 dead consumer(s) cleared)")],
            rows)
        self.assertEqual([(SVC2,)], self.client.nova.called("delete_service"))
        self.assertEqual([NODE_GONE], self.deleted)
        self.assertEqual([("delete_consumer_allocations", DEAD),
                          ("delete_provider", NODE_GONE),
                          ("delete_provider", RP_ORPHAN)],
                         sorted(self.client.placement.writes))
        self.assertEqual([], self.cmd.failures)

    def test_provider_left_behind_by_service_delete(self) -> None:
        _, rows = self.take(self.client, NODE_DOWN, "--yes")
        self.assertEqual([(*DELETE_SERVICE,
                           f"deleted; provider(s) left behind: {NODE_DOWN}")],
                         rows)

    def test_service_delete_lists_providers_once(self) -> None:
        self.client.nova.hypervisor_list.append(
            fakes.df.hv(fakes.uuid(0xD), host="c2", service_id=SVC2))
        self.take(self.client, "--all", "--yes", "--nova-config",
                  "/etc/nova/nova.conf", "--max-fraction", "1",
                  "--max-missing-fraction", "0.5")
        calls = self.client.placement.called("providers")
        self.assertEqual([(None,), ("COMPUTE_NODE",)], calls[:2])
        self.assertEqual(1, len(calls[2:]))

    def test_single_record_needs_nova_config(self) -> None:
        rc = self.run_cmd(self.client, NODE_GONE, "--yes")
        self.assertEqual(1, rc)
        [failure] = self.cmd.failures
        self.assertTrue(failure.startswith(
            f"delete compute node record {NODE_GONE}: no API removes"), failure)
        stderr = self.app.stderr.getvalue()
        self.assertIn(f"failed: delete compute node record {NODE_GONE}: "
                      "no API removes a single compute node record", stderr)
        self.assertTrue(stderr.endswith("1 step(s) failed\n"), stderr)
        self.assertEqual([], self.deleted)
        self.assertEqual([], self.client.placement.writes)

    def test_provider_already_gone(self) -> None:
        self.client.placement.errors["delete_provider"] = fakes.api_error(404)
        _, rows = self.take(self.client, RP_ORPHAN, "--yes")
        self.assertEqual([(*DELETE_RP, "provider already gone")], rows)

    def test_provider_delete_error_is_a_failure(self) -> None:
        error = fakes.api_error(409)
        self.client.placement.errors["delete_provider"] = error
        _, rows = self.take(self.client, RP_ORPHAN, "--yes")
        self.assertEqual([(*DELETE_RP, "failed")], rows)
        self.assertEqual([f"delete resource provider {RP_ORPHAN}: {error}"],
                         self.cmd.failures)

    def test_unknown_record(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, NODE_GONE, NODE_OK, "--yes")
        self.assertEqual(f"not a stale record: {NODE_OK}", str(exc))
        self.assertEqual([], self.client.placement.writes)

    def test_no_terminal_no_yes(self) -> None:
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, RP_ORPHAN)
        self.assertIn("--yes", str(exc))
        self.assertEqual([], self.client.placement.writes)

    def test_terminal_answer(self) -> None:
        _, rows = self.take(self.client, RP_ORPHAN, answer="n\n", tty=True)
        self.assertEqual([(*DELETE_RP, "not done")], rows)
        self.assertEqual([], self.client.placement.writes)
        _, rows = self.take(self.client, RP_ORPHAN, answer="y\n", tty=True)
        self.assertEqual([(*DELETE_RP, "provider deleted (1 dead consumer(s) "
                                       "cleared)")], rows)

    def test_live_consumer_keeps_the_provider(self) -> None:
        self.client.nova.migration_list.append(
            fakes.df.migration(fakes.uuid(0x99), DEAD))
        _, rows = self.take(self.client, RP_ORPHAN, "--yes")
        self.assertEqual([("skip", RP_ORPHAN, f"in use by {DEAD}")], rows)
        self.assertEqual([], self.client.placement.writes)

    def test_disruption_budget(self) -> None:
        # Three of the four records in one run: 0.1 allows one.
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, "--all", "--yes")
        self.assertEqual(
            "refusing to act on 3 of 4 compute node records and providers in "
            "one run: --max-fraction 0.1 allows 1; check the plan, then raise "
            "--max-fraction or clear fewer at a time", str(exc))
        self.assertIn("Plan:\n", self.app.stderr.getvalue())
        self.assertEqual([], self.client.placement.writes)
        self.assertEqual([], self.client.nova.called("delete_service"))
        self.assertIn("--max-fraction 0.5 allows 2", str(self.assertRaises(
            exceptions.CommandError, self.take, self.client, "--all", "--yes",
            "--max-fraction", "0.5")))
        # One named record is within the budget.
        _, rows = self.take(self.client, RP_ORPHAN, "--yes")
        self.assertEqual([(*DELETE_RP, "provider deleted (1 dead "
                                       "consumer(s) cleared)")], rows)

    def test_untrusted_listing_refuses_every_clear(self) -> None:
        self.client.ironic.nodes = []
        self.client.scope = "the token is scoped to project demo"
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, RP_ORPHAN, "--yes")
        self.assertEqual(
            "refusing to clear anything: the Ironic listing lacks 3 of the 3 "
            "Ironic compute nodes Nova knows (at most 1 may be missing), more "
            "than --max-missing-fraction 0.1 ([drain_filters] "
            "ironic_missing_max_fraction) allows: the credentials may not see "
            "every node (the token is scoped to project demo); if the nodes "
            "really are gone, raise --max-missing-fraction", str(exc))
        self.assertEqual([], self.client.placement.writes)

    def test_provider_stands_for_the_node_it_is_named_after(self) -> None:
        # DEAD is an instance on node-z, the node RP_ORPHAN is named after:
        # in use, not "lives elsewhere".
        self.client.placement.names[RP_ORPHAN] = "node-z"
        self.client.nova.server_list.append(fakes.df.server(DEAD, "node-z",
                                                            "c3"))
        _, rows = self.take(self.client, RP_ORPHAN, "--yes")
        self.assertEqual([("skip", RP_ORPHAN, f"in use by {DEAD}")], rows)
        self.assertEqual([], self.client.placement.writes)

    def test_instance_landed_between_plan_and_answer_is_kept(self) -> None:
        self.client.placement.names[RP_ORPHAN] = "node-z"
        cmd = self.command(self.client, tty=True)

        def land_then_answer() -> str:
            self.client.nova.server_list.append(
                fakes.df.server(DEAD, "node-z", "c3"))
            return "y\n"

        cmd.app.stdin.readline = land_then_answer
        cmd.failures = []
        _, rows = cmd.take_action(self.parse(RP_ORPHAN, cmd=cmd))
        self.assertEqual([(*DELETE_RP, "failed")], list(rows))
        self.assertEqual([f"delete resource provider {RP_ORPHAN}: kept: "
                          f"consumer {DEAD}: instance is on node-z now"],
                         cmd.failures)
        self.assertEqual([], self.client.placement.writes)

    def test_api_error_while_gathering(self) -> None:
        error = http.ApiError("placement", "GET", "/resource_providers", 500,
                              "boom")
        self.client.placement.errors["providers"] = error
        exc = self.assertRaises(exceptions.CommandError, self.take,
                                self.client, "--all", "--yes")
        self.assertEqual(str(error), str(exc))
