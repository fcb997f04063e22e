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

"""Acts 4 and 5: stale records and orphaned allocations, found and cleared
with ``openstack drain stale|orphan``, made the way Nova leaves them
(as in tests/functional/test_cli_stale.py and test_cli_orphans.py)."""
from __future__ import annotations

import datetime
import json
from typing import Any

import fixtures
from oslo_utils import uuidutils

from tests.functional import base
from tests.functional import cli_harness
from tests.functional import fake_ironic_driver

from .screen import ActMixin

#: Nova's own clean-up of an instance's allocations, made to fail as when
#: placement is unreachable at that moment (nova/scheduler/client/report.py
#: SchedulerReportClient.delete_allocation_for_instance returns False).
LOSE_ALLOCATIONS = ("nova.scheduler.client.report.SchedulerReportClient."
                    "delete_allocation_for_instance")


class StaleAct(ActMixin, cli_harness.CliTestBase):
    """host3's nova-compute stops for good; a provider outlives its node."""

    NUMBER, TITLE = 4, "Stale records: list, clear, gone"
    HOSTS = ("host1", "host2", "host3")

    def stop(self, host: str) -> None:
        """Stop a compute; its heartbeat ages past service_down_time."""
        self.computes[host].stop()
        base.age_service(self.ctxt, host, datetime.timedelta(hours=2))

    def test_act(self) -> None:
        say, check = self.screen.say, self.screen.check
        self.stop("host3")
        lonely = uuidutils.generate_uuid()
        # A provider whose compute node record is gone (a node removed
        # while placement was unreachable).
        self.placement.post("/resource_providers", {
            "name": "gone-node", "uuid": lonely}, version="1.20")
        self._set_provider_traits(lonely, ["COMPUTE_NODE"])
        say("host3's nova-compute stopped two hours ago; provider gone-node "
            "has no compute node.")
        listed = self.openstack("drain", "stale", "list",
                                "-c", "Kind", "-c", "Host", "-c", "Node",
                                "-c", "Reasons")
        check("host3" in listed.stdout and "gone-node" in listed.stdout,
              "stale list did not show host3 and gone-node")
        say("(a small cloud: --max-fraction 1 lifts the default budget of "
            "10% of records per run)")
        cleared = self.openstack("drain", "stale", "clear", "--all",
                                 "--max-fraction", "1", "--yes")
        check("deleted" in cleared.stdout, "stale clear deleted nothing")
        after = self.openstack("drain", "stale", "list", "-f", "json")
        check(json.loads(after.stdout) == [], "stale records left after clear")
        hosts = sorted(s["host"] for s in self.admin_api.get_services(
            binary="nova-compute"))
        check(hosts == ["host1", "host2"], f"compute services left: {hosts}")
        say(f"Compute services now: {', '.join(hosts)}; the stale list is "
            "empty.")
        self.keep_logs()


class OrphanAct(ActMixin, cli_harness.CliTestBase):
    """Two baremetal nodes; one instance's delete lost its allocation."""

    NUMBER, TITLE = 5, "Orphaned allocations: list, clear, live ones kept"
    HOSTS = ("bm-compute",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"
    NODES = ["6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000001",
             "6b0f6c84-1c6c-4b1e-8d5a-0a0a0a000002"]

    def setUp(self) -> None:
        # As tests/functional/test_cli_orphans.py BaremetalOrphanTest.
        self.useFixture(fixtures.MonkeyPatch(
            "tests.functional.fake_ironic_driver.FakeIronicDriver.NODES",
            list(self.NODES)))
        self.useFixture(fixtures.MonkeyPatch(
            "tests.functional.fake_ironic_driver.FakeIronicDriver."
            "RESOURCE_CLASS", fake_ironic_driver.GOLD))
        super().setUp()
        self.flavor = fake_ironic_driver.post_gold_flavor(self.admin_api)

    def allocations(self) -> dict[str, Any]:
        """Every consumer's allocations, by consumer then provider."""
        found: dict[str, Any] = {}
        for rp in self.placement.get("/resource_providers",
                                     version="1.14").body[
                                         "resource_providers"]:
            body = self.placement.get(
                f"/resource_providers/{rp['uuid']}/allocations").body
            for consumer, alloc in body["allocations"].items():
                found.setdefault(consumer, {})[rp["name"]] = alloc[
                    "resources"]
        return found

    def show_allocations(self, names: dict[str, str]) -> dict[str, Any]:
        found = self.allocations()
        for consumer, by_rp in sorted(found.items()):
            for rp, resources in by_rp.items():
                self.screen.say(f"  {names.get(consumer, consumer)}: "
                                f"{json.dumps(resources)} on node {rp}")
        return found

    def test_act(self) -> None:
        say, check = self.screen.say, self.screen.check
        live = self._create_server(flavor_id=self.flavor, networks="none",
                                   name="live")
        doomed = self._create_server(flavor_id=self.flavor, networks="none",
                                     name="doomed")
        with fixtures.MockPatch(LOSE_ALLOCATIONS, return_value=False):
            self._delete_server(doomed)
        names = {live["id"]: f"server live ({live['id']})",
                 doomed["id"]: f"deleted server doomed ({doomed['id']})"}
        say("Server doomed was deleted while placement was unreachable; "
            "placement holds:")
        before = self.show_allocations(names)
        check(doomed["id"] in before, "no orphan was made")
        listed = self.openstack("drain", "orphan", "list", "-c", "Consumer",
                                "-c", "Reason")
        check(doomed["id"] in listed.stdout and live["id"] not in
              listed.stdout, "orphan list did not show only doomed")
        self.openstack("drain", "orphan", "clear", "--yes")
        after_list = self.openstack("drain", "orphan", "list", "-f", "json")
        check(json.loads(after_list.stdout) == [], "orphans left after clear")
        say("Placement now holds:")
        after = self.show_allocations(names)
        check(doomed["id"] not in after, "doomed's allocation is still there")
        kept = after.get(live["id"]) == before.get(live["id"])
        check(kept and live["id"] in after,
              "live allocations changed: "
              f"{before.get(live['id'])} -> {after.get(live['id'])}")
        say("Live allocations untouched (same as before): "
            f"{'yes' if kept else 'NO'}")
        self.keep_logs()
