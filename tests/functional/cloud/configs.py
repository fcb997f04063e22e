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

"""The configuration files of the cloud's services, as INI sections.

One function per service; each takes the :class:`Layout` (paths, ports,
URLs) and returns ``{section: {option: value}}`` for
:func:`tests.functional.services.process.write_ini`. The passwords are
fixed, as in DevStack: the cloud listens on loopback only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from oslo_log import log as oslo_log

from tests.functional.services.ironic_server import ironic_config
from tests.functional.services.rabbitmq_server import drain_event_options
from tests.functional.services.rabbitmq_server import ironic_notification_config

Sections = dict[str, dict[str, str | int | bool]]

PASSWORD = "ndf-cloud"
"""Every user's password (the admin's too)."""

REGION = "RegionOne"
FAKE_COMPUTES = ("fake-1", "fake-2", "fake-3")
IRONIC_COMPUTE = "ironic-compute"
#: Seconds Ironic's fake vendor clean step sleeps (``[fake] vendor_delay``;
#: ``log_passthrough``, priority 1, in ironic/drivers/modules/fake.py
#: FakeVendorB), as tests/functional/ironic_driver_base.py's CLEAN_SECONDS:
#: a node whose automated cleaning is on stays ``clean wait``/``cleaning``
#: that long after its server is deleted, long enough for a boot to be
#: judged on a loaded machine. The nodes are enrolled with cleaning off
#: (tests/functional/cloud/resources.py), so enrolment does not wait.
CLEAN_SECONDS = 30


@dataclass
class Layout:
    """Where the cloud lives: its directory and its ports."""

    base: Path
    ports: dict[str, int]

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    @property
    def keystone(self) -> str:
        return f"{self.url('keystone')}/v3"

    @property
    def transport_url(self) -> str:
        return f"rabbit://guest:guest@127.0.0.1:{self.ports['rabbitmq']}/"

    def db(self, name: str) -> str:
        return (f"mysql+pymysql://root@127.0.0.1:{self.ports['mariadb']}/"
                f"{name}?charset=utf8")

    def etc(self, service: str) -> Path:
        path = self.base / "etc" / service
        path.mkdir(parents=True, exist_ok=True)
        return path

    def data(self, service: str) -> Path:
        path = self.base / "data" / service
        path.mkdir(parents=True, exist_ok=True)
        return path


def service_auth(layout: Layout, user: str,
                 system: bool = False) -> dict[str, str | int | bool]:
    """keystoneauth password options for a service user (``service`` project,
    or system scope)."""
    auth: dict[str, str | int | bool] = {
        "auth_type": "password",
        "auth_url": layout.keystone,
        "username": user,
        "password": PASSWORD,
        "user_domain_name": "Default",
        "region_name": REGION,
        "valid_interfaces": "public",
    }
    if system:
        auth["system_scope"] = "all"
    else:
        auth.update(project_name="service", project_domain_name="Default")
    return auth


def authtoken(layout: Layout, user: str) -> dict[str, str | int | bool]:
    """keystonemiddleware's ``[keystone_authtoken]`` for a service."""
    options = service_auth(layout, user)
    options.pop("valid_interfaces")
    options["www_authenticate_uri"] = layout.keystone
    options["interface"] = "public"
    return options


def keystone_conf(layout: Layout) -> Sections:
    keys = layout.data("keystone")
    return {
        "DEFAULT": {"use_stderr": True},
        "database": {"connection": layout.db("keystone")},
        "token": {"provider": "fernet"},
        "fernet_tokens": {"key_repository": str(keys / "fernet-keys")},
        "fernet_receipts": {"key_repository": str(keys / "fernet-keys")},
        "credential": {"key_repository": str(keys / "credential-keys")},
        "cache": {"enabled": False},
        # bcrypt's fewest rounds: every token request checks a password,
        # and the default 12 rounds cost ~0.3 s of a loaded core each.
        "identity": {"password_hash_rounds": 4},
    }


def placement_conf(layout: Layout) -> Sections:
    return {
        "DEFAULT": {"use_stderr": True},
        "placement_database": {"connection": layout.db("placement")},
        "api": {"auth_strategy": "keystone"},
        "keystone_authtoken": authtoken(layout, "placement"),
    }


def glance_conf(layout: Layout, paste: Path) -> Sections:
    data = layout.data("glance")
    return {
        "DEFAULT": {"use_stderr": True, "enabled_backends": "fs:file"},
        "database": {"connection": layout.db("glance")},
        "keystone_authtoken": authtoken(layout, "glance"),
        "paste_deploy": {"flavor": "keystone", "config_file": str(paste)},
        "glance_store": {"default_backend": "fs"},
        "fs": {"filesystem_store_datadir": str(data / "images")},
        "os_glance_staging_store": {
            "filesystem_store_datadir": str(data / "staging")},
        "os_glance_tasks_store": {
            "filesystem_store_datadir": str(data / "tasks")},
        "oslo_concurrency": {"lock_path": str(data / "locks")},
    }


def nova_conf(layout: Layout) -> Sections:
    """nova.conf shared by nova-api, conductor, scheduler and the computes.

    The ``[filter_scheduler]`` and ``[drain_filters]`` sections are what
    doc/source/install.rst and baremetal.rst tell an operator to write:
    nothing else enables this project.
    """
    data = layout.data("nova")
    # The event listener takes its pool slot as a lock file there
    # (nova_drain_filters/ironic_view/pools.py) and does not make the
    # directory: without it the scheduler never listened and fell back to
    # listing Ironic every 60 s.
    (data / "locks").mkdir(exist_ok=True)
    events = {k: v for k, v in drain_event_options(layout.transport_url).items()}
    # Polling at 600 s both ways: the reconciliation listing
    # (baremetal_refresh_interval, drain_event_options) and the listing
    # while the broker is away (the tests' 1 s fallback). Within a test's
    # bound only an event can tell the view that a node changed
    # (tests/e2e/test_cloud.py, the Ironic section).
    events["baremetal_notifications_fallback_interval"] = 600
    # baremetal_notifications_host_reader is left at its default, off: each
    # of the scheduler's workers reads on a queue of its own, and the tier
    # proves that every worker hears every event with Nova's own forked
    # workers (tests/e2e/test_cloud.py, Workers and Ironic), as nova.conf
    # without the option has them (issue 41).
    events.pop("baremetal_max_snapshot_age")
    return {
        "DEFAULT": {
            "transport_url": layout.transport_url,
            "my_ip": "127.0.0.1",
            "state_path": str(data),
            "use_stderr": True,
            "debug": False,
            # A killed nova-compute counts as down after 30 s, not Nova's
            # 60 s: the end-to-end tier (tests/e2e) waits for that. Every
            # service checks in each 5 s (default 10), so a busy core that
            # delays one check-in does not make a live one look down.
            "report_interval": 5,
            "service_down_time": 30,
            # This project's lines at DEBUG, the rest as oslo.log sets it:
            # every request's summary line (with the instance) and every
            # Ironic listing, each with the PID of the scheduler worker
            # (oslo.log's format has %(process)d), which tells the tier
            # (tests/e2e/workers.py) which worker served and when its view
            # was ready.
            "default_log_levels": ",".join(
                [*oslo_log.get_default_log_levels(),
                 "nova_drain_filters=DEBUG"]),
        },
        "api": {"auth_strategy": "keystone"},
        "api_database": {"connection": layout.db("nova_api")},
        "database": {"connection": layout.db("nova")},
        "keystone_authtoken": {**authtoken(layout, "nova"),
                               "service_token_roles_required": True},
        "service_user": {**service_auth(layout, "nova"),
                         "send_service_user_token": True},
        "placement": service_auth(layout, "placement"),
        "neutron": service_auth(layout, "nova"),
        "glance": {"region_name": REGION, "valid_interfaces": "public"},
        "cinder": {"os_region_name": REGION},
        # Ironic's default policy wants system scope for the node listing
        # (doc/source/baremetal.rst); the Ironic compute and the scheduler
        # read this section.
        "ironic": service_auth(layout, "nova", system=True),
        "oslo_concurrency": {"lock_path": str(data / "locks")},
        "conductor": {"workers": 1},
        "scheduler": {"workers": 2, "discover_hosts_in_cells_interval": 30},
        "filter_scheduler": {
            "available_filters": "nova.scheduler.filters.all_filters\n"
            "available_filters = nova_drain_filters.filters.all_filters",
            "enabled_filters": (
                "DisabledServiceFilter,StaleComputeNodeFilter,"
                "BaremetalAvailabilityFilter,ComputeCapabilitiesFilter,"
                "ImagePropertiesFilter,ServerGroupAntiAffinityFilter,"
                "ServerGroupAffinityFilter"),
        },
        "drain_filters": {"placement_prefilter": True, **events},
        "vnc": {"enabled": False},
        "spice": {"enabled": False},
        "serial_console": {"enabled": False},
        "os_vif_ovs": {"ovsdb_connection": "unix:/nonexistent"},
    }


def compute_conf(layout: Layout, host: str) -> Sections:
    """The second ``--config-file`` of one nova-compute: its host, driver
    and private state path (Nova keeps the node identity there)."""
    state = layout.data(f"nova-compute-{host}")
    default: dict[str, str | int | bool] = {
        "host": host,
        "state_path": str(state),
        "instances_path": str(state / "instances"),
    }
    if host == IRONIC_COMPUTE:
        default["compute_driver"] = "ironic.IronicDriver"
        default["reserved_host_memory_mb"] = 0
        # Its periodic resource update every 600 s, not 60 (it also runs
        # at start-up, ComputeManager.pre_start_hook): as on a compute with
        # hundreds of nodes, where one pass takes minutes, Nova learns late
        # that a node went into maintenance (IronicDriver.
        # update_provider_tree reserves it), so within a test's bound only
        # our filter keeps boots off it.
        default["update_resources_interval"] = 600
    else:
        # Stable node UUIDs (nova/virt/fake.py): the compute can restart.
        default["compute_driver"] = "fake.PredictableNodeUUIDDriver"
    return {"DEFAULT": default}


def write_node_identity(layout: Layout, host: str) -> None:
    """Give a fake compute the node identity file Nova expects on a restart.

    ``fake.PredictableNodeUUIDDriver`` reports ``uuid5(NAMESPACE_DNS,
    nodename)`` as its node's UUID (``get_available_resource``,
    nova/virt/fake.py) but, unlike a real driver, never writes
    ``state_path/compute_id``. On any later start
    ``ComputeManager._ensure_existing_node_identity`` (nova/compute/
    manager.py) finds the service record and no file
    (``nova.virt.node.read_local_node_uuid``) and refuses to start, so a
    killed or stopped compute could not come back with ``up``. The file is
    written once, before the first start, with the UUID the driver reports
    (its node is named after the host); one already there is kept.
    """
    path = layout.data(f"nova-compute-{host}") / "compute_id"
    if not path.exists():
        path.write_text(str(uuid.uuid5(uuid.NAMESPACE_DNS, host)))


def ironic_conf(layout: Layout) -> Sections:
    """tests/functional/services/ironic_server.py's fake-hardware server,
    on MariaDB, behind Keystone with Ironic's default policy, sending
    notifications to the cloud's broker."""
    data = layout.data("ironic")
    (data / "locks").mkdir(exist_ok=True)
    sections = ironic_config(data, layout.ports["ironic"])
    # MariaDB, as every database of the cloud; the functional tests'
    # Ironic keeps ironic_config()'s SQLite file.
    sections["database"] = {"connection": layout.db("ironic")}
    sections["fake"] = {"vendor_delay": str(CLEAN_SECONDS)}
    sections["DEFAULT"]["auth_strategy"] = "keystone"
    sections["DEFAULT"]["host"] = "ndf-cloud-ironic"
    sections["keystone_authtoken"] = authtoken(layout, "ironic")
    for section, options in ironic_notification_config(
            layout.transport_url).items():
        sections[section] = {**sections.get(section, {}), **options}
    return sections
