"""Nova's object layer, for the one repair that has no API: a stale record.

There is no API to delete a single compute node row under a live service
(the duplicate an Ironic rebalance leaves behind). ``nova-manage`` works
through Nova's objects on a controller with nova.conf; so does this, and
only when asked with ``--nova-config``.
"""
from typing import Any


class Unavailable(Exception):
    """Nova's object layer cannot be used here."""


def _nova(config_file: str | None) -> tuple[Any, Any, Any]:
    try:
        from nova import config as nova_config
        from nova import context
        from nova import objects
    except ImportError:
        raise Unavailable("Nova is not installed here: run this on a "
                          "controller (as nova-manage is)") from None
    if config_file is not None:
        try:
            nova_config.parse_args(["openstack-drain"],
                                   default_config_files=[config_file])
        except Exception as exc:
            raise Unavailable(f"cannot load {config_file}: {exc}") from None
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
    for cell in objects.CellMappingList.get_all(ctxt):
        with context.target_cell(ctxt, cell) as cctxt:
            try:
                node = objects.ComputeNode.get_by_uuid(cctxt, uuid)
            except exception.ComputeHostNotFound:
                continue
            where = f"{node.host}/{node.hypervisor_hostname}"
            node.destroy()
            return where
    raise Unavailable(f"compute node {uuid} is in no cell")
