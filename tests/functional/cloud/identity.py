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

"""Keystone's side of the cloud: service users, the catalog, the demo
project's member and reader, and the ``clouds.yaml`` that names them.

Everything here is idempotent (find, then create), so ``up`` can run it
again on a cloud that already has it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openstack
import yaml

from tests.functional.cloud.configs import PASSWORD
from tests.functional.cloud.configs import REGION
from tests.functional.cloud.configs import Layout

SERVICE_USERS = ("nova", "placement", "glance", "ironic")
# (catalog type, name, port key, path after the base URL)
CATALOG = (
    ("compute", "nova", "nova-api", "/v2.1"),
    ("placement", "placement", "placement", ""),
    ("image", "glance", "glance", ""),
    ("network", "network-standin", "network", ""),
    ("baremetal", "ironic", "ironic", ""),
)
#: clouds.yaml entries: name -> (user, project or None for system scope).
CLOUDS = {
    "ndf-admin": ("admin", "admin"),
    "ndf-system-admin": ("admin", None),
    "ndf-member": ("ndf-member", "demo"),
    "ndf-reader": ("ndf-reader", "demo"),
}
DEFAULT_CLOUD = "ndf-admin"


def auth(layout: Layout, user: str, project: str | None) -> dict[str, Any]:
    """keystoneauth password auth for ``user``: project- or system-scoped."""
    creds: dict[str, Any] = {
        "auth_url": layout.keystone, "username": user, "password": PASSWORD,
        "user_domain_name": "Default"}
    if project is None:
        creds["system_scope"] = "all"
    else:
        creds.update(project_name=project, project_domain_name="Default")
    return creds


def connect(layout: Layout, cloud: str = DEFAULT_CLOUD) -> Any:
    """An openstacksdk connection as one of the :data:`CLOUDS`."""
    user, project = CLOUDS[cloud]
    return openstack.connect(auth=auth(layout, user, project),
                             region_name=REGION, interface="public",
                             identity_api_version="3")


def _project(conn: Any, name: str) -> Any:
    return (conn.identity.find_project(name, domain_id="default")
            or conn.identity.create_project(name=name, domain_id="default"))


def _user(conn: Any, name: str, project: Any) -> Any:
    user = conn.identity.find_user(name, domain_id="default")
    if user is None:
        user = conn.identity.create_user(
            name=name, password=PASSWORD, domain_id="default",
            default_project_id=project.id)
    return user


def _role(conn: Any, name: str) -> Any:
    return (conn.identity.find_role(name)
            or conn.identity.create_role(name=name))


def populate(layout: Layout) -> None:
    """Service users (admin and service roles in ``service``; ``nova`` is
    also a system admin, for Ironic's default policy), the catalog, and the
    demo project's member and reader."""
    conn = connect(layout)
    admin, member = _role(conn, "admin"), _role(conn, "member")
    reader, service_role = _role(conn, "reader"), _role(conn, "service")
    service = _project(conn, "service")
    for name in SERVICE_USERS:
        user = _user(conn, name, service)
        conn.identity.assign_project_role_to_user(service, user, admin)
        conn.identity.assign_project_role_to_user(service, user, service_role)
    nova = conn.identity.find_user("nova", domain_id="default")
    conn.identity.assign_system_role_to_user(nova, admin, "all")
    demo = _project(conn, "demo")
    for name, role in (("ndf-member", member), ("ndf-reader", reader)):
        conn.identity.assign_project_role_to_user(
            demo, _user(conn, name, demo), role)
    for kind, name, port_key, path in CATALOG:
        svc = conn.identity.find_service(name)
        if svc is None:
            svc = conn.identity.create_service(name=name, type=kind)
        url = f"{layout.url(port_key)}{path}"
        if not list(conn.identity.endpoints(service_id=svc.id)):
            conn.identity.create_endpoint(service_id=svc.id,
                                          interface="public", url=url,
                                          region_id=REGION)


def write_clouds_yaml(layout: Layout) -> Path:
    """``.cloud/clouds.yaml`` with every entry of :data:`CLOUDS`."""
    clouds = {}
    for name, (user, project) in CLOUDS.items():
        clouds[name] = {"auth": auth(layout, user, project),
                        "region_name": REGION, "interface": "public",
                        "identity_api_version": 3}
    path = layout.base / "clouds.yaml"
    path.write_text(yaml.safe_dump({"clouds": clouds}, sort_keys=False))
    return path
