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

"""Typed Ironic calls: the paginated node list, one node, node traits."""
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from urllib import parse

from oslo_config import cfg

from nova_drain_filters import decisions
from nova_drain_filters.clients import http

#: 1.61 is the oldest version with every field below (``retired`` came in
#: 1.61, ``fault`` in 1.42, traits in 1.37).
IRONIC_VERSION = "1.61"

#: Only what the decisions and the trait sync need. ``allocation_uuid`` is
#: left out: ironic 39 answers 500 when it is named in ``fields`` (its
#: database model has only ``allocation_id``), and an allocation also sets
#: the node's ``instance_uuid``, which is asked for.
NODE_FIELDS = (
    "uuid", "name", "provision_state", "power_state", "maintenance",
    "maintenance_reason", "retired", "retired_reason", "fault",
    "instance_uuid", "traits",
)

#: What the capacity report asks for besides NODE_FIELDS (1.21 added it).
REPORT_FIELDS = ("resource_class",)

#: Read timeout, in seconds, of the scheduler's Ironic requests when
#: ``[ironic] timeout`` is unset (keystoneauth then waits forever). One page
#: of 1,000 nodes takes Ironic well under a second; a server that has said
#: nothing for this long is hung.
DEFAULT_READ_TIMEOUT = 30.0


def node_facts(body: dict[str, Any]) -> decisions.IronicNodeFacts:
    """IronicNodeFacts from one node of ``GET /v1/nodes``."""
    uuid = body["uuid"]
    if not isinstance(uuid, str) or not uuid:
        raise KeyError(f"node without a uuid: {body!r:.100}")
    return decisions.IronicNodeFacts(
        uuid=uuid,
        name=body.get("name"),
        provision_state=body.get("provision_state"),
        power_state=body.get("power_state"),
        maintenance=bool(body.get("maintenance")),
        maintenance_reason=body.get("maintenance_reason"),
        retired=bool(body.get("retired")),
        retired_reason=body.get("retired_reason"),
        fault=body.get("fault"),
        instance_uuid=body.get("instance_uuid"),
        allocation_uuid=body.get("allocation_uuid"),
        traits=frozenset(body.get("traits") or ()),
        resource_class=body.get("resource_class"),
    )


class IronicClient(http.ServiceClient):
    """Ironic, through a keystoneauth1 Adapter."""

    service = "ironic"
    microversion = IRONIC_VERSION

    def __init__(self, adapter: Any, default_timeout: float | None = None
                 ) -> None:
        """``default_timeout`` bounds each request when the session has no
        timeout of its own (``[ironic] timeout`` unset): keystoneauth's
        ``Session.request`` passes ``session.timeout`` to requests only when
        it is set (``keystoneauth1/session.py``).
        """
        super().__init__(adapter)
        session = getattr(adapter, "session", None)
        if (default_timeout is not None and session is not None
                and getattr(session, "timeout", None) is None):
            session.timeout = float(default_timeout)

    @property
    def read_timeout(self) -> float | None:
        """The timeout each request gets, None if unbounded."""
        session = getattr(self.adapter, "session", None)
        timeout = getattr(session, "timeout", None)
        return float(timeout) if timeout is not None else None

    def iter_node_pages(
        self, page_size: int, extra_fields: Sequence[str] = ()
    ) -> Iterator[list[decisions.IronicNodeFacts]]:
        """Yield the nodes a page at a time, ``limit``/``marker`` paginated.

        Ironic caps ``limit`` at its ``[api] max_limit`` and links the next
        page in ``next`` only when the page was full, so the loop follows
        that link's presence, not our own page size. ``extra_fields`` asks
        for more than NODE_FIELDS (``REPORT_FIELDS``). Raises ApiError on
        a malformed page.
        """
        def items(body: Any, url: str) -> list[decisions.IronicNodeFacts]:
            try:
                return [node_facts(n) for n in body["nodes"]]
            except (TypeError, KeyError, AttributeError) as exc:
                raise http.ApiError(self.service, "GET", url, 200,
                                    f"malformed node list: {exc!r}") from None

        def next_marker(body: Any, nodes: list[decisions.IronicNodeFacts]
                        ) -> str | None:
            return nodes[-1].uuid if body.get("next") else None

        return self.pages(
            "/v1/nodes", {"fields": ",".join(NODE_FIELDS + tuple(extra_fields)),
                          "limit": str(page_size)},
            microversion=IRONIC_VERSION, items=items, next_marker=next_marker)

    def list_nodes(self, page_size: int, extra_fields: Sequence[str] = ()
                   ) -> list[decisions.IronicNodeFacts]:
        """Every node, in as few requests as the page size allows."""
        return [n for page in self.iter_node_pages(page_size, extra_fields)
                for n in page]

    def get_node(self, ident: str) -> decisions.IronicNodeFacts | None:
        """One node (by UUID or name) with the listing's fields, or None.

        One ``GET /v1/nodes/{ident}?fields=...``: what a notification about
        the node makes the view re-read, and how the drain commands find a
        node an operator names. None if Ironic has no such node
        (``NodeNotFound``, a 404); ApiError for any other failure, or a
        body that is not a node.
        """
        query = parse.urlencode({"fields": ",".join(NODE_FIELDS)})
        url = f"/v1/nodes/{parse.quote(ident, safe='')}?{query}"
        try:
            body = self.get(url, microversion=IRONIC_VERSION)
        except http.NotFound:
            return None
        try:
            return node_facts(body)
        except (TypeError, KeyError, AttributeError) as exc:
            raise http.ApiError(self.service, "GET", url, 200,
                                f"malformed node: {exc!r}") from None

    def add_trait(self, node_uuid: str, trait: str) -> None:
        """Add one trait to a node, leaving its other traits."""
        self.request("PUT", f"/v1/nodes/{node_uuid}/traits/{trait}",
                     microversion=IRONIC_VERSION)

    def node_traits(self, node_uuid: str) -> set[str]:
        """A node's traits; NotFound if the node does not exist."""
        body = self.get(f"/v1/nodes/{node_uuid}/traits",
                        microversion=IRONIC_VERSION)
        return set(body.get("traits") or ())

    def remove_trait(self, node_uuid: str, trait: str) -> None:
        """Remove one trait from a node; a trait already gone is fine.

        Ironic answers 404 with the same faultcode ("Client") both for a
        node that is gone (``NodeNotFound``, raised by
        ``api_utils.check_node_policy_and_retrieve``) and for a node without
        the trait (``NodeTraitNotFound``, raised by
        ``NodeTraitsController.delete`` in ironic/api/controllers/v1/node.py);
        only the message text differs. So after a 404 this asks for the
        node's traits: a node that answers without the trait is the end
        state wanted, a node that is gone raises NotFound.
        """
        try:
            self.request("DELETE", f"/v1/nodes/{node_uuid}/traits/{trait}",
                         microversion=IRONIC_VERSION)
        except http.NotFound:
            if trait in self.node_traits(node_uuid):
                raise  # put back in between: report the removal as failed


def from_conf(conf: cfg.ConfigOpts | None = None) -> IronicClient:
    """The scheduler's client, from the ``[ironic]`` section Nova's Ironic
    driver reads (``nova/conf/ironic.py``), with ``DEFAULT_READ_TIMEOUT``."""
    return IronicClient(
        http.adapter_from_conf(conf or cfg.CONF, "ironic", "baremetal"),
        default_timeout=DEFAULT_READ_TIMEOUT)
