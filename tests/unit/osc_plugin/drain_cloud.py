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

"""A small stateful cloud for ``drain host`` and ``drain node``: the fakes
change what they answer when a command writes, and log every write."""
import dataclasses
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters import traits
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from tests.unit import drain_fakes as df
from tests.unit.osc_plugin import fakes

MARK = traits.DRAIN_HOST


class Nova(df.FakeNova):
    def __init__(self, cloud: "Cloud") -> None:
        super().__init__(cloud.hypervisors)
        self.cloud = cloud

    def _call(self, name: str, *args: Any) -> None:
        self.cloud.log.append((name, *args))
        super()._call(name, *args)

    def services(self, host: str | None = None) -> list[compute.Service]:
        self._call("services", host)
        return [s for s in self.cloud.services.values()
                if host is None or s.host == host]

    def servers(self, host: str | None = None) -> list[compute.Server]:
        self._call("servers", host)
        return [s for s in self.cloud.servers if host in (None, s.host)]

    def migrations_in_progress(self, host: str | None = None
                               ) -> list[compute.Migration]:
        self._call("migrations_in_progress", host)
        return [m for m in self.cloud.migrations
                if host in (None, m.source_compute, m.dest_compute)]

    def update_service(self, uuid: str, *, disabled: bool,
                       reason: str | None = None) -> compute.Service:
        self._call("update_service", uuid, disabled, reason)
        for host, svc in self.cloud.services.items():
            if svc.uuid == uuid:
                self.cloud.services[host] = dataclasses.replace(
                    svc, status="disabled" if disabled else "enabled",
                    disabled_reason=reason if disabled else None)
                return self.cloud.services[host]
        raise fakes.api_error(404, "nova", "PUT", f"/os-services/{uuid}")

    def delete_service(self, uuid: str) -> None:
        self._call("delete_service", uuid)
        host = next(h for h, s in self.cloud.services.items()
                    if s.uuid == uuid)
        del self.cloud.services[host]
        gone = {hv.uuid for hv in self.cloud.hypervisors if hv.host == host}
        if not self.cloud.keep_providers:  # Nova's delete went well
            for rp in gone:
                self.cloud.traits.pop(rp, None)
            self.cloud.rack7 = [h for h in self.cloud.rack7 if h != host]
        self.cloud.hypervisors[:] = [hv for hv in self.cloud.hypervisors
                                     if hv.host != host]
        self.hypervisor_list = self.cloud.hypervisors

    def aggregates(self) -> list[compute.Aggregate]:
        self._call("aggregates")
        return [compute.Aggregate(1, "rack7", tuple(self.cloud.rack7))]

    def host_mapped(self, host: str) -> bool:
        self._call("host_mapped", host)
        return host in self.cloud.services


class Placement(df.FakeAllocations):
    def __init__(self, cloud: "Cloud") -> None:
        super().__init__(allocations=cloud.allocations)
        self.cloud = cloud

    def _call(self, name: str, *args: Any) -> None:
        self.cloud.log.append((name, *args))
        super()._call(name, *args)

    def providers(self, required: str | None = None) -> list[dict[str, Any]]:
        self._call("providers", required)
        return [{"uuid": rp, "root_provider_uuid": rp}
                for rp, have in sorted(self.cloud.traits.items())
                if required is None or required in have]

    def provider_allocations(self, rp: str) -> dict[str, dict[str, int]]:
        self._call("provider_allocations", rp)
        return dict(self.cloud.allocations.get(rp, {}))

    def existing_traits(self, names: Iterable[str]) -> set[str]:
        self._call("existing_traits", tuple(names))
        return set(names) & {t for have in self.cloud.traits.values()
                             for t in have}

    def ensure_trait(self, name: str) -> bool:
        self._call("ensure_trait", name)
        return False

    def provider_traits(self, rp: str) -> tuple[set[str], int]:
        self._call("provider_traits", rp)
        if rp not in self.cloud.traits:
            raise fakes.api_error(404, "placement", "GET", f"/rp/{rp}")
        return set(self.cloud.traits[rp]), 1

    def update_provider_traits(self, rp: str, add: Iterable[str] = (),
                               remove: Iterable[str] = ()) -> bool:
        add, remove = set(add), set(remove)
        self._call("update_provider_traits", rp, add, remove)
        self.cloud.traits[rp] = (self.cloud.traits[rp] | add) - remove
        return True


class Ironic:
    def __init__(self, cloud: "Cloud") -> None:
        self.cloud = cloud
        self.calls: list[tuple[Any, ...]] = []
        self.errors: dict[str, Exception] = {}

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, *args))
        self.cloud.log.append((name, *args))
        if name in self.errors:
            raise self.errors[name]

    def list_nodes(self, page_size: int, extra_fields: Sequence[str] = ()
                   ) -> list[decisions.IronicNodeFacts]:
        self._call("list_nodes", page_size)
        return [dataclasses.replace(n, traits=frozenset(
            self.cloud.node_traits.get(n.uuid, ())))
            for n in self.cloud.nodes]

    def get_node(self, ident: str) -> decisions.IronicNodeFacts | None:
        self._call("node", ident)
        return next((n for n in self.list_nodes(0)
                     if ident in (n.uuid, n.name)), None)

    def add_trait(self, uuid: str, trait: str) -> None:
        self._call("add_trait", uuid, trait)
        self.cloud.node_traits.setdefault(uuid, set()).add(trait)

    def remove_trait(self, uuid: str, trait: str) -> None:
        self._call("remove_trait", uuid, trait)
        self.cloud.node_traits.get(uuid, set()).discard(trait)


class Cloud:
    """Hosts c1, c2 (libvirt, one node each) and bm (Ironic: n1, n2)."""

    def __init__(self) -> None:
        self.services = {h: compute.Service(f"svc-{h}", h, "up", "enabled",
                                            False, None, None)
                         for h in ("c1", "c2", "bm")}
        self.hypervisors = [
            df.hv("rp-c1", "c1", "c1", "QEMU", service_id="svc-c1"),
            df.hv("rp-c2", "c2", "c2", "QEMU", service_id="svc-c2"),
            df.hv("n1", host="bm", service_id="svc-bm"),
            df.hv("n2", host="bm", service_id="svc-bm")]
        self.traits: dict[str, set[str]] = {
            hv.uuid: set() for hv in self.hypervisors}
        self.nodes = [decisions.IronicNodeFacts(u, "available", name=f"bm-{u}")
                      for u in ("n1", "n2")]
        self.node_traits: dict[str, set[str]] = {}
        self.servers: list[compute.Server] = []
        self.migrations: list[compute.Migration] = []
        self.allocations: dict[str, dict[str, Any]] = {}
        self.rack7 = ["c1"]
        self.keep_providers = False
        #: Every call to any of the three, in order.
        self.log: list[tuple[Any, ...]] = []
        self.nova = Nova(self)
        self.placement = Placement(self)
        self.ironic = Ironic(self)

    def client(self, has_ironic: bool = True) -> fakes.FakeDrainClient:
        return fakes.FakeDrainClient(self.nova, self.placement, self.ironic,
                                     has_ironic)

    def disable(self, host: str, reason: str | None) -> None:
        self.services[host] = dataclasses.replace(
            self.services[host], status="disabled", disabled_reason=reason)

    def down(self, host: str) -> None:
        self.services[host] = dataclasses.replace(
            self.services[host], state="down", forced_down=True)

    def add_server(self, uuid: str, host: str, node: str) -> None:
        self.servers.append(df.server(uuid, node, host))
        self.allocations.setdefault(node, {})[uuid] = {"VCPU": 1}

    def writes(self) -> list[tuple[Any, ...]]:
        names = ("update_service", "delete_service", "update_provider_traits",
                 "add_trait", "remove_trait")
        return [c for c in self.log if c[0] in names]


def conflict(service: str = "placement") -> http.ApiError:
    return http.ApiError(service, "PUT", "/resource_providers/rp-c2/traits",
                         409, "Resource provider's generation already "
                         "changed.\n Please update the generation and try "
                         "again.", "req-42")
