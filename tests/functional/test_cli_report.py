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

"""``openstack drain report`` on one cloud holding a host of every reason.

The real shell, Nova's harness with a real Ironic: bm-compute fronts Ironic
nodes (``FakeIronicDriver``, one CUSTOM_BAREMETAL each, as Nova's Ironic
driver reports), the vm-* hosts run ``fake.SmallFakeDriver``. Every count
and inventory sum is checked against the cloud as built: placement's
inventories, read here one provider at a time.

Driver: ``FakeIronicDriver`` and ``SmallFakeDriver``; one cloud, one test.
"""
import datetime
import os
from typing import Any

import fixtures
from nova import objects
from oslo_utils import uuidutils
from prometheus_client import parser

from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import traits
from tests.functional import baremetal_base
from tests.functional import cli_harness
from tests.functional import fake_ironic_driver

RC = "CUSTOM_BAREMETAL"
VM_HOSTS = ("vm-ok", "vm-twin", "vm-disabled", "vm-forced", "vm-down",
            "vm-draining", "vm-noprov")
BAREMETAL = "baremetal_unavailable"
#: node name -> the reason it is counted under (None: schedulable).
IRONIC_FIRST = {
    "ok": None, "used": None, "drained": "drain_drained",
    "maint": f"{BAREMETAL}:maintenance",
    "manageable": f"{BAREMETAL}:provision_state=manageable",
    "cleanfail": f"{BAREMETAL}:provision_state=clean failed",
    "gone": "ironic_node_missing",
    "marked": f"trait:{traits.BAREMETAL_UNAVAILABLE}",
    "gone2": None,
}


class ReportTest(cli_harness.CliTestBase, baremetal_base.BaremetalTestBase):
    HOSTS = ("bm-compute",) + VM_HOSTS
    NODES = {"ok": "available", "used": "available", "drained": "available",
             "maint": "maintenance", "manageable": "manageable",
             "cleanfail": "clean failed", "gone": "deleted",
             "marked": "available", "gone2": "available"}

    def setUp(self) -> None:
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "RESOURCE_CLASS",
                        driver.RESOURCE_CLASS)
        driver.RESOURCE_CLASS = RC
        super().setUp()
        self.build()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver=self.COMPUTE_DRIVER)
        self._start_compute("bm-compute")
        self.flags(compute_driver="fake.SmallFakeDriver")
        for host in VM_HOSTS:
            self._start_compute(host)
        return self.computes["bm-compute"]

    def build(self) -> None:
        """One host (or node) of every reason; self.first says which."""
        nodes = self.nodes
        self.ironic.update_node(nodes["used"],
                                instance_uuid=uuidutils.generate_uuid())
        self.ironic.add_trait(nodes["drained"], traits.DRAIN_HOST)
        self.add_provider_trait(nodes["marked"], traits.BAREMETAL_UNAVAILABLE)
        self.admin_api.put_service(self.service_id("vm-disabled"), {
            "status": "disabled", "disabled_reason": "bios update"})
        self.admin_api.put_service_force_down(
            self.service_id("vm-forced"), True)
        self.computes["vm-down"].stop()
        service = objects.Service.get_by_compute_host(self.ctxt, "vm-down")
        service.last_seen_up = (datetime.datetime.now(datetime.timezone.utc)
                                - datetime.timedelta(hours=2))
        service.save()
        self._create_server(networks="none", host="vm-draining")
        start = self.cli("drain", "host", "start", "vm-draining", "--reason",
                         "rack move", "--yes")
        self.assertEqual(0, start.rc, start)
        # vm-twin owns node-x; a rebalance left a twin on vm-ok. Through the
        # API both services are up and no record has a time, so the keeper is
        # the higher host name (decisions._keeper_rank): vm-twin.
        dup_host = self.computes["vm-twin"]
        dup_host.manager.driver._set_nodes(["vm-twin", "node-x"])
        dup_host.manager.update_available_resource(self.ctxt)
        self.dup = ndf_fixtures.make_rebalance_duplicate(
            self.ctxt, self.placement, self.compute_node("vm-twin", "node-x"),
            "vm-ok")
        noprov = self.compute_node("vm-noprov", "vm-noprov")
        self.placement.delete(f"/resource_providers/{noprov.uuid}",
                              version="1.14")
        vm = {self.compute_node(h, h).uuid: first for h, first in (
            ("vm-ok", None), ("vm-twin", None),
            ("vm-disabled", "service_disabled"),
            ("vm-forced", "service_forced_down"), ("vm-down", "service_down"),
            ("vm-draining", "drain_draining"),
            ("vm-noprov", "node_without_provider"))}
        vm[self.compute_node("vm-twin", "node-x").uuid] = None
        vm[self.dup] = "duplicate_node"
        #: compute node uuid -> its first reason, as built.
        self.first = {**vm, **{nodes[n]: f for n, f in IRONIC_FIRST.items()}}
        #: compute node uuid -> (host, its total inventory, as built).
        self.inventory = {uuid: self.built_inventory(uuid)
                          for uuid in self.first}

    def built_inventory(self, uuid: str) -> dict[str, int]:
        if uuid == self.nodes["gone"]:
            # Ironic no longer lists it: its class is unknown without a
            # request of its own (placement has no bulk inventory read).
            return {}
        found = self.placement.get(f"/resource_providers/{uuid}/inventories",
                                   version="1.0")
        if found.status == 404:  # vm-noprov: the record's own totals
            record = objects.ComputeNode.get_by_uuid(self.ctxt, uuid)
            return {"VCPU": record.vcpus, "MEMORY_MB": record.memory_mb,
                    "DISK_GB": record.local_gb}
        return {rc: inv["total"]
                for rc, inv in found.body["inventories"].items()}

    def add_provider_trait(self, rp: str, trait: str) -> None:
        self._create_trait(trait)
        self._set_provider_traits(rp, self._get_provider_traits(rp) + [trait])

    def expected_rows(self) -> dict[str, dict[str, int]]:
        """{reason: {"Nodes": n, <class>: total}} from the cloud as built."""
        rows: dict[str, dict[str, int]] = {}
        for uuid, first in self.first.items():
            for key in (first or "Schedulable", "Total"):
                row = rows.setdefault(key, {"Nodes": 0})
                row["Nodes"] += 1
                for rc, total in self.inventory[uuid].items():
                    row[rc] = row.get(rc, 0) + total
        return rows

    def test_report(self) -> None:
        prom = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            "nova_drain.prom")
        rows = self.cli_json("drain", "report", "--prometheus-textfile", prom)
        classes = ["DISK_GB", "MEMORY_MB", "VCPU", RC]
        self.assertEqual(["Reason", "Hosts", "Nodes", *classes,
                          "Node Reasons"], list(rows[0]))
        by_reason = {r["Reason"]: r for r in rows}
        expected = self.expected_rows()
        self.assertEqual(list(by_reason), [
            "drain_draining", "drain_drained", "service_disabled",
            "service_forced_down", "service_down", "duplicate_node",
            "ironic_node_missing", "node_without_provider",
            f"{BAREMETAL}:provision_state=clean failed",
            f"{BAREMETAL}:provision_state=manageable",
            f"{BAREMETAL}:maintenance",
            f"trait:{traits.BAREMETAL_UNAVAILABLE}", "Schedulable", "Total"])
        for reason, want in expected.items():
            got = by_reason[reason]
            self.assertEqual(want, {k: got[k] for k in ["Nodes", *classes]
                                    if k == "Nodes" or got[k]}, reason)
        self.assertEqual((3, len(self.HOSTS)),
                         (by_reason["Schedulable"]["Hosts"],
                          by_reason["Total"]["Hosts"]))
        # Counted once, under the first; -f json lists every reason.
        listed = {m["uuid"]: m["reasons"] for r in rows
                  for m in r["Node Reasons"]}
        self.assertEqual(["drain_draining", "service_disabled",
                          f"trait:{traits.DRAIN_HOST}"],
                         listed[self.compute_node("vm-draining",
                                                  "vm-draining").uuid])
        self.assertEqual(f"{BAREMETAL}:provision_state=clean failed",
                         listed[self.nodes["cleanfail"]][0])
        self.assertEqual({u for u, f in self.first.items() if f},
                         set(listed))

        with open(prom) as f:
            families = {fam.name: fam for fam in
                        parser.text_string_to_metric_families(f.read())}
        nodes = {s.labels["reason"]: s.value for s in
                 families["nova_drain_unschedulable_nodes"].samples}
        self.assertEqual({k: v["Nodes"] for k, v in expected.items()
                          if k not in ("Schedulable", "Total")}, nodes)
        inventory = {(s.labels["resource_class"], s.labels["state"]): s.value
                     for s in families["nova_drain_inventory"].samples}
        for rc in classes:
            self.assertEqual(
                (expected["Schedulable"].get(rc, 0),
                 expected["Total"][rc] - expected["Schedulable"].get(rc, 0)),
                (inventory[(rc, "schedulable")],
                 inventory[(rc, "unschedulable")]), rc)

        # Exit 3 only over the threshold: the largest share itself passes.
        worst = max((expected["Total"][rc]
                     - expected["Schedulable"].get(rc, 0))
                    / expected["Total"][rc] for rc in classes)
        at = self.cli("drain", "report", "--exit-code",
                      "--max-unschedulable-fraction", repr(worst))
        self.assertEqual((0, []), (at.rc, cli_harness.unexpected_stderr(
            at.stderr)))
        over = self.cli("drain", "report", "--exit-code",
                        "--max-unschedulable-fraction", repr(worst * 0.99))
        self.assertEqual(3, over.rc, over)
        self.assertIn("of the inventory is unschedulable", over.stderr)
        self.assertEqual(0, self.cli("drain", "report").rc)

        by_host = [(r["Host"], r["Reason"], r["Nodes"]) for r in
                   self.cli_json("drain", "report", "--by", "host")
                   if r["Host"] == "vm-ok"]
        self.assertEqual([("vm-ok", "duplicate_node", 1),
                          ("vm-ok", "Schedulable", 1),
                          ("vm-ok", "Total", 2)], by_host)
        self.check_refusals()

    def check_refusals(self) -> None:
        # Nova's records lack placement's compute node providers.
        for _ in range(2):
            rp = uuidutils.generate_uuid()
            self.placement.post("/resource_providers", {
                "name": f"gone-{rp}", "uuid": rp}, version="1.20")
            self._set_provider_traits(rp, ["COMPUTE_NODE"])
        refused = self.cli("drain", "report")
        self.assertEqual(1, refused.rc)
        self.assertEqual(
            ["refusing to report capacity: Nova's list of compute node "
             "records lacks 2 of the 19 compute node providers in placement "
             "(COMPUTE_NODE) (at most 1 may be missing), more than "
             "--max-missing-fraction 0.1 allows: the credentials may not see "
             "every compute node; if those nodes really are gone, raise "
             "--max-missing-fraction"], refused.stderr.splitlines())
        self.assertEqual(len(self.first), {r["Reason"]: r for r in self.cli_json(
            "drain", "report", "--max-missing-fraction", "0.2")}[
            "Total"]["Nodes"])
        # An Ironic listing that lacks too many of the nodes Nova knows.
        self.ironic.delete_node(self.nodes["gone2"])
        untrusted = self.cli("drain", "report", "--max-missing-fraction",
                             "0.2")
        self.assertEqual(1, untrusted.rc)
        self.assertTrue(untrusted.stderr.startswith(
            "refusing to report capacity: the Ironic listing lacks 2 of the "
            "9 Ironic compute nodes Nova knows (at most 1 may be missing)"),
            untrusted.stderr)
        self.assertNotIn("Traceback", untrusted.stderr)
