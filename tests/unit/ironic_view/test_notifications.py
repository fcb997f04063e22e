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
from typing import Any

import testtools

from nova_drain_filters.ironic_view import notifications
from tests.unit.ironic_view.helpers import NODE
from tests.unit.ironic_view.helpers import OTHER
from tests.unit.ironic_view.helpers import payload


def full_data(**overrides: Any) -> dict[str, Any]:
    """A NodePayload's data with every field the view reads."""
    data: dict[str, Any] = {
        "uuid": NODE, "name": "bm-1", "provision_state": "available",
        "power_state": "power off", "maintenance": False,
        "maintenance_reason": None, "retired": False, "retired_reason": None,
        "fault": None, "instance_uuid": None, "traits": ["CUSTOM_GOLD"],
        # fields the view does not read are ignored
        "driver": "fake-hardware", "conductor_group": ""}
    data.update(overrides)
    return data


class TestPayloadFacts(testtools.TestCase):
    def test_full_payload_is_the_node(self) -> None:
        event = notifications.parse_event(
            "baremetal.node.maintenance_set.end",
            payload(**full_data(maintenance=True, maintenance_reason="fan")))
        assert event is not None and event.facts is not None
        self.assertEqual(NODE, event.facts.uuid)
        self.assertTrue(event.facts.maintenance)
        self.assertEqual("fan", event.facts.maintenance_reason)
        self.assertEqual("power off", event.facts.power_state)
        self.assertEqual(frozenset({"CUSTOM_GOLD"}), event.facts.traits)

    def test_a_missing_field_means_reread(self) -> None:
        for field in ("fault", "retired", "traits", "instance_uuid"):
            data = full_data()
            del data[field]
            event = notifications.parse_event(
                "baremetal.node.update.end", payload(**data))
            assert event is not None
            self.assertIsNone(event.facts, field)

    def test_bad_traits_mean_reread(self) -> None:
        for traits in ("CUSTOM_GOLD", [1, 2], {"a": 1}):
            event = notifications.parse_event(
                "baremetal.node.update.end", payload(**full_data(traits=traits)))
            assert event is not None
            self.assertIsNone(event.facts, repr(traits))

    def test_null_traits_are_none(self) -> None:
        event = notifications.parse_event(
            "baremetal.node.update.end", payload(**full_data(traits=None)))
        assert event is not None and event.facts is not None
        self.assertEqual(frozenset(), event.facts.traits)

    def test_delete_and_allocation_events_carry_no_node(self) -> None:
        deleted = notifications.parse_event(
            "baremetal.node.delete.end", payload(**full_data()))
        allocation = notifications.parse_event(
            "baremetal.allocation.create.end",
            payload(**full_data(uuid=OTHER, node_uuid=NODE)))
        assert deleted is not None and allocation is not None
        self.assertTrue(deleted.deleted)
        self.assertIsNone(deleted.facts)
        self.assertEqual(NODE, allocation.node_uuid)
        self.assertIsNone(allocation.facts)


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
            event = notifications.parse_event(
                event_type, payload(uuid=NODE, maintenance=True))
            self.assertEqual(notifications.NodeEvent(NODE, event_type), event)
            assert event is not None
            self.assertFalse(event.deleted)

    def test_only_delete_end_deletes(self) -> None:
        end = notifications.parse_event("baremetal.node.delete.end",
                                        payload(uuid=NODE))
        error = notifications.parse_event("baremetal.node.delete.error",
                                          payload(uuid=NODE))
        assert end is not None and error is not None
        self.assertTrue(end.deleted)
        self.assertFalse(error.deleted)

    def test_announcements_before_the_change_are_not_read(self) -> None:
        for action in notifications.ANNOUNCED:
            self.assertIsNone(notifications.parse_event(
                f"baremetal.node.{action}.start", payload(uuid=NODE)))

    def test_allocation_events_name_their_node(self) -> None:
        event = notifications.parse_event(
            "baremetal.allocation.create.end",
            payload(uuid=OTHER, node_uuid=NODE))
        self.assertEqual(NODE, event.node_uuid if event else None)
        self.assertIsNone(notifications.parse_event(
            "baremetal.allocation.create.start",
            payload(uuid=OTHER, node_uuid=None)))

    def test_other_objects_are_ignored(self) -> None:
        for event_type in ("baremetal.port.update.end",
                           "baremetal.chassis.create.end",
                           "baremetal.deploy_template.delete.end",
                           "compute.instance.create.end"):
            self.assertIsNone(notifications.parse_event(
                event_type, payload(uuid=NODE, node_uuid=NODE)))

    def test_every_form_is_uuid_like_as_before(self) -> None:
        # The canonical form takes the quick match; the others still take
        # oslo.utils' is_uuid_like, which accepted them before.
        for form in (NODE, NODE.upper(), NODE.replace("-", ""),
                     "{" + NODE + "}"):
            event = notifications.parse_event(
                "baremetal.node.update.end", payload(uuid=form))
            self.assertEqual(form, event.node_uuid if event else None)
        for near in (NODE + "0", NODE[:-1], NODE[:-1] + "g", NODE + "\n",
                     " " + NODE):
            self.assertRaises(notifications.MalformedEvent,
                              notifications.parse_event,
                              "baremetal.node.update.end", payload(uuid=near))

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
            self.assertRaises(notifications.MalformedEvent,
                              notifications.parse_event, event_type, body)
