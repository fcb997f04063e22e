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

"""Typed placement calls used by the pre-filter, the trait sync and the CLI."""
import dataclasses
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from urllib import parse

from nova_drain_filters.clients import http

#: 1.6 added the traits API; every call here works at this version.
TRAITS_VERSION = "1.6"

#: 1.38: allocation writes carry consumer_type; reads show it.
ALLOCATIONS_VERSION = "1.38"
#: 1.14: providers show their root and parent.
PROVIDERS_VERSION = "1.14"
#: 1.18: ``GET /resource_providers?required=<traits>``.
REQUIRED_TRAITS_VERSION = "1.18"
#: 1.22: ``GET /allocation_candidates`` takes forbidden traits
#: (``!TRAIT``); its provider summaries carry traits from 1.17.
CANDIDATES_VERSION = "1.22"
#: ``GET /resource_providers/{uuid}/allocations``: unchanged since 1.0.
PROVIDER_ALLOCATIONS_VERSION = "1.0"

#: How often a provider trait update is retried after a generation conflict.
MAX_CONFLICT_RETRIES = 5

Allocations = dict[str, dict[str, Any]]


def _writable_type(consumer_type: str | None) -> str:
    """A consumer type placement accepts back.

    Allocations written below 1.38 (as Nova 34 still writes them) read back
    as ``unknown``, which a write rejects (``^[A-Z0-9_]+$``); they are
    Nova's instances.
    """
    if consumer_type and consumer_type != "unknown":
        return consumer_type
    return "INSTANCE"



def root_names(providers: list[dict[str, Any]]) -> list[str]:
    """The names (else UUIDs) of the root providers among ``providers``."""
    return [p.get("name") or p["uuid"] for p in providers
            if p.get("root_provider_uuid", p["uuid"]) == p["uuid"]]

@dataclasses.dataclass(frozen=True)
class ProviderRoom:
    """One provider of an allocation candidates answer's summaries."""

    uuid: str
    #: {resource class: (capacity, used)}; capacity is placement's
    #: (total - reserved) * allocation_ratio.
    resources: Mapping[str, tuple[int, int]]
    traits: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Candidates:
    """One request shape's answer: the providers it could allocate from
    and the summary of every provider the answer names."""

    offered: frozenset[str]
    summaries: Mapping[str, ProviderRoom]


def _summaries(body: dict[str, Any]) -> dict[str, ProviderRoom]:
    found = {}
    for uuid, summary in (body.get("provider_summaries") or {}).items():
        found[uuid] = ProviderRoom(
            uuid, {rc: (int(r.get("capacity", 0)), int(r.get("used", 0)))
                   for rc, r in (summary.get("resources") or {}).items()},
            frozenset(summary.get("traits") or ()))
    return found


class PlacementClient(http.ServiceClient):
    """Placement, through a keystoneauth1 Adapter."""

    service = "placement"
    #: The newest microversion any call below sends.
    microversion = ALLOCATIONS_VERSION

    def ensure_trait(self, name: str) -> bool:
        """Create the custom trait if needed; True if it was just created.

        ``PUT /traits/{name}`` is idempotent: 201 created, 204 existed.
        """
        status, _ = self.request(
            "PUT", f"/traits/{name}", microversion=TRAITS_VERSION,
            ok=(201, 204),
        )
        return status == 201

    def existing_traits(self, names: Iterable[str]) -> set[str]:
        """Return which of ``names`` placement knows, in one request."""
        wanted = sorted(set(names))
        if not wanted:
            return set()
        body = self.get(
            "/traits?name=in:" + ",".join(wanted), microversion=TRAITS_VERSION
        )
        return set(body.get("traits", [])) & set(wanted)

    def provider_traits(self, rp_uuid: str) -> tuple[set[str], int]:
        """Return a provider's traits and its generation."""
        body = self.get(
            f"/resource_providers/{rp_uuid}/traits",
            microversion=TRAITS_VERSION,
        )
        return set(body["traits"]), int(body["resource_provider_generation"])

    def update_provider_traits(
        self,
        rp_uuid: str,
        add: Iterable[str] = (),
        remove: Iterable[str] = (),
    ) -> bool:
        """Add and remove traits on a provider, leaving every other trait.

        Reads the traits with the provider generation, writes the new set
        with that generation, and on a 409 conflict (someone else, such as
        nova-compute setting ``COMPUTE_STATUS_DISABLED``, wrote in between)
        reads again and retries, so no concurrent write is lost. Returns
        True if it wrote, False if nothing needed to change.
        """
        add, remove = set(add), set(remove)
        for _attempt in range(MAX_CONFLICT_RETRIES):
            current, generation = self.provider_traits(rp_uuid)
            wanted = (current | add) - remove
            if wanted == current:
                return False
            body: dict[str, Any] = {
                "traits": sorted(wanted),
                "resource_provider_generation": generation,
            }
            try:
                self.request(
                    "PUT", f"/resource_providers/{rp_uuid}/traits",
                    microversion=TRAITS_VERSION, json_body=body,
                )
                return True
            except http.Conflict:
                continue
        raise http.Conflict(
            self.service, "PUT", f"/resource_providers/{rp_uuid}/traits", 409,
            f"provider generation kept changing; gave up after "
            f"{MAX_CONFLICT_RETRIES} attempts",
        )

    def providers(self, required: str | None = None) -> list[dict[str, Any]]:
        """Every resource provider (one request), or those with a trait."""
        url = "/resource_providers"
        version = PROVIDERS_VERSION
        if required:
            url += f"?required={required}"
            version = REQUIRED_TRAITS_VERSION
        return list(self.get(url, microversion=version)["resource_providers"])

    def allocation_candidates(
        self, resources: Mapping[str, int], required: Iterable[str] = (),
        forbidden: Iterable[str] = ()) -> Candidates:
        """The providers that could take ``resources`` now, in one request.

        Placement answers 400 to a trait it has never seen; the caller
        sends only traits :meth:`existing_traits` knows (a forbidden trait
        nobody has forbids nothing; a required one nobody has means no
        candidate, without asking).
        """
        query = {"resources": ",".join(
            f"{rc}:{n}" for rc, n in sorted(resources.items()))}
        wanted = sorted(required) + [f"!{t}" for t in sorted(forbidden)]
        if wanted:
            query["required"] = ",".join(wanted)
        body = self.get("/allocation_candidates?" + parse.urlencode(query),
                        microversion=CANDIDATES_VERSION)
        offered = frozenset(
            rp for request in body.get("allocation_requests") or ()
            for rp in (request.get("allocations") or {}))
        return Candidates(offered, _summaries(body))

    def provider_allocations(self, rp_uuid: str) -> dict[str, dict[str, int]]:
        """{consumer: {resource class: amount}} on one provider."""
        body = self.get(f"/resource_providers/{rp_uuid}/allocations",
                        microversion=PROVIDER_ALLOCATIONS_VERSION)
        return {consumer: dict(alloc.get("resources", {}))
                for consumer, alloc in body.get("allocations", {}).items()}

    def consumer_allocations(self, consumer: str) -> dict[str, Any]:
        """A consumer's allocations with its generation, project and type."""
        body = self.get(f"/allocations/{consumer}",
                        microversion=ALLOCATIONS_VERSION)
        return dict(body)

    def replace_consumer_allocations(
        self, consumer: str, allocations: Allocations, current: dict[str, Any]
    ) -> None:
        """Write a consumer's allocations, guarded by its generation.

        Raises Conflict when the consumer's generation is no longer the one
        in ``current`` (another writer wrote it since that read).
        """
        body = {
            "allocations": {
                rp: {"resources": dict(a["resources"])}
                for rp, a in allocations.items()
            },
            "consumer_generation": current.get("consumer_generation"),
            "project_id": current["project_id"],
            "user_id": current["user_id"],
            "consumer_type": _writable_type(current.get("consumer_type")),
        }
        self.request("PUT", f"/allocations/{consumer}",
                     microversion=ALLOCATIONS_VERSION, json_body=body,
                     ok=(204,))

    def delete_consumer_allocations(
        self, consumer: str, current: dict[str, Any]
    ) -> None:
        """Delete all of a consumer's allocations, guarded by its generation.

        ``PUT /allocations/{consumer}`` with empty ``allocations`` and the
        ``consumer_generation`` of ``current`` (the read the caller judged),
        rather than an unguarded ``DELETE``, which would also remove what
        another writer added since that read. Placement accepts an empty
        ``allocations`` object from 1.28 (``schemas/allocation.py``
        ``ALLOCATION_SCHEMA_V1_28``, built on ``DELETABLE_ALLOCATIONS``);
        at 1.38 it still wants project_id, user_id and consumer_type.
        ``handlers/allocation.py`` ``_set_allocations_for_consumer`` checks
        the generation (``handlers/util.py`` ``ensure_consumer``: 409
        "consumer generation conflict", also when the consumer is gone and
        the generation given is not null), then zeroes the allocations it
        finds; the consumer record goes with its last allocation. Raises
        Conflict on a 409, for the caller to read again and re-judge.
        """
        self.replace_consumer_allocations(consumer, {}, current)

    def delete_provider(self, rp_uuid: str) -> None:
        """Delete a resource provider (placement refuses one in use)."""
        self.request("DELETE", f"/resource_providers/{rp_uuid}",
                     microversion=PROVIDERS_VERSION, ok=(204,))
