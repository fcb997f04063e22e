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

"""Event mode in Nova's real scheduler: a real broker, a publishing Ironic.

The full listing runs every 600 s, so any change the filters see within a
test came by an event, unless the view's listing counter moved. The broker
is stopped mid-test to show the fallback to polling and the way back.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""

from nova_drain_filters.ironic_view import reader
from tests.functional.baremetal_base import EventModeTestBase


class EventsReachTheSchedulerTest(EventModeTestBase):
    def test_maintenance_excludes_a_node_with_no_listing(self) -> None:
        # On RabbitMQ our own consumer reads the pool's queue, in a
        # reader process of its own.
        self.assertIsInstance(self.events._server, reader.ReaderProcess)
        listings = self.drain.view.refreshes
        self.ironic.set_maintenance(self.nodes["a"], True, reason="bmc")
        self.wait_until("a in maintenance", lambda: self.maintenance("a"))
        self.assertEqual(listings, self.drain.view.refreshes)
        # Ironic's payload carried the node: no request per event.
        self.assertEqual(0, self.events.reread)
        node = self.in_view("a")
        self.assertEqual("bmc", node.maintenance_reason)  # type: ignore
        landed = {self.node_of(self.boot()) for _ in range(3)}
        self.assertNotIn("a", landed)
        self.assertIn("baremetal: maintenance (bmc)", self.summary_lines()[0])

    def test_deleted_node_excluded_returned_node_chosen(self) -> None:
        listings = self.drain.view.refreshes
        self.ironic.set_maintenance(self.nodes["a"], True)
        self.ironic.delete_node(self.nodes["b"])
        self.wait_until("b gone", lambda: self.in_view("b") is None)
        self.wait_until("a in maintenance", lambda: self.maintenance("a"))
        self.assertEqual("c", self.node_of(self.boot()))
        line = self.summary_lines()[-1]
        self.assertIn("node missing from Ironic: " + self.nodes["b"], line)
        self.assertIn("baremetal: maintenance", line)

        self.ironic.set_maintenance(self.nodes["a"], False)
        self.ironic.set_maintenance(self.nodes["c"], True)
        self.wait_until("a back", lambda: not self.maintenance("a"))
        self.wait_until("c in maintenance", lambda: self.maintenance("c"))
        self.assertEqual("a", self.node_of(self.boot()))
        self.assertEqual(listings, self.drain.view.refreshes)


class BrokerOutageTest(EventModeTestBase):
    def test_polling_while_the_broker_is_down_then_events_again(self) -> None:
        self.broker.stop()
        self.wait_until("the listener notices",
                        lambda: self.events.broker_up is False)
        listings = self.drain.view.refreshes
        self.ironic.set_maintenance(self.nodes["a"], True, reason="no bus")
        # Ironic could not publish this one; a fallback listing finds it.
        self.wait_until("a in maintenance", lambda: self.maintenance("a"))
        self.assertGreater(self.drain.view.refreshes, listings)
        self.assertGreater(self.events.fallback_listings, 0)
        landed = {self.node_of(self.boot()) for _ in range(2)}
        self.assertNotIn("a", landed)
        self.assertIn("broker is unreachable", self.stdlog.logger.output)

        self.broker.start()  # same port: the listener reconnects by itself
        self.wait_until("the listener settles again",
                        lambda: self.events.settled, timeout=90)
        self.assertIn("events flow again", self.stdlog.logger.output)
        listings = self.drain.view.refreshes
        self.ironic.set_maintenance(self.nodes["b"], True)
        self.wait_until("b in maintenance", lambda: self.maintenance("b"))
        self.assertEqual(listings, self.drain.view.refreshes)
        self.assertEqual("c", self.node_of(self.boot()))
