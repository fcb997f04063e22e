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

"""Two trait syncs at once and a nova-compute-like writer, on one placement.

Against a real placement and a real Ironic on loopback, for ``ROUNDS``
rounds: the nodes' maintenance flips (so every round has traits to set and
to clear), then two ``drain sync`` passes (the ``TraitSync.run`` that
``openstack drain sync`` runs) start together, while a writer that behaves
like nova-compute's periodic keeps replacing each provider's traits and
inventory, bumping its generation, many times a second
(``nova/compute/resource_tracker.py`` ``_update_to_placement``: read the
provider, write it with that generation, on a conflict read again).

After every round: no trait another writer set is lost, every provider
carries exactly the wanted drain traits (converged within that round's
runs), and no sync run reported a failure: each 409 was retried
(``PlacementClient.update_provider_traits``) and never surfaced. The rounds,
runs, writes and 409s seen are printed and attached as a detail.
"""
import threading
import time
from typing import Any

import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from testtools import content

from nova_drain_filters import decisions
from nova_drain_filters import sync
from nova_drain_filters import traits
from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement
from tests.functional.product_clients import ironic_client
from tests.functional.services import ironic_server
from tests.functional.services import placement_server

ROUNDS = 6
#: Rounds go on past ROUNDS, up to this many, until a 409 has been seen:
#: collisions depend on timing, and a run without one proves nothing.
MAX_ROUNDS = 30
NODES = 4
BM = traits.BAREMETAL_UNAVAILABLE
STALE = traits.STALE_NODE
KEEP = "CUSTOM_KEEP_ME"
#: The writer's own traits; it swaps one for the other on every write.
OWN = ("CUSTOM_NC_A", "CUSTOM_NC_B")
#: A bound on the writer, whatever happens to the rounds.
MAX_WRITES = 20_000
WRITER_PAUSE = 0.005
WRITER_RETRIES = 50


class CountingPlacement(placement.PlacementClient):
    """Counts the 409s placement answers this client."""

    def __init__(self, url: str) -> None:
        super().__init__(ks_adapter.Adapter(
            ks_session.Session(), endpoint_override=url,
            service_type="placement",
            additional_headers={"X-Auth-Token": "admin"}))
        self.conflicts = 0

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            return super().request(method, url, **kwargs)
        except http.ApiError as exc:
            if exc.status == 409:
                self.conflicts += 1
            raise


class NovaComputeLikeWriter(threading.Thread):
    """Replaces provider traits and inventory with their generation, as
    nova-compute's periodic does, until told to stop."""

    def __init__(self, url: str, providers: list[str]) -> None:
        super().__init__(daemon=True)
        self.client = placement_server.PlacementTestClient(url)
        self.providers = providers
        self.own = {rp: OWN[0] for rp in providers}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.writes = self.conflicts = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set() and self.writes < MAX_WRITES:
                rp = self.providers[self.writes % len(self.providers)]
                with self.lock:
                    if self.writes % 3:
                        self._swap_own_trait(rp)
                    else:
                        self._bump_inventory(rp)
                    self.writes += 1
                time.sleep(WRITER_PAUSE)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _put(self, path: str, body: Any) -> bool:
        resp = self.client.request("PUT", path, body, expected=(200, 409))
        if resp.status_code == 409:
            self.conflicts += 1
            return False
        return True

    def _swap_own_trait(self, rp: str) -> None:
        new = OWN[1] if self.own[rp] == OWN[0] else OWN[0]
        for _ in range(WRITER_RETRIES):
            body = self.client.request(
                "GET", f"/resource_providers/{rp}/traits").json()
            have = (set(body["traits"]) - set(OWN)) | {new}
            if self._put(f"/resource_providers/{rp}/traits", {
                    "traits": sorted(have), "resource_provider_generation":
                    body["resource_provider_generation"]}):
                self.own[rp] = new
                return
        raise AssertionError(f"writer: {rp} kept conflicting")

    def _bump_inventory(self, rp: str) -> None:
        for _ in range(WRITER_RETRIES):
            body = self.client.request(
                "GET", f"/resource_providers/{rp}/inventories").json()
            total = 5 if body["inventories"]["VCPU"]["total"] == 4 else 4
            if self._put(f"/resource_providers/{rp}/inventories", {
                    "inventories": {"VCPU": {"total": total}},
                    "resource_provider_generation":
                    body["resource_provider_generation"]}):
                return
        raise AssertionError(f"writer: {rp} inventory kept conflicting")


class WriterContentionTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        ironic_fx = self.useFixture(ironic_server.IronicServerFixture())
        placement_fx = self.useFixture(
            placement_server.PlacementServerFixture())
        self.ironic = ironic_server.IronicTestClient(ironic_fx.url)
        self.addCleanup(self.ironic.close)
        self.placement = placement_fx.client
        self.ironic_url, self.placement_url = ironic_fx.url, placement_fx.url
        self.placement.ensure_trait(KEEP)
        for trait in OWN:
            self.placement.ensure_trait(trait)
        self.nodes = []
        self.records = []
        for i in range(NODES):
            uuid = self.ironic.make_available_node(name=f"bm-{i}")["uuid"]
            self.ironic.set_power_state(uuid, "power off")
            self.nodes.append(uuid)
            self.add_provider(uuid)
        gone = self.ironic.make_available_node(name="gone")["uuid"]
        self.ironic.delete_node(gone)
        self.gone = gone
        self.add_provider(gone)

    def add_provider(self, uuid: str) -> None:
        self.placement.create_resource_provider(f"bm-1:{uuid}", uuid=uuid)
        self.placement.request(
            "PUT", f"/resource_providers/{uuid}/inventories", {
                "inventories": {"VCPU": {"total": 4}},
                "resource_provider_generation": 0})
        self.placement.set_provider_traits(uuid, [KEEP, OWN[0]])
        self.records.append(decisions.NodeFacts(
            host="bm-1", nodename=uuid, uuid=uuid, service_up=True,
            hypervisor_type="ironic"))

    def engine(self, client: placement.PlacementClient) -> sync.TraitSync:
        return sync.TraitSync(lambda: list(self.records),
                              ironic_client(self.ironic_url), client)

    def wanted(self, round_: int) -> dict[str, set[str]]:
        """The drain traits each provider must carry after ``round_``."""
        want = {uuid: ({BM} if (i + round_) % 2 == 0 else set())
                for i, uuid in enumerate(self.nodes)}
        want[self.gone] = {STALE}
        return want

    def test_no_trait_lost_and_every_409_retried(self) -> None:
        writer = NovaComputeLikeWriter(self.placement_url,
                                       [*self.nodes, self.gone])
        clients = [CountingPlacement(self.placement_url) for _ in range(2)]
        engines = [self.engine(c) for c in clients]
        runs: list[sync.SyncResult] = []
        started = time.monotonic()
        writer.start()
        self.addCleanup(writer.stop.set)
        try:
            round_ = 0
            while round_ < ROUNDS or (
                    round_ < MAX_ROUNDS and not writer.conflicts
                    and not sum(c.conflicts for c in clients)):
                for i, uuid in enumerate(self.nodes):
                    self.ironic.set_maintenance(uuid, (i + round_) % 2 == 0,
                                                reason="contention test")
                runs += self.run_together(engines)
                self.check_round(round_, writer, runs)
                round_ += 1
        finally:
            writer.stop.set()
            writer.join(30)
        seconds = time.monotonic() - started
        self.assertIsNone(writer.error)
        sync_conflicts = sum(c.conflicts for c in clients)
        figures = (
            f"{round_} rounds, {len(runs)} sync runs "
            f"({sum(len(r.changes) for r in runs)} changes, "
            f"{sum(len(r.failures) for r in runs)} failures), "
            f"{sync_conflicts} 409s retried by the syncs; writer: "
            f"{writer.writes} writes ({writer.writes / seconds:.0f}/s), "
            f"{writer.conflicts} 409s retried; {seconds:.1f}s")
        print(f"writer contention: {figures}")
        self.addDetail("figures", content.text_content(figures))
        # The run exercised contention at all, or it proved nothing.
        self.assertGreater(sync_conflicts + writer.conflicts, 0, figures)

    def run_together(self, engines: list[sync.TraitSync]) -> list[Any]:
        """One pass of each engine, started at the same moment."""
        results: list[Any] = [None] * len(engines)
        barrier = threading.Barrier(len(engines))

        def one(i: int) -> None:
            barrier.wait(30)
            try:
                results[i] = engines[i].run()
            except BaseException as exc:
                results[i] = exc

        threads = [threading.Thread(target=one, args=(i,))
                   for i in range(len(engines))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for result in results:
            self.assertIsInstance(result, sync.SyncResult, str(result))
            self.assertEqual([], result.failures)
        return results

    def check_round(self, round_: int, writer: NovaComputeLikeWriter,
                    runs: list[sync.SyncResult]) -> None:
        drain = set(traits.MANAGED)
        with writer.lock:  # the writer's record and placement agree here
            for uuid, want in self.wanted(round_).items():
                have = set(self.placement.get_provider_traits(uuid))
                where = f"round {round_}, provider {uuid}: {sorted(have)}"
                self.assertIn(KEEP, have, where)
                self.assertEqual({writer.own[uuid]}, have & set(OWN), where)
                self.assertEqual(want, have & drain, where)
