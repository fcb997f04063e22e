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

"""Orphaned allocations: what they are (a pure function) and how to find them.

An allocation is orphaned when its consumer is not an existing instance and
not a migration in progress, or is an instance that lives on another node
(a source allocation left behind). All resource classes count, custom ones
included, unlike ``nova-manage placement audit``, which looks only at the
standard ones.

Only Nova's providers are judged (``nova_trees``): the trees rooted at a
compute node record, and the trees whose root carries ``COMPUTE_NODE`` but
has no record any more (the node was deleted while its provider still held
an allocation, so Nova could not delete the provider). Every other root is
another service's (a sharing storage pool, a Blazar or Cyborg root of its
own) and so are the consumers on it.
"""
import dataclasses
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from concurrent import futures
from typing import Any
from typing import Protocol
from typing import TypeVar

from nova_drain_filters import decisions
from nova_drain_filters import listing_trust
from nova_drain_filters import orphan_clear
from nova_drain_filters import stale
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import placement

#: Provider allocation reads in flight at once.
CONCURRENCY = 8

#: The trait Nova's resource tracker puts on every compute node's root.
COMPUTE_NODE_TRAIT = "COMPUTE_NODE"


class NovaSide(Protocol):
    """Where Nova's records come from: the compute API
    (``compute.ComputeClient``) or, on a controller, the cell databases
    (``nova_db.NovaRecords``, as ``nova-manage placement audit`` reads)."""

    def hypervisors(self) -> list[compute.Hypervisor]: ...

    def servers(self) -> list[compute.Server]: ...

    def migrations_in_progress(self) -> list[compute.Migration]: ...


@dataclasses.dataclass(frozen=True)
class Orphan:
    """One consumer's allocation on one provider that nothing stands behind."""

    consumer: str
    provider: str
    host: str
    node: str
    resources: Mapping[str, int]
    reason: decisions.Reason
    project: str | None = None

    @property
    def resources_text(self) -> str:
        return ",".join(f"{rc}={n}" for rc, n in sorted(self.resources.items()))


@dataclasses.dataclass(frozen=True)
class NovaTree:
    """The compute node a tree of providers belongs to, as far as it is known.

    ``recorded`` is False when the root carries ``COMPUTE_NODE`` but no
    compute node record exists: ``host`` is then unknown ("") and ``node``
    is the root provider's name, which Nova sets to the node's
    ``hypervisor_hostname`` (``nova/compute/resource_tracker.py``
    ``_update_to_placement``: ``get_provider_subtree_and_ensure_root(...,
    name=compute_node.hypervisor_hostname)``).
    """

    root: str
    host: str
    node: str
    recorded: bool = True


def roots_without_record(providers: Iterable[Mapping[str, Any]],
                         nodes: Mapping[str, compute.Hypervisor]) -> set[str]:
    """Root providers that no compute node record stands behind."""
    return {p["uuid"] for p in providers
            if not p.get("root_provider_uuid")
            or p["root_provider_uuid"] == p["uuid"]} - set(nodes)


def nova_trees(
    providers: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, compute.Hypervisor],
    marked: Iterable[str],
) -> dict[str, NovaTree]:
    """{provider: the compute node its tree belongs to}, Nova's trees only.

    :param providers: ``GET /resource_providers`` rows (uuid, name, root).
    :param nodes: {compute node uuid: hypervisor}; Nova gives a node's
        root provider the node's UUID.
    :param marked: providers carrying ``COMPUTE_NODE`` (Nova sets it on
        every compute node root, ``resource_tracker.py`` ``_get_traits``).

    ==========================================  ===========================
    the provider's root                          judged as
    ==========================================  ===========================
    is a compute node record                    that node (host and name)
    carries COMPUTE_NODE, no record             that node, host unknown,
                                                name = root provider's name
    neither                                     not Nova's: left out
    ==========================================  ===========================
    """
    providers = list(providers)
    names = {p["uuid"]: p.get("name") or p["uuid"] for p in providers}
    marked = set(marked)
    trees = {}
    for p in providers:
        root = p.get("root_provider_uuid") or p["uuid"]
        node = nodes.get(root)
        if node is not None:
            trees[p["uuid"]] = NovaTree(root, node.host,
                                        node.hypervisor_hostname)
        elif root in marked:
            trees[p["uuid"]] = NovaTree(root, "", names.get(root, root),
                                        recorded=False)
    return trees


def find_orphans(
    allocations: Mapping[str, Mapping[str, Mapping[str, int]]],
    trees: Mapping[str, NovaTree],
    servers: Iterable[compute.Server],
    migrations: Iterable[compute.Migration],
) -> list[Orphan]:
    """Judge every (provider, consumer) allocation; a pure function.

    :param allocations: {provider: {consumer: {resource class: amount}}}.
    :param trees: {provider: its Nova compute node} (``nova_trees``); a
        provider not in it is not judged.

    ===================================  ==============================
    consumer                             verdict
    ===================================  ==============================
    a migration in progress              live
    an instance that is migrating        live (allocations in transit)
    an instance on this node             live
    an instance without a node (BUILD)   live (cannot judge: the
                                         scheduler claims before the
                                         instance gets its host)
    an instance on another node          orphan: instance elsewhere
    neither                              orphan: consumer missing
    ===================================  ==============================
    """
    live = Liveness(servers, migrations)
    found = []
    for rp, consumers in sorted(allocations.items()):
        tree = trees.get(rp)
        if tree is None:
            continue
        for consumer, resources in sorted(consumers.items()):
            reason = live.orphan_reason(consumer, tree.node)
            if reason is not None:
                found.append(Orphan(consumer, rp, tree.host, tree.node,
                                    dict(resources), reason))
    return found


class Liveness:
    """Whether a consumer still stands behind its allocation on a node."""

    def __init__(self, servers: Iterable[compute.Server],
                 migrations: Iterable[compute.Migration]) -> None:
        self.servers = {s.uuid: s for s in servers}
        migrations = list(migrations)
        self.migration_ids = {m.uuid for m in migrations}
        self.migrating = {m.instance_uuid for m in migrations}

    def orphan_reason(self, consumer: str,
                      node: str | None) -> decisions.Reason | None:
        """None if the consumer is live on ``node`` (None: no node)."""
        if consumer in self.migration_ids or consumer in self.migrating:
            return None
        return orphan_clear.reason_for(self.servers.get(consumer), node)


def read_allocations(
    client: placement.PlacementClient, providers: Iterable[str],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, dict[str, int]]]:
    """Provider allocations, with bounded concurrency (one request each)."""
    return _read_each(client.provider_allocations, providers, progress)


R = TypeVar("R")


def _read_each(read: Callable[[str], R], keys: Iterable[str],
               progress: Callable[[int, int], None] | None = None,
               ) -> dict[str, R]:
    """``{key: read(key)}``, CONCURRENCY reads in flight at once: placement
    serves them in parallel (one per WSGI worker), where one at a time
    would wait on each in turn."""
    keys = list(keys)
    found: dict[str, R] = {}
    with futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        jobs = {pool.submit(read, key): key for key in keys}
        for done, job in enumerate(futures.as_completed(jobs), 1):
            found[jobs[job]] = job.result()
            if progress:
                progress(done, len(keys))
    return found


class NovaViewIncomplete(Exception):
    """Nova's records lack too many of placement's compute node roots to be
    believed: every allocation on them would look orphaned."""

    def __init__(self, verdict: listing_trust.ListingVerdict) -> None:
        super().__init__(str(verdict))
        self.verdict = verdict


def compute_roots(
    client: placement.PlacementClient,
    providers: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, compute.Hypervisor],
    max_missing_fraction: float,
) -> set[str]:
    """The providers carrying ``COMPUTE_NODE``, when some root lacks a record.

    One ``COMPUTE_NODE`` query, only when a root has no compute node record
    (otherwise the empty set, and no request). Raises NovaViewIncomplete
    when Nova's records lack more than ``max_missing_fraction`` of those
    roots (``listing_trust.listing_verdict``): a nova.conf of another cloud, an
    unmapped cell or an empty database.
    """
    if not roots_without_record(providers, nodes):
        return set()
    marked = {p["uuid"] for p in client.providers(
        required=COMPUTE_NODE_TRAIT)}
    verdict = listing_trust.listing_verdict(
        marked, set(nodes), max_missing_fraction,
        listing="Nova's list of compute node records",
        things="compute node providers in placement (COMPUTE_NODE)")
    if not verdict.trusted:
        raise NovaViewIncomplete(verdict)
    return marked


def gather(
    nova: NovaSide, client: placement.PlacementClient,
    progress: Callable[[int, int], None] | None = None,
    deleted_projects: Callable[[Collection[str]], Mapping[str, str]]
    | None = None,
    max_missing_fraction: float = stale.DEFAULT_MAX_MISSING_FRACTION,
) -> list[Orphan]:
    """Every orphan in the cloud, with its consumer's project.

    Raises NovaViewIncomplete (``compute_roots``) when Nova's records lack
    too many of placement's ``COMPUTE_NODE`` roots: every allocation on them
    would otherwise look orphaned.

    The project is the instance's when Nova still has it (an instance
    elsewhere, or a deleted one through ``deleted_projects``, e.g.
    ``nova_db.NovaRecords.deleted_projects``), otherwise placement's.

    Requests: hypervisor, server and migration pages (or, from the cell
    databases, a few queries per cell and no request), one provider list
    (plus one ``COMPUTE_NODE`` query only when some root has no compute
    node record), one allocation read per provider of Nova's trees, and one
    read per orphaned consumer whose project Nova no longer knows; never
    one per healthy consumer.
    """
    nodes = {h.uuid: h for h in nova.hypervisors()}
    servers = nova.servers()
    migrations = nova.migrations_in_progress()
    providers = client.providers()
    marked = compute_roots(client, providers, nodes, max_missing_fraction)
    trees = nova_trees(providers, nodes, marked)
    allocations = read_allocations(client, sorted(trees), progress)
    orphans = find_orphans(allocations, trees, servers, migrations)
    projects: dict[str, str | None] = {}
    consumers = {o.consumer for o in orphans}
    projects.update((s.uuid, s.project_id) for s in servers
                    if s.uuid in consumers and s.project_id)
    if deleted_projects and consumers - set(projects):
        projects.update(deleted_projects(consumers - set(projects)))
    projects.update(_read_each(
        lambda consumer: client.consumer_allocations(consumer).get(
            "project_id"), consumers - set(projects)))
    return [dataclasses.replace(o, project=projects[o.consumer])
            for o in orphans]
