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

"""The one-off commands that make each service's database, in order."""

from __future__ import annotations

from collections.abc import Callable

from tests.functional.cloud import configs
from tests.functional.cloud.configs import Layout
from tests.functional.services.process import REPO_ROOT

#: Ironic's programs (tools/setup.sh); up.py starts Ironic from it too.
IRONIC_VENV = REPO_ROOT / ".venv-ironic"

SERVICES = ("keystone", "placement", "glance", "nova", "ironic")


def commands(lay: Layout, service: str,
             b: Callable[..., str]) -> list[list[str]]:
    """``service``'s schema commands (Keystone's also make its keys and
    bootstrap it); ``b(name[, venv])`` is a program's path."""
    conf = {s: ["--config-file", str(lay.etc(s) / f"{s}.conf")]
            for s in ("keystone", "placement", "nova", "ironic")}
    keys = ["--keystone-user", "root", "--keystone-group", "root"]
    manage = b("keystone-manage")
    nova = b("nova-manage")
    if service == "keystone":
        ks = conf["keystone"]
        return [
            [manage, *ks, "db_sync"],
            [manage, *ks, "fernet_setup", *keys],
            [manage, *ks, "credential_setup", *keys],
            [manage, *ks, "bootstrap",
             "--bootstrap-password", configs.PASSWORD,
             "--bootstrap-region-id", configs.REGION,
             "--bootstrap-public-url", lay.keystone]]
    if service == "placement":
        return [[b("placement-manage"), *conf["placement"], "db", "sync"]]
    if service == "glance":
        return [[b("glance-manage"), "--config-file",
                 str(lay.etc("glance") / "glance-api.conf"), "db_sync"]]
    if service == "nova":
        return [
            [nova, *conf["nova"], "api_db", "sync"],
            [nova, *conf["nova"], "cell_v2", "map_cell0",
             "--database_connection", lay.db("nova_cell0")],
            [nova, *conf["nova"], "cell_v2", "create_cell",
             "--name", "cell1", "--verbose"],
            [nova, *conf["nova"], "db", "sync"]]
    if service == "ironic":
        return [[b("ironic-dbsync", IRONIC_VENV), *conf["ironic"],
                 "create_schema"]]
    raise ValueError(f"no schema for {service!r}; one of {SERVICES}")


