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


"""The reconcile: the sync's refusals leave the agent writing nothing."""
import testtools

from nova_drain_filters import sync
from nova_drain_filters import traits
from nova_drain_filters.agent import reconcile
from nova_drain_filters.clients import http
from tests.unit import ironic_fakes
from tests.unit.agent import agent_fakes

BM = traits.BAREMETAL_UNAVAILABLE
inode = ironic_fakes.ironic_node
MAINT = {"maintenance": True}


class TestReconcile(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.fx = agent_fakes.AgentWriter()
        self.records = [agent_fakes.record(f"n{i}") for i in range(4)]
        self.nova_error: Exception | None = None
        self.fx.ironic.nodes = [inode(r.nodename) for r in self.records]
        engine = sync.TraitSync(self.list_records, self.fx.ironic,
                                self.fx.placement)  # type: ignore
        self.reconciler = reconcile.Reconciler(
            engine, self.fx.writer, self.fx.metrics, lambda: 60.0,
            clock=lambda: 5000.0)

    def list_records(self) -> list:  # type: ignore[type-arg]
        if self.nova_error is not None:
            raise self.nova_error
        return list(self.records)

    def test_repairs_a_lost_event_and_records_success(self) -> None:
        self.assertEqual(reconcile.OK, self.reconciler.once())
        self.assertEqual([], self.fx.writes())
        self.fx.ironic.nodes[1] = inode("n1", **MAINT)  # its event lost
        self.assertEqual(reconcile.OK, self.reconciler.once())
        self.assertEqual([("placement.update", "n1", {BM}, set()),
                          ("ironic.add_trait", "n1", BM)],
                         self.fx.writes())
        self.assertEqual(5000.0, self.fx.value(
            "nova_drain_agent_reconcile_last_success_timestamp_seconds"))
        self.assertEqual(2, self.fx.value(
            "nova_drain_agent_reconciles_total", result="ok"))

    def test_empty_or_partial_listing_writes_nothing(self) -> None:
        for listed in ([], self.fx.ironic.nodes[:1]):
            self.reconciler.once()  # trusted first
            self.fx.ironic.nodes = listed
            self.assertEqual(reconcile.UNTRUSTED, self.reconciler.once())
            self.fx.event(inode("n0", **MAINT))
            self.assertEqual([], self.fx.writes())
            self.fx.ironic.nodes = [inode(r.nodename)
                                    for r in self.records]
            self.reconciler.once()  # and marks n0
            self.fx.ironic.set(inode("n0"))
            self.reconciler.once()
            del self.fx.log[:]

    def test_nova_or_placement_unreachable_writes_nothing(self) -> None:
        self.reconciler.once()
        self.nova_error = http.ApiError("nova", "GET", "/h", None, "refused")
        self.assertEqual(reconcile.FAILED, self.reconciler.once())
        self.fx.event(inode("n0", **MAINT))
        self.assertEqual([], self.fx.writes())
        self.assertEqual(0, self.fx.value(
            "nova_drain_agent_picture_trusted"))
        # Back: the event kept while untrusted is written by the reconcile.
        self.nova_error = None
        self.assertEqual(reconcile.OK, self.reconciler.once())
        self.assertEqual(2, len(self.fx.writes()))

    def test_placement_unreachable_is_a_refusal(self) -> None:
        def down(*args: object, **kwargs: object) -> None:
            raise http.ApiError("placement", "GET", "/rp", None, "refused")
        self.fx.placement.get = down  # type: ignore[method-assign]
        self.assertEqual(reconcile.FAILED, self.reconciler.once())
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_reconciles_total", result="failed"))
