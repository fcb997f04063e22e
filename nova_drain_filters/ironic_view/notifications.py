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

"""What Ironic's versioned notifications say about nodes: pure parsing.

This module says which node an event is about, whether Ironic deleted it,
and, when the payload carries every field the view reads, what the node
looked like when Ironic sent it. A node event's payload is Ironic's
``NodePayload`` (ironic/objects/node.py): version 1.14 and later carry
all of ``clients.ironic.NODE_FIELDS``, so the view takes the node from the
event and costs Ironic no request. An event without them (an older Ironic,
an allocation event) is a reason to re-read the node instead.
"""
import dataclasses
import re
from typing import Any

from oslo_utils import uuidutils

from nova_drain_filters import decisions
from nova_drain_filters.clients import ironic
from nova_drain_filters.ironic_view import node_table

NODE_EVENT = "baremetal.node."
ALLOCATION_EVENT = "baremetal.allocation."
DELETE_END = "baremetal.node.delete.end"
#: Node actions whose ``.start`` Ironic sends before it acts and always
#: follows with ``.end`` or ``.error``: the API's update, maintenance,
#: create and delete (ironic/api/controllers/v1/node.py), the conductor's
#: power and console actions (ironic/conductor/utils.py node_power_action,
#: ironic/conductor/manager.py). Reading on those ``.start`` finds nothing
#: new. ``provision_set.start`` is sent after the state moved
#: (ironic/conductor/task_manager.py _notify_provision_state_change) and
#: may be the only event of a transition, so it is read.
ANNOUNCED = frozenset({"update", "maintenance_set", "create", "delete",
                       "power_set", "console_set"})
#: The form Ironic sends (oslo.versionedobjects' UUIDField, str(uuid)):
#: one match, a fraction of what ``uuidutils.is_uuid_like`` costs by
#: building a UUID. Anything else still goes to ``is_uuid_like``.
CANONICAL_UUID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
VIEW_FIELDS = frozenset(ironic.NODE_FIELDS)


class MalformedEvent(ValueError):
    """A node notification without a usable node uuid."""


@dataclasses.dataclass(frozen=True)
class NodeEvent:
    """What one notification asks of the view."""

    node_uuid: str
    event_type: str
    #: The node is gone from Ironic (``baremetal.node.delete.end``).
    deleted: bool = False
    #: The node as the payload shows it; None when the payload lacks a
    #: field the view reads, and the node must be re-read.
    facts: decisions.IronicNodeFacts | None = None


#: What the apply needs of a node's latest event: the node's facts from
#: the payload, packed with their verdict as the snapshot keeps them
#: (``node_table.pack``), None for a delete, or the event itself when the
#: node must be re-read. One object a node while it waits, and one the
#: collector soon stops tracking.
Pending = node_table.Packed | NodeEvent | None


def pending(event: NodeEvent) -> Pending:
    """What the apply needs of ``event`` (``Pending``)."""
    if event.deleted:
        return None
    return event if event.facts is None else node_table.pack(event.facts)


def parse_event(event_type: Any, payload: Any) -> NodeEvent | None:
    """The node a notification is about; None if it is about no node.

    Node events (``baremetal.node.*``) carry the node in the versioned
    object ``payload['ironic_object.data']['uuid']``; allocation events
    carry ``node_uuid`` (an allocation sets the node's ``instance_uuid``
    without a node event). Ports, chassis and the rest change nothing the
    filters read, nor does the ``.start`` of an ``ANNOUNCED`` action.
    Raises MalformedEvent for a node or allocation event without a uuid
    where one must be.
    """
    if not isinstance(event_type, str):
        raise MalformedEvent(f"event type is {type(event_type).__name__}")
    if event_type.startswith(NODE_EVENT):
        key = "uuid"
    elif event_type.startswith(ALLOCATION_EVENT):
        key = "node_uuid"
    else:
        return None
    data = payload.get("ironic_object.data") if isinstance(
        payload, dict) else None
    if not isinstance(data, dict):
        raise MalformedEvent(f"{event_type}: no ironic_object.data")
    uuid = data.get(key)
    if uuid is None and key == "node_uuid":
        return None  # an allocation not (yet) on a node
    if not isinstance(uuid, str) or not (
            CANONICAL_UUID.fullmatch(uuid) or uuidutils.is_uuid_like(uuid)):
        raise MalformedEvent(f"{event_type}: {key} is {uuid!r:.60}")
    action, _, status = event_type[len(NODE_EVENT):].rpartition(".")
    if key == "uuid" and status == "start" and action in ANNOUNCED:
        return None  # the change comes with the .end (or .error)
    deleted = event_type == DELETE_END
    facts = None if deleted or key != "uuid" else payload_facts(data)
    return NodeEvent(uuid, event_type, deleted=deleted, facts=facts)


def payload_facts(data: dict[str, Any]) -> decisions.IronicNodeFacts | None:
    """The node in a node payload; None if a field the view reads is absent.

    Absent, not null: a null ``fault`` is a node without a fault, but a
    payload older than the field cannot say either way.
    """
    if not data.keys() >= VIEW_FIELDS:
        return None
    traits = data.get("traits")
    if traits is not None and not (
            isinstance(traits, list)
            and all(isinstance(t, str) for t in traits)):
        return None
    try:
        return ironic.node_facts(data)
    except (KeyError, TypeError, ValueError):
        return None
