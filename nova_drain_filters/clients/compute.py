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

"""Typed Nova API calls: hypervisors, services, servers and migrations, in bulk.

Every list is paginated with ``limit``/``marker`` and follows Nova's
``*_links`` "next" link, so a cloud of any size costs requests per page,
never per instance.
"""
import dataclasses
from collections.abc import Iterator
from typing import Any
from urllib import parse

from oslo_utils import timeutils

from nova_drain_filters import decisions
from nova_drain_filters.clients import http

#: 2.53: service and hypervisor ids are UUIDs; 2.59: migrations paginate and
#: carry their UUID (the consumer of a migration's allocations).
COMPUTE_VERSION = "2.59"
#: The last version with ``os-hosts`` (removed in 2.43).
HOSTS_VERSION = "2.42"
PAGE_SIZE = 1000

#: Migration statuses after which the migration holds no allocation.
MIGRATION_DONE = frozenset({
    "confirmed", "reverted", "error", "failed", "completed", "done",
    "cancelled",
})


@dataclasses.dataclass(frozen=True)
class Hypervisor:
    """A compute node record as ``GET /os-hypervisors/detail`` shows it."""

    uuid: str
    hypervisor_hostname: str
    hypervisor_type: str | None
    host: str
    service_id: str | None
    state: str
    status: str
    #: (resource class, total) as the record reports them: VCPU, MEMORY_MB
    #: and DISK_GB, the totals Nova's resource tracker gives placement
    #: (``hypervisor_totals``); empty where the record says 0.
    totals: tuple[tuple[str, int], ...] = ()

    @property
    def facts(self) -> decisions.NodeFacts:
        return decisions.NodeFacts(
            host=self.host, nodename=self.hypervisor_hostname, uuid=self.uuid,
            service_up=self.state == "up",
            hypervisor_type=self.hypervisor_type)


@dataclasses.dataclass(frozen=True)
class Service:
    """A nova-compute service record."""

    uuid: str
    host: str
    state: str
    status: str
    forced_down: bool
    disabled_reason: str | None
    updated_at: str | None

    @property
    def facts(self) -> decisions.ServiceFacts:
        """The record as the decisions (and a drain) see it.

        Up means reported up and not forced down, as Nova's servicegroup
        API counts it (``nova/servicegroup/api.py`` ``service_is_up``).
        """
        return decisions.ServiceFacts(
            host=self.host, disabled=self.status == "disabled",
            forced_down=self.forced_down,
            is_up=self.state == "up" and not self.forced_down,
            disabled_reason=self.disabled_reason,
            last_seen_up=(timeutils.parse_isotime(self.updated_at)
                          if self.updated_at else None),
            uuid=self.uuid)


@dataclasses.dataclass(frozen=True)
class Server:
    """An instance, with where Nova says it lives."""

    uuid: str
    status: str
    host: str | None
    node: str | None
    project_id: str | None


@dataclasses.dataclass(frozen=True)
class Migration:
    """A migration that still holds (or may hold) allocations."""

    uuid: str
    instance_uuid: str
    status: str
    source_node: str | None
    dest_node: str | None
    source_compute: str | None = None
    dest_compute: str | None = None


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """A host aggregate and the hosts in it."""

    id: int
    name: str
    hosts: tuple[str, ...]
    availability_zone: str | None = None


#: The compute node record's fields for each standard resource class
#: (removed from the hypervisor API in 2.88; COMPUTE_VERSION is older).
_TOTALS = (("VCPU", "vcpus"), ("MEMORY_MB", "memory_mb"),
           ("DISK_GB", "local_gb"))


def hypervisor_totals(record: Any) -> tuple[tuple[str, int], ...]:
    """(class, total) of a hypervisor body or a ComputeNode, zeros left out.

    Nova's Ironic driver reports 0 for all three
    (``nova/virt/ironic/driver.py`` ``_node_resource``): an Ironic node's
    one class is its Ironic ``resource_class``.
    """
    read = record.get if isinstance(record, dict) else (
        lambda name: getattr(record, name, None))
    found = []
    for rc, field in _TOTALS:
        value = read(field)
        if isinstance(value, int) and value > 0:
            found.append((rc, value))
    return tuple(found)


def _service(body: dict[str, Any]) -> Service:
    return Service(uuid=str(body["id"]), host=body["host"],
                   state=body["state"], status=body["status"],
                   forced_down=bool(body.get("forced_down")),
                   disabled_reason=body.get("disabled_reason"),
                   updated_at=body.get("updated_at"))


def _server(body: dict[str, Any]) -> Server:
    return Server(uuid=body["id"], status=body.get("status", ""),
                  host=body.get("OS-EXT-SRV-ATTR:host"),
                  node=body.get("OS-EXT-SRV-ATTR:hypervisor_hostname"),
                  project_id=body.get("tenant_id"))


class ComputeClient(http.ServiceClient):
    """Nova's compute API, through a keystoneauth1 Adapter."""

    service = "nova"
    microversion = COMPUTE_VERSION
    #: The compute endpoint is versioned (``.../v2.1``); its root is the
    #: version document (nova/api/openstack/compute/versionsV21.py).
    version_path = "/"

    def _pages(self, path: str, key: str,
               params: dict[str, str] | None = None,
               microversion: str = COMPUTE_VERSION) -> Iterator[Any]:
        """Every item of a Nova list, following its ``<key>_links`` next."""
        def items(body: Any, url: str) -> list[Any]:
            return list(body.get(key) or [])

        def next_marker(body: Any, found: list[Any]) -> str | None:
            links = body.get(f"{key}_links") or []
            if not any(link.get("rel") == "next" for link in links):
                return None
            return str(found[-1].get("uuid") or found[-1].get("id"))

        for page in self.pages(
                path, dict(params or {}, limit=str(PAGE_SIZE)),
                microversion=microversion, items=items,
                next_marker=next_marker):
            yield from page

    def hypervisors(self) -> list[Hypervisor]:
        """Every compute node record, with its service's host and state."""
        found = []
        for hv in self._pages("/os-hypervisors/detail", "hypervisors"):
            service = hv.get("service") or {}
            found.append(Hypervisor(
                uuid=str(hv["id"]),
                hypervisor_hostname=hv.get("hypervisor_hostname") or "",
                hypervisor_type=hv.get("hypervisor_type"),
                host=service.get("host") or "", service_id=service.get("id"),
                state=hv.get("state", ""), status=hv.get("status", ""),
                totals=hypervisor_totals(hv)))
        return found

    def services(self, host: str | None = None) -> list[Service]:
        """Every nova-compute service, or one host's (not paginated)."""
        query = {"binary": "nova-compute", **({"host": host} if host else {})}
        body = self.get(f"/os-services?{parse.urlencode(query)}",
                        microversion=COMPUTE_VERSION)
        return [_service(s) for s in body["services"]]

    def update_service(self, uuid: str, *, disabled: bool,
                       reason: str | None = None) -> Service:
        """Enable or disable a compute service (2.53: by UUID).

        Nova then asks a running nova-compute to set or clear
        COMPUTE_STATUS_DISABLED on its providers
        (``nova/compute/api.py`` ``_update_compute_provider_status``).
        """
        body: dict[str, Any] = {"status": "disabled" if disabled
                                else "enabled"}
        if disabled and reason:
            body["disabled_reason"] = reason
        _, answer = self.request("PUT", f"/os-services/{uuid}",
                                 microversion=COMPUTE_VERSION, json_body=body)
        return _service(answer["service"])

    def aggregates(self) -> list[Aggregate]:
        """Every host aggregate with its hosts (one request)."""
        body = self.get("/os-aggregates", microversion=COMPUTE_VERSION)
        return [Aggregate(id=int(a["id"]), name=a.get("name") or "",
                          hosts=tuple(a.get("hosts") or ()),
                          availability_zone=a.get("availability_zone"))
                for a in body["aggregates"]]

    def host_mapped(self, host: str) -> bool:
        """Whether the API still finds ``host`` through its host mapping.

        No API lists host mappings; ``GET /os-hosts/{host}`` (up to 2.42)
        answers 200 only when the mapping and a compute node exist, and 404
        otherwise (``nova/api/openstack/compute/hosts.py`` ``show``). A
        mapping without any compute node is invisible to the API.
        """
        try:
            self.get(f"/os-hosts/{parse.quote(host, safe='')}",
                     microversion=HOSTS_VERSION)
        except http.NotFound:
            return False
        return True

    def servers(self, host: str | None = None) -> list[Server]:
        """Every instance of every project (or on one host), a page at a
        time."""
        params = {"all_tenants": "1"}
        if host:
            params["host"] = host
        return [_server(s) for s in self._pages(
            "/servers/detail", "servers", params)]

    def server(self, uuid: str) -> Server | None:
        """One instance as Nova has it now, or None if it does not exist."""
        try:
            body = self.get(f"/servers/{uuid}", microversion=COMPUTE_VERSION)
        except http.NotFound:
            return None
        return _server(body["server"])

    def migrations_in_progress(self, host: str | None = None
                               ) -> list[Migration]:
        """Migrations that may still hold allocations (to or from ``host``).

        Nova's ``host`` filter matches the source or the destination
        compute (``nova/db/main/api.py`` ``migration_get_all_by_filters``).
        """
        found = []
        params = {"host": host} if host else None
        for m in self._pages("/os-migrations", "migrations", params):
            if m.get("status") in MIGRATION_DONE:
                continue
            found.append(Migration(
                uuid=str(m.get("uuid")), instance_uuid=m["instance_uuid"],
                status=m["status"], source_node=m.get("source_node"),
                dest_node=m.get("dest_node"),
                source_compute=m.get("source_compute"),
                dest_compute=m.get("dest_compute")))
        return found

    def delete_service(self, uuid: str) -> None:
        """Delete a compute service; Nova removes its nodes and providers."""
        self.request("DELETE", f"/os-services/{uuid}",
                     microversion=COMPUTE_VERSION)
