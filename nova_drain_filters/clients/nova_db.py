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

"""Nova's object layer, for the one repair that has no API: a stale record.

There is no API to delete a single compute node row under a live service
(the duplicate an Ironic rebalance leaves behind). ``nova-manage`` works
through Nova's objects on a controller with nova.conf; so does this, and
only when asked with ``--nova-config``.
"""
from typing import Any


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
    from oslo_db import exception as db_exception

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
    except (db_exception.DBError, db_exception.CantStartEngineError) as exc:
        # A compute host's nova.conf has no [api_database], say.
        raise Unavailable(f"cannot use Nova's databases: {exc}") from None
    raise Unavailable(f"compute node {uuid} is in no cell")
