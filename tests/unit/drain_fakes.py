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

"""Builders and fakes of ComputeClient and PlacementClient for orphans and stale.

The fakes keep every call in ``calls`` as (method, args...) and raise the
error set in ``errors[method]`` instead of answering.
"""
import copy
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

from nova_drain_filters.clients import compute


def hv(uuid: str, name: str | None = None, host: str = "c1",
       htype: str | None = "ironic", state: str = "up",
       service_id: str | None = None) -> compute.Hypervisor:
    """A compute node record; an Ironic one is named after its uuid."""
    return compute.Hypervisor(uuid=uuid, hypervisor_hostname=name or uuid,
                           hypervisor_type=htype, host=host,
                           service_id=service_id or f"svc-{host}",
                           state=state, status="enabled")


def server(uuid: str, node: str | None = "n1", host: str | None = "c1",
           status: str = "ACTIVE", project: str = "proj") -> compute.Server:
    return compute.Server(uuid, status, host, node, project)


def migration(uuid: str, instance: str,
              status: str = "running") -> compute.Migration:
    return compute.Migration(uuid, instance, status, "n1", "n2")


def service(host: str, state: str = "up", forced_down: bool = False,
            updated_at: str | None = None,
            uuid: str | None = None) -> compute.Service:
    return compute.Service(uuid or f"svc-{host}", host, state, "enabled",
                        forced_down, None, updated_at)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.errors: dict[str, Exception] = {}
        self.requests = 0

    def _call(self, name: str, *args: Any) -> None:
        self.requests += 1
        self.calls.append((name, *args))
        if name in self.errors:
            raise self.errors[name]

    def called(self, name: str) -> list[tuple[Any, ...]]:
        return [c[1:] for c in self.calls if c[0] == name]


class FakeNova(_Recorder):
    """Stands in for ComputeClient."""

    def __init__(self, hypervisors: Iterable[compute.Hypervisor] = (),
                 services: Iterable[compute.Service] = (),
                 servers: Iterable[compute.Server] = (),
                 migrations: Iterable[compute.Migration] = ()) -> None:
        super().__init__()
        self.hypervisor_list = list(hypervisors)
        self.service_list = list(services)
        self.server_list = list(servers)
        self.migration_list = list(migrations)
        #: Called with the service uuid after a delete_service.
        self.on_delete_service: Callable[[str], None] | None = None

    def hypervisors(self) -> list[compute.Hypervisor]:
        self._call("hypervisors")
        return list(self.hypervisor_list)

    def services(self) -> list[compute.Service]:
        self._call("services")
        return list(self.service_list)

    def servers(self) -> list[compute.Server]:
        self._call("servers")
        return list(self.server_list)

    def server(self, uuid: str) -> compute.Server | None:
        self._call("server", uuid)
        return {s.uuid: s for s in self.server_list}.get(uuid)

    def migrations_in_progress(self) -> list[compute.Migration]:
        self._call("migrations_in_progress")
        return list(self.migration_list)

    def delete_service(self, uuid: str) -> None:
        self._call("delete_service", uuid)
        if self.on_delete_service is not None:
            self.on_delete_service(uuid)


def consumer(allocations: Mapping[str, Mapping[str, int]],
             consumer_type: str = "INSTANCE", generation: int = 1,
             project: str = "proj") -> dict[str, Any]:
    """A ``GET /allocations/{consumer}`` body at microversion 1.38."""
    return {"allocations": {rp: {"generation": 1, "resources": dict(res)}
                            for rp, res in allocations.items()},
            "consumer_generation": generation, "project_id": project,
            "user_id": "user", "consumer_type": consumer_type}


class FakeAllocations(_Recorder):
    """Stands in for PlacementClient's provider and allocation calls.

    :param providers: {uuid: root uuid}.
    :param allocations: {provider: {consumer: {resource class: amount}}}.
    :param consumers: {consumer: ``GET /allocations/{consumer}`` body};
        a consumer not given has no allocations.
    :param compute: providers with the COMPUTE_NODE trait.
    :param names: provider names (default: the UUID).
    """

    def __init__(self, providers: Mapping[str, str] | None = None,
                 allocations: Mapping[str, Mapping[str, Any]] | None = None,
                 consumers: Mapping[str, dict[str, Any]] | None = None,
                 compute: Iterable[str] = (),
                 names: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.provider_roots = dict(providers or {})
        self.names = dict(names or {})
        self.allocations = {rp: dict(c) for rp, c in (allocations or {}).items()}
        self.consumers = dict(consumers or {})
        self.compute = set(compute)
        #: {trait: the providers carrying it}, COMPUTE_NODE aside.
        self.traits: dict[str, set[str]] = {}
        #: The consumer generation each delete was guarded by.
        self.generations: list[Any] = []

    def existing_traits(self, names: Iterable[str]) -> set[str]:
        """Placement knows COMPUTE_NODE and the traits some provider has."""
        self._call("existing_traits", tuple(sorted(names)))
        return set(names) & ({"COMPUTE_NODE"} | set(self.traits))

    def providers(self, required: str | None = None) -> list[dict[str, Any]]:
        self._call("providers", required)
        return [{"uuid": rp, "root_provider_uuid": root,
                 "name": self.names.get(rp, rp)}
                for rp, root in sorted(self.provider_roots.items())
                if required is None or (required == "COMPUTE_NODE"
                                        and rp in self.compute)
                or rp in self.traits.get(required, ())]

    def provider_allocations(self, rp: str) -> dict[str, dict[str, int]]:
        self._call("provider_allocations", rp)
        return copy.deepcopy(self.allocations.get(rp, {}))

    def consumer_allocations(self, uuid: str) -> dict[str, Any]:
        self._call("consumer_allocations", uuid)
        return copy.deepcopy(self.consumers.get(uuid, {"allocations": {}}))

    def replace_consumer_allocations(self, uuid: str, allocations: Any,
                                     current: dict[str, Any]) -> None:
        self._call("replace_consumer_allocations", uuid, allocations, current)

    def delete_consumer_allocations(self, uuid: str,
                                    current: dict[str, Any]) -> None:
        self._call("delete_consumer_allocations", uuid)
        self.generations.append(current.get("consumer_generation"))

    def delete_provider(self, rp: str) -> None:
        self._call("delete_provider", rp)
        self.provider_roots.pop(rp, None)

    @property
    def writes(self) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0].startswith(("replace", "delete"))]
