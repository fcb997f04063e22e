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

"""Two nova-compute services share Ironic's nodes; one stops.

Driver: ``ironic.IronicDriver`` (Nova's own) on a real Ironic, because the
records a takeover leaves are made by the driver's hash ring
(``_refresh_hash_ring``, ``_refresh_cache``) and the resource tracker's
move of a compute node to its new host (``nova/compute/resource_tracker.py``
``_init_compute_node``).

Nova 34 offers both ``[ironic] shard`` and the deprecated ``peer_list``;
only ``peer_list`` (with ``conductor_group`` set, here to Ironic's default
group ``""``) lets a surviving service take a stopped one's nodes by
itself, so that is what runs. With ``shard`` each service owns its shard
and nothing moves until an operator moves it.
"""
import datetime
import json
import uuid
from typing import Any

from nova import objects
from nova.virt.ironic import driver as ironic_driver
from tooz import hashring

from tests.functional import base
from tests.functional import cli_harness
from tests.functional import ironic_driver_base as idb

HOSTS = ("bm-1", "bm-2")


class TakeoverTest(cli_harness.CliTestBase, idb.IronicDriverTestBase):
    HOSTS = HOSTS
    NODES = ("n1", "n2", "n3", "n4")
    USE_SHARD = False

    def make_nodes(self, names: tuple[str, ...]) -> dict[str, str]:
        """Half the nodes hash to each host, as the driver's ring puts them
        (``_refresh_hash_ring``: tooz HashRing over the live peers)."""
        ring = hashring.HashRing(
            set(HOSTS), partitions=ironic_driver._HASH_RING_PARTITIONS)
        want = {name: HOSTS[i * len(HOSTS) // len(names)]
                for i, name in enumerate(names)}
        nodes = {}
        for name in names:
            node_uuid = str(uuid.uuid4())
            while ring.get_nodes(node_uuid.encode()) != {want[name]}:
                node_uuid = str(uuid.uuid4())
            nodes[name] = self.make_node(name, uuid=node_uuid)
        return nodes

    def _setup_compute_service(self) -> Any:
        # Every node of this class's Ironic is in the default conductor
        # group; peer_list needs conductor_group set (driver.py
        # _refresh_hash_ring).
        self.flags(group="ironic", conductor_group="", peer_list=list(HOSTS))
        return super()._setup_compute_service()

    def _run_periodics(self, raise_on_error: bool = False) -> None:
        # The driver reads CONF.host (its hash ring, its instances); Nova's
        # harness leaves it at the last host started, so each compute runs
        # its periodic with its own.
        for host, compute in self.computes.items():
            if compute.manager.host in self.stopped:
                continue
            self.flags(host=host)
            compute.manager.update_available_resource(self.ctxt)

    def setUp(self) -> None:
        self.stopped: set[str] = set()
        super().setUp()
        # bm-2 started second: its nodes moved to it at its start; bm-1
        # lets go of them on its next periodic.
        self.periodic()

    def owners(self) -> dict[str, list[str]]:
        """Node name -> hosts of its undeleted compute node records."""
        owners: dict[str, list[str]] = {n: [] for n in self.nodes}
        for cn in objects.ComputeNodeList.get_all(self.ctxt):
            if cn.uuid in self.by_uuid:
                owners[self.by_uuid[cn.uuid]].append(cn.host)
        return owners

    def records(self) -> dict[str, int]:
        """What Nova and placement hold for this test's nodes."""
        owners = self.owners()
        providers = {rp["uuid"] for rp in self._get_all_providers()}
        cns = {cn.uuid for cn in objects.ComputeNodeList.get_all(self.ctxt)}
        allocations = sum(
            len(self.placement.get(f"/resource_providers/{rp}/allocations"
                                   ).body["allocations"])
            for rp in providers if rp in self.by_uuid)
        return {
            "compute nodes": sum(len(h) for h in owners.values()),
            "duplicate compute nodes": sum(
                len(h) - 1 for h in owners.values() if len(h) > 1),
            "providers": len(providers & set(self.by_uuid)),
            "orphaned providers": len((providers & set(self.by_uuid)) - cns),
            "allocations": allocations,
        }

    def stop(self, host: str) -> None:
        """Stop a compute; its heartbeat ages past service_down_time."""
        self.computes[host].stop()
        self.stopped.add(host)
        base.age_service(self.ctxt, host, datetime.timedelta(hours=1))

    def test_survivor_takes_the_free_nodes(self) -> None:
        owners = self.owners()
        self.assertEqual({1}, {len(h) for h in owners.values()}, owners)
        split = {host: sorted(n for n, h in owners.items() if h == [host])
                 for host in HOSTS}
        self.assertEqual({"bm-1": ["n1", "n2"], "bm-2": ["n3", "n4"]}, split)
        busy = {host: self.boot(host=host) for host in HOSTS}
        busy_node = {host: self.node_of(s) for host, s in busy.items()}
        start = self.records()

        self.stop("bm-2")
        # Before bm-1's next periodic, bm-2's free node is still bm-2's and
        # placement offers it; the filters keep the boot off a dead service.
        free_on_bm2 = [n for n in split["bm-2"] if n != busy_node["bm-2"]]
        early = self.node_of(self.boot())
        self.assertIn(early, split["bm-1"])
        self.assertIn("DisabledServiceFilter rejected 1 (1 x service down",
                      self.summary_lines()[-1])
        self.assertIn(free_on_bm2[0], self.candidates())
        self.periodic()
        owners = self.owners()
        after = self.records()
        # The free nodes of bm-2 moved to bm-1 (the same records); the one
        # with bm-2's server stays with bm-2, whose service is down.
        for name in split["bm-2"]:
            expect = ["bm-2"] if name == busy_node["bm-2"] else ["bm-1"]
            self.assertEqual(expect, owners[name], name)
        # One more server (the early boot), nothing else.
        self.assertEqual({**start, "allocations": 3}, after)
        self.assertEqual(0, after["duplicate compute nodes"])
        self.assertEqual(0, after["orphaned providers"])

        # What is left: the busy node's record under the dead service.
        rows = self.cli_json("drain", "stale", "list")
        reported = sorted((r["Kind"], r["Host"], self.by_uuid[r["Node"]],
                           r["Reason Codes"], r["Instances"]) for r in rows)
        self.assertEqual([("compute_node", "bm-2", busy_node["bm-2"],
                           "service_down_with_servers", 1)], reported)
        clear = self.cli("drain", "stale", "clear", "--all", "--yes",
                         "-f", "json")
        self.assertEqual(0, clear.rc, clear)
        self.assertEqual([("skip", "service has 1 instance(s)")],
                         [(r["Step"], r["Result"])
                          for r in json.loads(clear.stdout)])

        # bm-2 comes back (its first heartbeat written): its free node
        # moves back to it, the same record again.
        self.stopped.discard("bm-2")
        self.computes["bm-2"] = self.start_service("compute", host="bm-2")
        service = objects.Service.get_by_compute_host(self.ctxt, "bm-2")
        service.last_seen_up = datetime.datetime.now(datetime.timezone.utc)
        service.save()
        self.periodic()
        self.assertEqual(split, {
            host: sorted(n for n, h in self.owners().items() if h == [host])
            for host in HOSTS})
        back = self.records()
        self.assertEqual(after, back)
        self.assertEqual([], self.cli_json("drain", "stale", "list"))

        # A boot takes the last free node, the next finds no host.
        landed = {self.node_of(self.boot())}
        self.assertEqual(
            set(self.nodes) - set(busy_node.values()) - {early}, landed)
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        idb.report(f"two computes (peer_list): before the stop {start}; "
                   f"between the stop and bm-1's periodic bm-2's free node "
                   f"was offered by placement, DisabledServiceFilter kept "
                   f"the boot off it; "
                   f"after bm-1 took bm-2's free node {after}, drain stale "
                   f"list {reported} (clear skips it: in use); after bm-2 "
                   f"came back {back}")
