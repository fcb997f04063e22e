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
    # Only these credentials: a shell that sourced .cloud/env before a
    # `down --purge` still names OS_CLOUD in a clouds.yaml that is gone.
    return openstack.connect(auth=auth(layout, user, project),
                             region_name=REGION, interface="public",
                             identity_api_version="3",
                             load_yaml_config=False, load_envvars=False)


class _Existing:
    """What Keystone holds already, read with one list request per kind.

    Keystone is the slowest service of a loaded machine (each request 2 to
    7 s there): finding each name on its own (``find_*``: a GET by ID, a
    404, then a GET by name) doubled the requests of :func:`populate`.
    """

    def __init__(self, conn: Any) -> None:
        ident = conn.identity
        self.projects = {p.name: p for p in ident.projects(domain_id="default")}
        self.users = {u.name: u for u in ident.users(domain_id="default")}
        self.roles = {r.name: r for r in ident.roles()}
        self.services = {s.name: s for s in ident.services()}
        self.endpoint_services = {e.service_id for e in ident.endpoints()}


def populate(layout: Layout) -> None:
    """Service users (admin and service roles in ``service``; ``nova`` is
    also a system admin, for Ironic's default policy), the catalog, and the
    demo project's member and reader."""
    conn = connect(layout)
    ident = conn.identity
    have = _Existing(conn)

    def role(name: str) -> Any:
        if name not in have.roles:
            have.roles[name] = ident.create_role(name=name)
        return have.roles[name]

    def project(name: str) -> Any:
        if name not in have.projects:
            have.projects[name] = ident.create_project(name=name,
                                                       domain_id="default")
        return have.projects[name]

    def user(name: str, home: Any) -> Any:
        if name not in have.users:
            have.users[name] = ident.create_user(
                name=name, password=PASSWORD, domain_id="default",
                default_project_id=home.id)
        return have.users[name]

    admin, member = role("admin"), role("member")
    reader, service_role = role("reader"), role("service")
    service = project("service")
    for name in SERVICE_USERS:
        account = user(name, service)
        ident.assign_project_role_to_user(service, account, admin)
        ident.assign_project_role_to_user(service, account, service_role)
    ident.assign_system_role_to_user(have.users["nova"], admin, "all")
    demo = project("demo")
    for name, granted in (("ndf-member", member), ("ndf-reader", reader)):
        ident.assign_project_role_to_user(demo, user(name, demo), granted)
    for kind, name, port_key, path in CATALOG:
        svc = have.services.get(name) or ident.create_service(name=name,
                                                              type=kind)
        if svc.id not in have.endpoint_services:
            ident.create_endpoint(service_id=svc.id, interface="public",
                                  url=f"{layout.url(port_key)}{path}",
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
