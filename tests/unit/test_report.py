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

"""The capacity report's pure functions and its Prometheus metrics."""
import dataclasses
import datetime
import os
from typing import Any

import fixtures
import testtools
from prometheus_client import parser

from nova_drain_filters import decisions
from nova_drain_filters import report
from nova_drain_filters import report_metrics
from nova_drain_filters import traits
from nova_drain_filters.clients import compute
from tests.unit import drain_fakes as df

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
VM = (("VCPU", 8), ("MEMORY_MB", 1000), ("DISK_GB", 100))


def vm(uuid: str, host: str) -> compute.Hypervisor:
    return dataclasses.replace(df.hv(uuid, name=host, host=host,
                                     htype="QEMU"), totals=VM)


def bm(uuid: str, **fields: Any) -> decisions.IronicNodeFacts:
    base: dict[str, Any] = {"provision_state": "available",
                            "power_state": "power off",
                            "resource_class": "baremetal.gold"}
    return decisions.IronicNodeFacts(uuid, **{**base, **fields})


def picture(hvs: list[compute.Hypervisor],
            services: list[compute.Service],
            ironic: list[decisions.IronicNodeFacts] | None = None,
            marked: dict[str, set[str]] | None = None,
            providers: set[str] | None = None,
            servers: list[compute.Server] = ()) -> report.Picture:
    return report.Picture(
        hvs, services, {h.uuid for h in hvs} if providers is None
        else providers, marked or {},
        None if ironic is None else {n.uuid: n for n in ironic},
        list(servers), [], NOW)


def disabled(host: str, reason: str) -> compute.Service:
    return dataclasses.replace(df.service(host), status="disabled",
                               disabled_reason=reason)


class TestJudge(testtools.TestCase):
    def test_reasons_in_the_filters_order_counted_once(self) -> None:
        # A host drain with a server left: Draining, then its disable,
        # then the mark the drain set; the first one counts.
        p = picture([vm("n1", "c1"), vm("n2", "c2")],
                    [disabled("c1", "drain: rack"), df.service("c2")],
                    marked={traits.DRAIN_HOST: {"n1"}},
                    servers=[df.server("s1", "c1", "c1")])
        one, two = report.judge(p)
        self.assertEqual(("drain_draining", "service_disabled",
                          f"trait:{traits.DRAIN_HOST}"), one.reasons)
        self.assertEqual("drain_draining", one.first)
        self.assertIsNone(two.first)
        rows = {r.reason: r for r in report.rows([one, two])}
        self.assertEqual(["drain_draining", report.SCHEDULABLE, report.TOTAL],
                         list(rows))
        self.assertEqual((1, 1), (rows["drain_draining"].nodes,
                                  rows[report.TOTAL].hosts - 1))

    def test_each_reason_family(self) -> None:
        ironic = [bm("b1", maintenance=True, provision_state="manageable"),
                  bm("b2", power_state=None), bm("b3"),
                  bm("b4", traits=frozenset({traits.DRAIN_HOST}))]
        hvs = [vm("v1", "down"), vm("v2", "forced"), vm("v3", "off"),
               vm("v4", "noprov"), df.hv("b1", host="bm"),
               df.hv("b2", host="bm"), df.hv("b3", host="bm"),
               df.hv("b4", host="bm"), df.hv("gone", host="bm")]
        services = [df.service("down", "down"),
                    df.service("forced", forced_down=True),
                    disabled("off", "bios"), df.service("noprov"),
                    df.service("bm")]
        p = picture(hvs, services, ironic,
                    providers={h.uuid for h in hvs} - {"v4"},
                    marked={traits.BAREMETAL_UNAVAILABLE: {"b3"}})
        first = {v.uuid: v.first for v in report.judge(p)}
        self.assertEqual({
            "v1": "service_down", "v2": "service_forced_down",
            "v3": "service_disabled", "v4": "node_without_provider",
            "b1": "baremetal_unavailable:provision_state=manageable",
            "b2": "baremetal_unavailable:power_state=unknown",
            "b3": f"trait:{traits.BAREMETAL_UNAVAILABLE}",
            "b4": "drain_drained", "gone": "ironic_node_missing"}, first)

    def test_a_deployed_node_is_not_lost_capacity(self) -> None:
        used = bm("b1", provision_state="active", instance_uuid="i1")
        broken = bm("b2", provision_state="active", instance_uuid="i2",
                    maintenance=True)
        p = picture([df.hv("b1", host="bm"), df.hv("b2", host="bm")],
                    [df.service("bm")], [used, broken])
        first = {v.uuid: v.reasons for v in report.judge(p)}
        self.assertEqual({"b1": (), "b2": (
            "baremetal_unavailable:maintenance",)}, first)

    def test_duplicate_node(self) -> None:
        hvs = [vm("live", "c2"), dataclasses.replace(vm("dup", "c1"),
                                                     hypervisor_hostname="c2")]
        p = picture(hvs, [df.service("c1"), df.service("c2")])
        first = {v.uuid: v.first for v in report.judge(p)}
        self.assertEqual({"live": None, "dup": "duplicate_node"}, first)

    def test_ironic_inventory_is_its_resource_class(self) -> None:
        p = picture([df.hv("b1", host="bm"), df.hv("gone", host="bm")],
                    [df.service("bm")], [bm("b1")])
        inv = {v.uuid: v.inventory for v in report.judge(p)}
        self.assertEqual({"b1": (("CUSTOM_BAREMETAL_GOLD", 1),),
                          "gone": ()}, inv)


class TestRowsAndFractions(testtools.TestCase):
    def verdicts(self) -> list[report.NodeVerdict]:
        def v(uuid: str, host: str, *reasons: str,
              inv: tuple[tuple[str, int], ...] = VM) -> report.NodeVerdict:
            return report.NodeVerdict(host, uuid, uuid, reasons, inv)
        return [v("a", "c1"), v("b", "c1", "service_down"),
                v("c", "c2", "service_down"),
                v("d", "c3", "drain_drained", "service_disabled"),
                v("e", "bm", inv=(("CUSTOM_BM", 1),)),
                v("f", "bm", "baremetal_unavailable:maintenance",
                  inv=(("CUSTOM_BM", 1),))]

    def test_sums(self) -> None:
        rows = {r.reason: r for r in report.rows(self.verdicts())}
        self.assertEqual(["drain_drained", "service_down",
                          "baremetal_unavailable:maintenance",
                          report.SCHEDULABLE, report.TOTAL], list(rows))
        down = rows["service_down"]
        self.assertEqual((2, 2, {"VCPU": 16, "MEMORY_MB": 2000,
                                 "DISK_GB": 200}),
                         (down.hosts, down.nodes, dict(down.inventory)))
        total = rows[report.TOTAL]
        self.assertEqual((4, 6, 32, 2), (total.hosts, total.nodes,
                                         total.inventory["VCPU"],
                                         total.inventory["CUSTOM_BM"]))
        self.assertEqual(["DISK_GB", "MEMORY_MB", "VCPU", "CUSTOM_BM"],
                         report.resource_classes(self.verdicts()))
        self.assertEqual({"VCPU": 0.75, "MEMORY_MB": 0.75, "DISK_GB": 0.75,
                          "CUSTOM_BM": 0.5},
                         report.fractions(self.verdicts()))

    def test_exit_boundary(self) -> None:
        found = self.verdicts()
        self.assertEqual([], report.over(found, 0.75))
        self.assertEqual(["DISK_GB", "MEMORY_MB", "VCPU"],
                         report.over(found, 0.74))
        self.assertEqual(["CUSTOM_BM", "DISK_GB", "MEMORY_MB", "VCPU"],
                         report.over(found, 0.5 - 1e-9))
        self.assertEqual({}, report.fractions([]))

    def test_by_group(self) -> None:
        aggs = [compute.Aggregate(1, "rack1", ("c1", "c2"), "az1"),
                compute.Aggregate(2, "gpu", ("c1",))]
        groups = report.groups_by(aggs, "aggregate")
        self.assertEqual({"c1": ["rack1", "gpu"], "c2": ["rack1"]}, groups)
        rows = [(r.group, r.reason, r.nodes) for r in
                report.rows(self.verdicts(), "aggregate", groups)]
        self.assertIn(("rack1", "service_down", 2), rows)
        self.assertIn(("gpu", "service_down", 1), rows)
        self.assertIn((report.NO_GROUP, report.TOTAL, 3), rows)
        zones = report.groups_by(aggs, "az")
        self.assertEqual({"c1": ["az1"], "c2": ["az1"]}, zones)
        by_host = {(r.group, r.reason): r.nodes
                   for r in report.rows(self.verdicts(), "host")}
        self.assertEqual(2, by_host[("c1", report.TOTAL)])


class TestMetrics(testtools.TestCase):
    def test_parsed_back(self) -> None:
        found = TestRowsAndFractions().verdicts()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            "drain.prom")
        report_metrics.write(found, path)
        with open(path) as f:
            families = {fam.name: fam.samples for fam in
                        parser.text_string_to_metric_families(f.read())}
        nodes = {s.labels["reason"]: s.value
                 for s in families["nova_drain_unschedulable_nodes"]}
        self.assertEqual({"drain_drained": 1, "service_down": 2,
                          "baremetal_unavailable:maintenance": 1}, nodes)
        inventory = {(s.labels["resource_class"], s.labels["state"]): s.value
                     for s in families["nova_drain_inventory"]}
        self.assertEqual((8, 24, 1, 1), (
            inventory[("VCPU", "schedulable")],
            inventory[("VCPU", "unschedulable")],
            inventory[("CUSTOM_BM", "schedulable")],
            inventory[("CUSTOM_BM", "unschedulable")]))
        ratio = {s.labels["resource_class"]: s.value
                 for s in families["nova_drain_unschedulable_ratio"]}
        self.assertEqual(0.75, ratio["VCPU"])
        states = {s.labels["state"]: s.value for s in families["nova_drain_nodes"]}
        self.assertEqual({"schedulable": 2, "unschedulable": 4}, states)
        # Written atomically: no temporary file is left beside it.
        self.assertEqual(["drain.prom"], os.listdir(os.path.dirname(path)))
