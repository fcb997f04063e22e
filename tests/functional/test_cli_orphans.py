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

"""``openstack drain orphan list|clear`` through the real openstack shell,
against Nova's API, scheduler and placement with orphans made the way they
happen in real life.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
import io
from contextlib import redirect_stdout

import fixtures
from nova.cmd import manage

from tests.functional import cli_harness
from tests.functional import fake_ironic_driver

GOLD = fake_ironic_driver.GOLD
NODES = ["6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000001",
         "6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000002"]


class BaremetalOrphanTest(cli_harness.CliTestBase):
    """Baremetal nodes offer one unit of CUSTOM_BAREMETAL_GOLD each."""

    HOSTS = ("bm-compute",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"

    def setUp(self) -> None:
        driver = fake_ironic_driver.FakeIronicDriver
        self.useFixture(fixtures.MonkeyPatch(
            "tests.functional.fake_ironic_driver.FakeIronicDriver.NODES",
            list(NODES)))
        self.useFixture(fixtures.MonkeyPatch(
            "tests.functional.fake_ironic_driver.FakeIronicDriver."
            "RESOURCE_CLASS", GOLD))
        del driver
        super().setUp()
        self.flavor = fake_ironic_driver.post_gold_flavor(self.admin_api)

    def boot_gold(self) -> dict:
        return self._create_server(flavor_id=self.flavor, networks="none")

    def delete_losing_allocations(self, server: dict) -> None:
        """Delete the instance while the allocation removal fails, as when
        placement is unreachable at that moment."""
        with fixtures.MockPatch(
                "nova.scheduler.client.report.SchedulerReportClient."
                "delete_allocation_for_instance", return_value=False):
            self._delete_server(server)
        allocations = self.placement.get(
            f"/allocations/{server['id']}", version="1.28").body
        self.assertEqual({GOLD: 1}, list(
            allocations["allocations"].values())[0]["resources"])

    def nova_manage_audit(self) -> tuple[int, str]:
        out = io.StringIO()
        with redirect_stdout(out):
            rc = manage.PlacementCommands().audit(verbose=True)
        return rc, out.getvalue()

    def test_custom_class_orphan_found_where_audit_sees_none(self) -> None:
        live = self.boot_gold()
        doomed = self.boot_gold()
        self.delete_losing_allocations(doomed)

        rc, text = self.nova_manage_audit()
        self.assertEqual(0, rc, text)  # 0: "no orphaned allocations"
        self.assertNotIn(doomed["id"], text)

        rows = self.cli_json("drain", "orphan", "list")
        self.assertEqual([doomed["id"]], [r["Consumer"] for r in rows])
        row = rows[0]
        self.assertEqual(f"{GOLD}=1", row["Resources"])
        self.assertEqual("consumer does not exist", row["Reason"])
        self.assertEqual("bm-compute", row["Host"])
        self.assertIn(row["Node"], NODES)
        self.assertNotEqual(live["OS-EXT-SRV-ATTR:hypervisor_hostname"],
                            row["Node"])
        self.assertEqual(
            ["Consumer", "Resource Provider", "Host", "Node", "Resources",
             "Reason", "Project"], list(row))

        found = self.cli("drain", "orphan", "list", "--exit-code", "-f",
                         "value", "-c", "Consumer")
        self.assertEqual((3, doomed["id"]), (found.rc, found.stdout.strip()))

    def test_clear_is_safe_and_idempotent(self) -> None:
        live = self.boot_gold()
        doomed = self.boot_gold()
        self.delete_losing_allocations(doomed)

        dry = self.cli("drain", "orphan", "clear", "--dry-run", "-f", "json")
        self.assertEqual(0, dry.rc, dry.stderr)
        self.assertIn(f"{doomed['id']}: remove its allocations", dry.stderr)
        self.assertEqual(1, len(self.cli_json("drain", "orphan", "list")))

        refused = self.cli("drain", "orphan", "clear")
        self.assertNotEqual(0, refused.rc)
        self.assertIn("pass --yes", refused.stderr)
        self.assertNotIn("Traceback", refused.stderr)

        declined = self.cli("drain", "orphan", "clear", stdin_text="n\n",
                            tty=True)
        self.assertEqual(0, declined.rc, declined.stderr)
        self.assertEqual(1, len(self.cli_json("drain", "orphan", "list")))

        done = self.cli("drain", "orphan", "clear", "--yes", "-f", "json")
        self.assertEqual(0, done.rc, done.stderr)
        self.assertIn('"deleted"', done.stdout)
        self.assertEqual([], self.cli_json("drain", "orphan", "list"))
        # The live instance's allocation is untouched.
        live_alloc = self.placement.get(
            f"/allocations/{live['id']}", version="1.28").body["allocations"]
        self.assertEqual(1, len(live_alloc))

        again = self.cli("drain", "orphan", "clear", "--yes", "-f", "json")
        self.assertEqual((0, "[]"), (again.rc, again.stdout.strip()))

    def test_bad_input_is_one_line(self) -> None:
        bad = self.cli("drain", "orphan", "clear", "not-a-uuid", "--yes")
        self.assertNotEqual(0, bad.rc)
        self.assertIn("consumer 'not-a-uuid' is not a UUID", bad.stderr)
        self.assertNotIn("Traceback", bad.stderr)
        unknown = self.cli("drain", "orphan", "clear", NODES[0], "--yes")
        self.assertEqual(1, unknown.rc)
        self.assertEqual([f"not an orphaned consumer: {NODES[0]}"],
                         unknown.stderr.strip().splitlines())


class EvacuationLeftoverTest(cli_harness.CliTestBase):
    """An evacuated instance keeps its source allocation while the source
    compute is down: the orphaned part goes, the live part stays."""

    HOSTS = ("host1", "host2")

    def test_only_the_source_part_is_removed(self) -> None:
        server = self._create_server(networks="none", host="host1")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        self.computes["host1"].stop()
        self.admin_api.put_service_force_down(self.service_id("host1"), True)
        self.admin_api.post_server_action(server["id"], {"evacuate": {}})
        # The fake driver brings an evacuated instance up SHUTOFF; only the
        # move matters here.
        server = self._wait_for_server_parameter(
            server, {"OS-EXT-SRV-ATTR:host": "host2",
                     "OS-EXT-STS:task_state": None})
        source = self._get_provider_uuid_by_host("host1")
        dest = self._get_provider_uuid_by_host("host2")
        before = self.placement.get(f"/allocations/{server['id']}",
                                    version="1.28").body["allocations"]
        self.assertEqual({source, dest}, set(before))

        rows = self.cli_json("drain", "orphan", "list")
        self.assertEqual([(server["id"], source)],
                         [(r["Consumer"], r["Resource Provider"]) for r in rows])
        self.assertEqual("instance lives elsewhere: on host host2 node host2",
                         rows[0]["Reason"])

        done = self.cli("drain", "orphan", "clear", server["id"], "--yes",
                        "-f", "json")
        self.assertEqual(0, done.rc, done.stderr)
        self.assertIn("rewritten, kept 1 provider(s)", done.stdout)
        after = self.placement.get(f"/allocations/{server['id']}",
                                   version="1.28").body["allocations"]
        self.assertEqual({dest}, set(after))
        self.assertEqual(before[dest]["resources"], after[dest]["resources"])
        self.assertEqual([], self.cli_json("drain", "orphan", "list"))
