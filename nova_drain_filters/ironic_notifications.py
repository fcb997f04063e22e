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

An event is a reason to re-read one node, not the truth about it; this
module only says which node, and whether Ironic deleted it.
"""
import dataclasses
from typing import Any

from oslo_utils import uuidutils

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


class MalformedEvent(ValueError):
    """A node notification without a usable node uuid."""


@dataclasses.dataclass(frozen=True)
class NodeEvent:
    """What one notification asks of the view."""

    node_uuid: str
    event_type: str
    #: The node is gone from Ironic (``baremetal.node.delete.end``).
    deleted: bool = False


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
    if not isinstance(uuid, str) or not uuidutils.is_uuid_like(uuid):
        raise MalformedEvent(f"{event_type}: {key} is {uuid!r:.60}")
    action, _, status = event_type[len(NODE_EVENT):].rpartition(".")
    if key == "uuid" and status == "start" and action in ANNOUNCED:
        return None  # the change comes with the .end (or .error)
    return NodeEvent(uuid, event_type, deleted=event_type == DELETE_END)
