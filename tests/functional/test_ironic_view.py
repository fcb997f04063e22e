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

"""The Ironic view against a real Ironic, and against a sick one.

Nodes are driven through real state changes; after one refresh the view's
decisions must match, reason by reason. The failure policy is checked with
Ironic stopped and with a loopback peer that answers 500, too slowly, or
with garbage.
"""
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters import ironic_view
from tests.functional import product_clients
from tests.functional.services import broken_server
from tests.functional.services import ironic_client
from tests.functional.services import ironic_server

CONF = cfg.CONF


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ViewTestBase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        drain_conf.register_opts(CONF)
        self.conf = self.useFixture(config_fixture.Config(CONF))
        self.conf.config(group="drain_filters", baremetal_refresh_interval=5,
                         baremetal_max_snapshot_age=60)
        self.clock = Clock()

    def view_for(self, url: str, timeout: float = 10.0) -> ironic_view.IronicView:
        view = ironic_view.IronicView(
            lambda: product_clients.ironic_client(url, timeout),
            clock=self.clock)
        self.addCleanup(view.stop)
        return view


class RealIronicViewTest(ViewTestBase):
    def setUp(self) -> None:
        super().setUp()
        server = self.useFixture(ironic_server.IronicServerFixture())
        self.server = server
        self.ironic = ironic_client.IronicTestClient(server.url)
        self.addCleanup(self.ironic.close)
        self.view = self.view_for(server.url)

    def available(self, name: str) -> str:
        uuid = self.ironic.make_available_node(name=name)["uuid"]
        self.ironic.set_power_state(uuid, "power off")
        return uuid

    def reasons(self, uuid: str) -> list[str]:
        return [str(r) for r in self.view.availability_reasons(uuid)]

    def test_decisions_follow_real_state_changes(self) -> None:
        free = self.available("free")
        maint = self.available("maint")
        self.ironic.set_maintenance(maint, True, reason="fan")
        managed = self.available("managed")
        self.ironic.manage(managed)
        failed = self.available("failed")
        self.ironic.manage(failed)
        self.ironic.fail_cleaning(failed)
        busy = self.available("busy")
        instance = "6b8f1a1e-0d1c-4a47-9a51-0a6f6d7f0b01"
        self.ironic.deploy(busy, instance_uuid=instance)
        unpowered = self.ironic.make_available_node(name="unpowered")["uuid"]

        self.assertTrue(self.view.refresh())
        self.assertEqual([], self.reasons(free))
        self.assertEqual(["baremetal: maintenance (fan)"], self.reasons(maint))
        self.assertEqual(["baremetal: provision_state=manageable"],
                         self.reasons(managed))
        self.assertEqual(["baremetal: provision_state=clean failed"],
                         self.reasons(failed))
        self.assertEqual(["baremetal: provision_state=active",
                          f"baremetal: instance_uuid={instance}"],
                         self.reasons(busy))
        self.assertEqual(["baremetal: power_state=unknown"],
                         self.reasons(unpowered))

        # And back: undeploy cleans the node (fake cleaning) to available.
        self.ironic.set_maintenance(maint, False)
        self.ironic.undeploy(busy)
        self.ironic.provide(managed)
        self.assertTrue(self.view.refresh())
        for uuid in (maint, busy, managed):
            self.assertEqual([], self.reasons(uuid))

    def test_deleted_node_turns_stale(self) -> None:
        node = self.available("doomed")
        self.view.seen(node)
        # An empty listing is never believed (ironic_missing_max_fraction):
        # Nova knows another node, which Ironic still lists.
        self.view.seen(self.available("keeper"))
        self.assertTrue(self.view.refresh())
        self.assertIsNone(self.view.missing_reason(node))
        self.ironic.delete_node(node)
        self.clock.now += 1
        self.assertTrue(self.view.refresh())
        reason = self.view.missing_reason(node)
        self.assertEqual(decisions.ReasonCode.IRONIC_NODE_MISSING, reason.code)
        # Not in the snapshot, so the availability filter leaves it to the
        # stale rule.
        self.assertEqual([], self.reasons(node))

    def test_empty_listing_is_not_believed(self) -> None:
        node = self.available("doomed")
        self.view.seen(node)
        self.assertTrue(self.view.refresh())
        self.ironic.delete_node(node)
        self.clock.now += 1
        self.assertTrue(self.view.refresh())
        self.assertIsNone(self.view.missing_reason(node))

    def test_new_enrolment_is_not_called_missing(self) -> None:
        self.assertTrue(self.view.refresh())
        self.clock.now += 1
        new = self.available("new")  # enrolled after the listing
        self.assertIsNone(self.view.missing_reason(new))
        self.clock.now += 1
        self.assertTrue(self.view.refresh())
        self.assertIsNone(self.view.missing_reason(new))

    def test_pagination_request_count(self) -> None:
        for i in range(7):
            self.ironic.create_node(name=f"page-{i}")
        client = product_clients.ironic_client(self.server.url)
        nodes = client.list_nodes(page_size=3)
        self.assertEqual(7, len(nodes))
        self.assertEqual(1 + 3, client.requests)  # version check, 3 + 3 + 1
        self.assertEqual(7, len({n.uuid for n in nodes}))

    def test_ironic_stopped_keeps_last_snapshot_then_policy(self) -> None:
        node = self.available("n")
        self.ironic.set_maintenance(node, True)
        self.assertTrue(self.view.refresh())
        self.server.server.stop()
        self.clock.now += 30
        self.assertFalse(self.view.refresh())
        self.assertIn("ConnectFailure", self.view.last_error)
        # Within baremetal_max_snapshot_age: the last good snapshot decides.
        self.assertEqual(["baremetal: maintenance"], self.reasons(node))
        self.clock.now += 60
        self.assertEqual([], self.reasons(node))  # failure mode pass
        self.conf.config(group="drain_filters", baremetal_failure_mode="reject")
        reasons = self.view.availability_reasons(node)
        self.assertEqual([decisions.ReasonCode.BAREMETAL_UNKNOWN],
                         [r.code for r in reasons])


class SickIronicTest(ViewTestBase):
    """Every way a refresh can fail: never raises, policy applies."""

    def check(self, mode: str, expected_error: str) -> None:
        server = self.useFixture(broken_server.BrokenServerFixture(
            mode, delay=3.0))
        view = self.view_for(server.url, timeout=0.5)
        self.assertFalse(view.refresh())
        self.assertIn(expected_error, view.last_error)
        self.assertGreaterEqual(server.hits, 1)
        node = "11111111-2222-3333-4444-555555555555"
        self.assertEqual([], view.availability_reasons(node))
        self.conf.config(group="drain_filters", baremetal_failure_mode="reject")
        self.assertEqual(
            [decisions.ReasonCode.BAREMETAL_UNKNOWN],
            [r.code for r in view.availability_reasons(node)])
        self.assertIsNone(view.missing_reason(node))

    def test_500(self) -> None:
        self.check("500", "HTTP 500: 500 Internal Server Error upstream failed")

    def test_timeout(self) -> None:
        self.check("slow", "ConnectTimeout")

    def test_garbage(self) -> None:
        self.check("garbage", "response is not JSON")

    def test_wrong_shape(self) -> None:
        self.check("badjson", "malformed node list")

    def test_next_link_that_never_advances(self) -> None:
        self.check("loop", "pagination marker did not advance")
