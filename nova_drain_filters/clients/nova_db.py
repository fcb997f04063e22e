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

"""Nova's object layer, on a controller with nova.conf (``--nova-config``).

Two uses, both only when asked:

* the one repair that has no API: a single compute node row under a live
  service (the duplicate an Ironic rebalance leaves behind);
* Nova's side of the orphan judgment (compute nodes, instances, migrations)
  read the way ``nova-manage placement audit`` reads it, from the cell
  databases, instead of through the compute API: a few queries per cell,
  where ``GET /servers/detail`` builds a full view of every server.

``nova-manage`` works through Nova's objects; so does this.
"""
from collections.abc import Callable
from collections.abc import Collection
from typing import Any
from typing import TypeVar

from nova_drain_filters.clients import compute

T = TypeVar("T")

#: UUIDs per ``IN (...)`` query.
CHUNK = 500


class Unavailable(Exception):
    """Nova's object layer cannot be used here."""


#: The nova.conf this process loaded: oslo.config parses arguments once.
_loaded: str | None = None


def _nova(config_file: str | None) -> tuple[Any, Any, Any]:
    try:
        from nova import config as nova_config
        from nova import context
        from nova import objects
    except ImportError:
        raise Unavailable("Nova is not installed here: run this on a "
                          "controller (as nova-manage is)") from None
    global _loaded
    if config_file is not None and config_file != _loaded:
        if _loaded is not None:
            raise Unavailable(f"cannot load {config_file}: {_loaded} is "
                              "already loaded in this process")
        try:
            nova_config.parse_args(["openstack-drain"],
                                   default_config_files=[config_file])
        except Exception as exc:
            raise Unavailable(f"cannot load {config_file}: {exc}") from None
        _loaded = config_file
    objects.register_all()
    return context, objects, nova_config


def delete_compute_node(uuid: str, config_file: str | None) -> str:
    """Destroy the compute node record ``uuid``; return its host/node.

    ``config_file`` None uses the Nova configuration already loaded in this
    process (tests, or code embedded in a Nova service).
    """
    context, objects, _ = _nova(config_file)
    from nova import exception

    ctxt = context.get_admin_context()
    try:
        for cell in objects.CellMappingList.get_all(ctxt):
            with context.target_cell(ctxt, cell) as cctxt:
                try:
                    node = objects.ComputeNode.get_by_uuid(cctxt, uuid)
                except exception.ComputeHostNotFound:
                    continue
                where = f"{node.host}/{node.hypervisor_hostname}"
                node.destroy()
                return where
    except _db_errors() as exc:
        # A compute host's nova.conf has no [api_database], say.
        raise Unavailable(f"cannot use Nova's databases: {_line(exc)}"
                          ) from None
    raise Unavailable(f"compute node {uuid} is in no cell")


def _line(exc: Exception) -> str:
    """The error's first line: SQLAlchemy appends a "Background on this
    error" line and the statement."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)


def _db_errors() -> tuple[type[Exception], ...]:
    from oslo_db import exception as db_exception
    return (db_exception.DBError, db_exception.CantStartEngineError)


class NovaRecords:
    """Nova's side of the orphan judgment, from every cell's database.

    The same three lists ``ComputeClient`` gives (``hypervisors``,
    ``servers``, ``migrations_in_progress``), so ``orphans.gather`` takes
    either. A cell that cannot be read is an error, never an empty cell:
    its instances would look gone and their allocations orphaned.
    """

    def __init__(self, config_file: str | None) -> None:
        self.context, self.objects, _ = _nova(config_file)
        self.ctxt = self.context.get_admin_context()

    def _each_cell(self, read: Callable[[Any], list[T]]) -> list[T]:
        """``read(cell context)`` in each cell, cell0 too (instances that
        never built), joined."""
        found: list[T] = []
        try:
            for cell in self.objects.CellMappingList.get_all(self.ctxt):
                with self.context.target_cell(self.ctxt, cell) as cctxt:
                    try:
                        found.extend(read(cctxt))
                    except _db_errors() as exc:
                        raise Unavailable(
                            f"cannot read cell {cell.name or cell.uuid}: "
                            f"{_line(exc)}") from None
        except _db_errors() as exc:
            raise Unavailable(f"cannot use Nova's databases: {_line(exc)}"
                              ) from None
        return found

    def hypervisors(self) -> list[compute.Hypervisor]:
        """Every compute node record, with its service's host and state.

        Unlike ``GET /os-hypervisors``, a record whose service is gone is
        kept (as the audit keeps it: ``nova/cmd/manage.py``
        ``_get_instances_and_current_migrations``), with no service.
        """
        from nova import servicegroup
        group = servicegroup.API()

        def read(cctxt: Any) -> list[compute.Hypervisor]:
            services = {s.host: s for s in self.objects.ServiceList
                        .get_by_binary(cctxt, "nova-compute")}
            found = []
            for node in self.objects.ComputeNodeList.get_all(cctxt):
                service = services.get(node.host)
                found.append(compute.Hypervisor(
                    uuid=node.uuid,
                    hypervisor_hostname=node.hypervisor_hostname,
                    hypervisor_type=node.hypervisor_type, host=node.host,
                    service_id=service.uuid if service else None,
                    state=("up" if service and group.service_is_up(service)
                           else "down"),
                    status=("disabled" if service is None or service.disabled
                            else "enabled"),
                    totals=compute.hypervisor_totals(node)))
            return found
        return self._each_cell(read)

    def servers(self) -> list[compute.Server]:
        """Every instance that is not deleted (nor the hidden copy of a
        cross-cell resize, which the API hides too), with the status the
        API would show (``nova/api/openstack/common.py`` status_from_state).

        Six columns in one query per cell, through Nova's own reader
        (``nova/db/main/api.py`` get_context_manager): building an Instance
        object per row, as ``InstanceList`` does, costs more than the rest
        of the orphan listing's Nova side together.
        """
        import sqlalchemy as sa
        from nova.api.openstack import common
        from nova.db.main import api as main_db
        from nova.db.main import models
        table = models.Instance

        def read(cctxt: Any) -> list[compute.Server]:
            with main_db.get_context_manager(cctxt).reader.using(cctxt) as db:
                rows = db.query(
                    table.uuid, table.host, table.node, table.vm_state,
                    table.task_state, table.project_id,
                ).filter(table.deleted == 0).filter(sa.or_(
                    table.hidden == sa.false(), table.hidden == sa.null(),
                )).all()
            return [compute.Server(
                uuid=uuid, host=host, node=node, project_id=project,
                status=common.status_from_state(vm_state, task_state))
                for uuid, host, node, vm_state, task_state, project in rows]
        return self._each_cell(read)

    def deleted_projects(self, uuids: Collection[str]) -> dict[str, str]:
        """{uuid: project} of the deleted instances among ``uuids`` whose
        rows are still in a cell (``nova-manage db archive_deleted_rows``
        moves them out), in one query per cell and chunk."""
        from nova.db.main import api as main_db
        from nova.db.main import models
        table = models.Instance
        wanted = sorted(uuids)

        def read(cctxt: Any) -> list[tuple[str, str]]:
            found = []
            with main_db.get_context_manager(cctxt).reader.using(cctxt) as db:
                for at in range(0, len(wanted), CHUNK):
                    found.extend(db.query(table.uuid, table.project_id).filter(
                        table.deleted != 0,
                        table.uuid.in_(wanted[at:at + CHUNK]),
                    ).all())
            return [(uuid, project) for uuid, project in found if project]
        return dict(self._each_cell(read)) if wanted else {}

    def migrations_in_progress(self) -> list[compute.Migration]:
        """Migrations not in a final state, in every cell."""
        def read(cctxt: Any) -> list[compute.Migration]:
            return [compute.Migration(
                uuid=m.uuid, instance_uuid=m.instance_uuid, status=m.status,
                source_node=m.source_node, dest_node=m.dest_node,
                source_compute=m.source_compute, dest_compute=m.dest_compute)
                for m in self.objects.MigrationList.get_by_filters(cctxt, {})
                if m.status not in compute.MIGRATION_DONE]
        return self._each_cell(read)
