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

"""The trait sync against a real placement and a real Ironic.

Nova's compute node records are given as plain facts (the CLI reads them
from Nova's API); the sync reads Ironic's nodes and placement's providers
itself and writes both.
"""
from typing import Any

import testtools

from nova_drain_filters import decisions
from nova_drain_filters import sync
from nova_drain_filters import traits
from nova_drain_filters.clients import placement
from tests.functional import product_clients
from tests.functional.services import ironic_client
from tests.functional.services import ironic_server
from tests.functional.services import placement_server

BM = traits.BAREMETAL_UNAVAILABLE
STALE = traits.STALE_NODE


class ConcurrentWriter(placement.PlacementClient):
    """Lets nova-compute write a provider's traits between our read and
    our write, once, the way its resource tracker does on a service
    disable (``COMPUTE_STATUS_DISABLED``)."""

    def __init__(self, *args: Any, intruder: Any, target: str) -> None:
        super().__init__(*args)
        self.intruder = intruder
        self.target = target
        self.intruded = False

    def provider_traits(self, rp_uuid: str) -> tuple[set[str], int]:
        current = super().provider_traits(rp_uuid)
        if rp_uuid == self.target and not self.intruded:
            self.intruded = True
            have = self.intruder.get_provider_traits(rp_uuid)
            self.intruder.set_provider_traits(
                rp_uuid, have + ["COMPUTE_STATUS_DISABLED"])
        return current


class TraitSyncTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        ironic_fx = self.useFixture(ironic_server.IronicServerFixture())
        placement_fx = self.useFixture(placement_server.PlacementServerFixture())
        self.ironic = ironic_client.IronicTestClient(ironic_fx.url)
        self.addCleanup(self.ironic.close)
        self.placement = placement_fx.client
        self.ironic_url, self.placement_url = ironic_fx.url, placement_fx.url
        self.records: list[decisions.NodeFacts] = []
        self.nodes = {}
        for name in ("free", "maint", "failed"):
            uuid = self.ironic.make_available_node(name=name)["uuid"]
            self.ironic.set_power_state(uuid, "power off")
            self.nodes[name] = uuid
            self.add_record("bm-1", uuid, uuid)
        self.ironic.set_maintenance(self.nodes["maint"], True, reason="psu")
        self.ironic.manage(self.nodes["failed"])
        self.ironic.fail_cleaning(self.nodes["failed"])
        self.ironic.add_trait(self.nodes["failed"], "CUSTOM_GPU_A100")
        # A duplicate record for "free" under a dead service, and a record
        # whose Ironic node was deleted.
        self.dup = "0e3c1b52-5d4f-4c1e-9a55-d1c0ffee0001"
        self.add_record("bm-2", self.nodes["free"], self.dup, up=False)
        gone = self.ironic.make_available_node(name="gone")["uuid"]
        self.ironic.delete_node(gone)
        self.gone = gone
        self.add_record("bm-1", gone, gone)

    def add_record(self, host: str, nodename: str, uuid: str,
                   up: bool = True) -> None:
        self.placement.create_resource_provider(f"{host}:{uuid}", uuid=uuid)
        self.records.append(decisions.NodeFacts(
            host=host, nodename=nodename, uuid=uuid, service_up=up,
            hypervisor_type="ironic"))

    def engine(self, placement_client_: Any = None) -> sync.TraitSync:
        return sync.TraitSync(
            lambda: list(self.records), product_clients.ironic_client(self.ironic_url),
            placement_client_ or product_clients.placement_client(self.placement_url),
            page_size=2)

    def provider_traits(self, uuid: str) -> set[str]:
        return set(self.placement.get_provider_traits(uuid))

    def test_traits_follow_node_state_and_second_run_writes_nothing(
            self) -> None:
        self.placement.ensure_trait("CUSTOM_KEEP_ME")
        self.placement.set_provider_traits(self.nodes["maint"],
                                           ["CUSTOM_KEEP_ME", "HW_CPU_X86_AVX"])
        dry = self.engine().run(dry_run=True)
        self.assertEqual(set(), self.provider_traits(self.nodes["failed"]))

        result = self.engine().run()
        self.assertTrue(result.ok, result.failures)
        self.assertEqual(sorted(map(str, dry.changes)),
                         sorted(map(str, result.changes)))
        self.assertEqual({"CUSTOM_KEEP_ME", "HW_CPU_X86_AVX", BM},
                         self.provider_traits(self.nodes["maint"]))
        self.assertEqual({BM}, self.provider_traits(self.nodes["failed"]))
        self.assertEqual(set(), self.provider_traits(self.nodes["free"]))
        self.assertEqual({STALE}, self.provider_traits(self.dup))
        self.assertEqual({STALE}, self.provider_traits(self.gone))
        # On Ironic too, so Nova's driver copies it instead of wiping it;
        # the node's own traits stay. Never STALE on a live node.
        self.assertEqual({BM, "CUSTOM_GPU_A100"},
                         set(self.ironic.get_traits(self.nodes["failed"])))
        self.assertEqual([BM], self.ironic.get_traits(self.nodes["maint"]))
        self.assertEqual([], self.ironic.get_traits(self.nodes["free"]))

        again = self.engine().run()
        self.assertEqual([], again.changes)
        # Reads only: each new client's version check, Ironic's list (3
        # nodes in pages of 2: 2 requests), two trait ensures and two
        # required= queries.
        self.assertEqual(2 + 2 + 2 + 2, again.requests)

        # The nodes recover; the traits go, from Ironic and placement.
        self.ironic.set_maintenance(self.nodes["maint"], False)
        self.ironic.manage(self.nodes["failed"])
        self.ironic.provide(self.nodes["failed"])
        self.ironic.set_power_state(self.nodes["failed"], "power off")
        recovered = self.engine().run()
        self.assertTrue(recovered.ok, recovered.failures)
        self.assertEqual({"CUSTOM_KEEP_ME", "HW_CPU_X86_AVX"},
                         self.provider_traits(self.nodes["maint"]))
        self.assertEqual(set(), self.provider_traits(self.nodes["failed"]))
        self.assertEqual(["CUSTOM_GPU_A100"],
                         self.ironic.get_traits(self.nodes["failed"]))
        self.assertEqual({STALE}, self.provider_traits(self.dup))
        self.assertEqual([], self.engine().run().changes)

    def test_concurrent_nova_compute_write_is_kept(self) -> None:
        writer = ConcurrentWriter(
            product_clients.placement_client(self.placement_url).adapter,
            intruder=self.placement, target=self.nodes["maint"])
        result = self.engine(writer).run()
        self.assertTrue(result.ok, result.failures)
        self.assertTrue(writer.intruded)
        self.assertEqual({"COMPUTE_STATUS_DISABLED", BM},
                         self.provider_traits(self.nodes["maint"]))
