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

"""Compute nodes and their providers cloned in bulk from one a compute made.

Nova's resource tracker makes one compute node at a time: at 1,000 nodes
the harness's set-up took 251 s, so 10,000 never fitted a run. Here a
real nova-compute makes one node (the template), and every other node is
a copy of its rows: one ``compute_nodes`` row per node in the cell
database, and per node a root provider with the template's inventories,
traits and aggregates in placement's database, with only the identity
changed (``uuid`` and ``hypervisor_hostname``; provider ``uuid``,
``name`` and ids). Two bulk inserts per table, a few seconds at 10,000.

``clone_hosts`` does the same for whole compute hosts: per host a copy of
the template host's ``services`` row (cell database) and ``host_mappings``
row (API database, which ``nova/compute/api.py`` ``target_host_cell``
reads for each hypervisor the compute API lists), and one node named
after the host, as the fake driver names its node.

``records`` reads one node's records as the scheduler sees them, so that
a bench can assert once that a clone is what Nova's resource tracker
itself leaves for that node (``resource_tracker_changes``).
"""
from __future__ import annotations

import uuid as uuidlib
from typing import Any

import sqlalchemy as sa
from nova.db.api import api as api_db
from nova.db.api import models as api_models
from nova.db.main import api as db_api
from nova.db.main import models
from placement import db_api as placement_db

#: Columns that name a record rather than describe the node.
IDENTITY = ("id", "uuid", "hypervisor_hostname")
#: The resource tracker saves a node it has not seen in this process
#: (``nova/compute/resource_tracker.py`` ``_resource_change``: no old
#: resources yet), and the save stamps ``updated_at``
#: (``nova/db/main/api.py`` ``compute_node_update``).
STAMPS = ("created_at", "updated_at")
#: Placement tables that hang off a provider id, copied row for row.
PROVIDER_TABLES = ("inventories", "resource_provider_traits",
                   "resource_provider_aggregates")


@db_api.pick_context_manager_writer
def _copy_compute_nodes(context: Any, template: str, names: list[str],
                        uuids: list[str] | None = None,
                        hosts: list[str] | None = None) -> None:
    table = models.ComputeNode.__table__
    row = context.session.execute(
        sa.select(table).where(table.c.uuid == template)).mappings().one()
    base = {k: v for k, v in row.items() if k != "id"}
    uuids = uuids or names
    hosts = hosts or [base["host"]] * len(names)
    context.session.execute(table.insert(), [
        dict(base, uuid=uuid, hypervisor_hostname=name, host=host)
        for uuid, name, host in zip(uuids, names, hosts, strict=True)])


@db_api.pick_context_manager_writer
def _copy_services(context: Any, template: str, hosts: list[str]) -> None:
    table = models.Service.__table__
    row = context.session.execute(sa.select(table).where(
        table.c.host == template, table.c.binary == "nova-compute",
        table.c.deleted == 0)).mappings().one()
    base = {k: v for k, v in row.items() if k != "id"}
    context.session.execute(table.insert(), [
        dict(base, host=host, uuid=str(uuidlib.uuid4())) for host in hosts])


@api_db.context_manager.writer
def _copy_host_mappings(context: Any, template: str,
                        hosts: list[str]) -> None:
    table = api_models.HostMapping.__table__
    row = context.session.execute(sa.select(table).where(
        table.c.host == template)).mappings().one()
    base = {k: v for k, v in row.items() if k != "id"}
    context.session.execute(table.insert(), [
        dict(base, host=host) for host in hosts])


def _copy_providers(template: str, names: list[str],
                    uuids: list[str] | None = None) -> None:
    meta = sa.MetaData()
    engine = placement_db.placement_context_manager.writer.get_engine()
    with engine.begin() as conn:
        rps = sa.Table("resource_providers", meta, autoload_with=conn)
        row = conn.execute(sa.select(rps).where(
            rps.c.uuid == template)).mappings().one()
        if row["parent_provider_id"] is not None:
            raise ValueError(f"template {template} is not a root provider")
        first = conn.execute(sa.select(sa.func.max(rps.c.id))).scalar() + 1
        ids = range(first, first + len(names))
        conn.execute(rps.insert(), [
            dict(row, id=id_, uuid=uuid, name=name, root_provider_id=id_)
            for id_, uuid, name in zip(ids, uuids or names, names,
                                       strict=True)])
        for name in PROVIDER_TABLES:
            table = sa.Table(name, meta, autoload_with=conn)
            rows = [{k: v for k, v in r.items() if k != "id"} for r in
                    conn.execute(sa.select(table).where(
                        table.c.resource_provider_id == row["id"]))
                    .mappings()]
            if rows:
                conn.execute(table.insert(), [
                    dict(r, resource_provider_id=id_)
                    for id_ in ids for r in rows])


def clone(context: Any, template: str, names: list[str]) -> None:
    """Nodes ``names`` (compute node uuid = name, as Ironic's), each a
    copy of compute node ``template`` and of its root provider."""
    _copy_compute_nodes(context, template, names)
    _copy_providers(template, names)


def clone_hosts(context: Any, template_host: str, template_node: str,
                hosts: list[str]) -> list[str]:
    """Compute hosts ``hosts``, each a copy of ``template_host``'s service
    and host mapping with one node named after the host, a copy of compute
    node ``template_node`` and its root provider; the nodes' new uuids."""
    uuids = [str(uuidlib.uuid4()) for _ in hosts]
    _copy_services(context, template_host, hosts)
    _copy_host_mappings(context, template_host, hosts)
    _copy_compute_nodes(context, template_node, hosts, uuids, hosts)
    _copy_providers(template_node, hosts, uuids)
    return uuids


@db_api.pick_context_manager_reader
def _compute_node_row(context: Any, uuid: str) -> dict[str, Any]:
    table = models.ComputeNode.__table__
    return dict(context.session.execute(
        sa.select(table).where(table.c.uuid == uuid)).mappings().one())


def records(context: Any, placement: Any, uuid: str) -> dict[str, Any]:
    """Node ``uuid``'s compute node row and its provider as placement
    answers for it (generation, inventories, traits, aggregates)."""
    rp = f"/resource_providers/{uuid}"
    found = {f"compute_nodes.{k}": v
             for k, v in _compute_node_row(context, uuid).items()}
    provider = placement.get(rp, version="1.14").body
    found.update({f"provider.{k}": provider[k] for k in
                  ("uuid", "name", "generation", "parent_provider_uuid",
                   "root_provider_uuid")})
    found["inventories"] = placement.get(
        f"{rp}/inventories", version="1.14").body["inventories"]
    found["traits"] = sorted(placement.get(
        f"{rp}/traits", version="1.14").body["traits"])
    found["aggregates"] = sorted(placement.get(
        f"{rp}/aggregates", version="1.19").body["aggregates"])
    return found


def differences(left: dict[str, Any], right: dict[str, Any],
                ignore: tuple[str, ...] = ()) -> list[str]:
    """``key: left != right`` for each key whose values differ, leaving
    out ``ignore`` (the part after the table's dot)."""
    return [f"{key}: {left.get(key)!r} != {right.get(key)!r}"
            for key in sorted(set(left) | set(right))
            if key.rpartition(".")[2] not in ignore
            and left.get(key) != right.get(key)]


def resource_tracker_changes(compute: Any, context: Any, placement: Any,
                             uuid: str) -> list[str]:
    """What Nova's resource tracker changes when it runs once over clone
    ``uuid`` (nothing, if the clone is what it would have made).

    ``nova/compute/resource_tracker.py`` ``update_available_resource``
    reads the driver's resources for the node, finds its compute node by
    uuid and saves what differs, then pushes the driver's
    ``update_provider_tree`` inventory and the compute's capability
    traits to placement, which bumps the provider's generation on any
    change. The driver manages the node for that one run.
    """
    driver = compute.manager.driver
    before = records(context, placement, uuid)
    nodes = list(driver.get_available_nodes())
    driver._set_nodes(nodes + [uuid])
    try:
        compute.manager.rt.update_available_resource(context, uuid)
    finally:
        driver._set_nodes(nodes)
    if uuid not in compute.manager.rt.compute_nodes:
        return [f"the resource tracker did not take node {uuid}"]
    return differences(before, records(context, placement, uuid),
                       ignore=("updated_at",))


def identity_ignored() -> tuple[str, ...]:
    """What differs between a clone and its template by design."""
    return IDENTITY + STAMPS + ("name", "root_provider_uuid")
