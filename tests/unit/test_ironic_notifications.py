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

"""Which node an Ironic notification names, and malformed ones."""
import testtools

from nova_drain_filters import ironic_notifications
from tests.unit.test_ironic_events import NODE
from tests.unit.test_ironic_events import OTHER
from tests.unit.test_ironic_events import payload


class TestParseEvent(testtools.TestCase):
    def test_node_events_name_the_node(self) -> None:
        for event_type in ("baremetal.node.maintenance_set.end",
                           "baremetal.node.provision_set.start",
                           "baremetal.node.provision_set.success",
                           "baremetal.node.provision_set.error",
                           "baremetal.node.power_set.end",
                           "baremetal.node.power_set.error",
                           "baremetal.node.power_state_corrected.success",
                           "baremetal.node.update.end",
                           "baremetal.node.create.end"):
            event = ironic_notifications.parse_event(
                event_type, payload(uuid=NODE, maintenance=True))
            self.assertEqual(ironic_notifications.NodeEvent(NODE, event_type), event)
            assert event is not None
            self.assertFalse(event.deleted)

    def test_only_delete_end_deletes(self) -> None:
        end = ironic_notifications.parse_event("baremetal.node.delete.end",
                                        payload(uuid=NODE))
        error = ironic_notifications.parse_event("baremetal.node.delete.error",
                                          payload(uuid=NODE))
        assert end is not None and error is not None
        self.assertTrue(end.deleted)
        self.assertFalse(error.deleted)

    def test_announcements_before_the_change_are_not_read(self) -> None:
        for action in ironic_notifications.ANNOUNCED:
            self.assertIsNone(ironic_notifications.parse_event(
                f"baremetal.node.{action}.start", payload(uuid=NODE)))

    def test_allocation_events_name_their_node(self) -> None:
        event = ironic_notifications.parse_event(
            "baremetal.allocation.create.end",
            payload(uuid=OTHER, node_uuid=NODE))
        self.assertEqual(NODE, event.node_uuid if event else None)
        self.assertIsNone(ironic_notifications.parse_event(
            "baremetal.allocation.create.start",
            payload(uuid=OTHER, node_uuid=None)))

    def test_other_objects_are_ignored(self) -> None:
        for event_type in ("baremetal.port.update.end",
                           "baremetal.chassis.create.end",
                           "baremetal.deploy_template.delete.end",
                           "compute.instance.create.end"):
            self.assertIsNone(ironic_notifications.parse_event(
                event_type, payload(uuid=NODE, node_uuid=NODE)))

    def test_malformed(self) -> None:
        bad = [
            (None, payload(uuid=NODE)),
            (42, payload(uuid=NODE)),
            ("baremetal.node.update.end", None),
            ("baremetal.node.update.end", "not a dict"),
            ("baremetal.node.update.end", {"uuid": NODE}),  # unversioned
            ("baremetal.node.update.end", {"ironic_object.data": [NODE]}),
            ("baremetal.node.update.end", payload()),
            ("baremetal.node.update.end", payload(uuid=None)),
            ("baremetal.node.update.end", payload(uuid=7)),
            ("baremetal.node.update.end", payload(uuid="node-1/../x")),
            ("baremetal.allocation.create.end", payload(node_uuid="x")),
        ]
        for event_type, body in bad:
            self.assertRaises(ironic_notifications.MalformedEvent,
                              ironic_notifications.parse_event, event_type, body)
