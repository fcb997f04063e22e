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

"""Fakes and builders for the Ironic view and trait sync unit tests."""
import threading
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

from nova_drain_filters import decisions
from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement
from tests.unit import fakes


def ironic_node(uuid: str = "node-1", **kw: Any) -> decisions.IronicNodeFacts:
    """A node that can take an instance, unless told otherwise."""
    kw.setdefault("provision_state", "available")
    kw.setdefault("power_state", "power off")
    return decisions.IronicNodeFacts(uuid=uuid, **kw)


def api_error(status: int | None, message: str = "boom",
              service: str = "ironic") -> http.ApiError:
    return http.error_type(status)(service, "PUT", "/x", status, message)


class FakeIronicClient:
    """Stands in for IronicClient: ``requests`` and ``list_nodes``.

    Each call costs ``pages`` requests and calls ``hook`` (e.g. to move a
    fake clock). ``error`` is raised instead of an answer; with ``block``
    set, a call waits on it after setting ``entered``.
    """

    def __init__(self, nodes: Iterable[decisions.IronicNodeFacts] = (),
                 pages: int = 1) -> None:
        self.nodes = list(nodes)
        self.pages = pages
        self.requests = 0
        self.page_sizes: list[int] = []
        self.error: Exception | None = None
        self.block: threading.Event | None = None
        self.entered = threading.Event()
        self.hook: Callable[[], object] | None = None

    def list_nodes(self, page_size: int, extra_fields: Sequence[str] = ()
                   ) -> list[decisions.IronicNodeFacts]:
        self.page_sizes.append(page_size)
        self.requests += self.pages
        if self.hook is not None:
            self.hook()
        self.entered.set()
        if self.block is not None:
            assert self.block.wait(10), "test never released list_nodes"
        if self.error is not None:
            raise self.error
        return list(self.nodes)

    def iter_node_pages(
        self, page_size: int
    ) -> Iterator[list[decisions.IronicNodeFacts]]:
        """The whole listing as one page (what the Ironic view reads)."""
        yield self.list_nodes(page_size)


class FakeSyncIronic(FakeIronicClient):
    """Adds the trait calls the sync makes, logged in ``log``.

    ``failures`` maps (uuid, trait) to errors raised one per call, in order.
    """

    def __init__(self, log: list[tuple[Any, ...]],
                 nodes: Iterable[decisions.IronicNodeFacts] = ()) -> None:
        super().__init__(nodes)
        self.log = log
        self.failures: dict[tuple[str, str], list[Exception]] = {}

    def _call(self, name: str, uuid: str, trait: str) -> None:
        self.requests += 1
        self.log.append((name, uuid, trait))
        pending = self.failures.get((uuid, trait))
        if pending:
            raise pending.pop(0)

    def add_trait(self, node_uuid: str, trait: str) -> None:
        self._call("ironic.add_trait", node_uuid, trait)

    def remove_trait(self, node_uuid: str, trait: str) -> None:
        self._call("ironic.remove_trait", node_uuid, trait)


class FakeSyncPlacement(fakes.FakePlacement):
    """Adds ``get`` for ``required=`` queries and ``update_provider_traits``.

    ``carriers`` maps a trait to the providers that carry it; ``failures``
    maps a provider uuid to the error its update raises.
    """

    def __init__(self, log: list[tuple[Any, ...]],
                 carriers: dict[str, set[str]] | None = None) -> None:
        super().__init__()
        self.log = log
        self.carriers = carriers or {}
        self.requests = 0
        self.failures: dict[str, Exception] = {}

    def ensure_trait(self, name: str) -> bool:
        self.requests += 1
        self.log.append(("placement.ensure_trait", name))
        return super().ensure_trait(name)

    def existing_traits(self, names: Iterable[str]) -> set[str]:
        self.requests += 1
        self.log.append(("placement.existing_traits", tuple(names)))
        known = self.existing | set(self.carriers)
        return set(names) & known

    def get(self, url: str, *, microversion: str) -> Any:
        self.requests += 1
        self.log.append(("placement.get", url, microversion))
        trait = url.split("required=", 1)[1]
        return {"resource_providers": [
            {"uuid": u} for u in sorted(self.carriers.get(trait, ()))]}

    # The real client's query, so the fake answers at the HTTP level.
    providers = placement.PlacementClient.providers

    def update_provider_traits(self, rp_uuid: str, add: Iterable[str] = (),
                               remove: Iterable[str] = ()) -> bool:
        self.requests += 2
        self.log.append(("placement.update", rp_uuid, set(add), set(remove)))
        if rp_uuid in self.failures:
            raise self.failures[rp_uuid]
        return True
