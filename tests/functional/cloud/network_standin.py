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

"""A stand-in for the few Neutron read calls Nova makes for servers
booted with ``networks: none``.

Why not neutron-server: it needs ML2 with a mechanism driver, its own
database and RPC workers, about 300 MiB more on a 2-core machine, to
answer "no ports". What Nova asks, read from Nova 34:

* ``GET /v2.0/ports?device_id=...`` from every server show and list
  (``nova/network/security_group_api.py``,
  ``get_instances_security_groups_bindings``) and when a server is
  deleted (``nova/network/neutron.py``, ``deallocate_for_instance``);
* ``GET /v2.0/security-groups`` from the same binding look-up;
* ``GET /v2.0/extensions`` (``nova/network/neutron.py``,
  ``_refresh_neutron_extensions_cache``) and ``GET /v2.0/networks``.

Each answers an empty list. Anything else is a 404 naming this module,
so a call Nova starts to make shows up in nova-api's log, not as a
silent success. Served by uWSGI as ``application``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

EMPTY_LISTS = {
    "/v2.0/ports": "ports",
    "/v2.0/security-groups": "security_groups",
    "/v2.0/extensions": "extensions",
    "/v2.0/networks": "networks",
    "/v2.0/floatingips": "floatingips",
    "/v2.0/subnets": "subnets",
}

VERSIONS = {"versions": [{"id": "v2.0", "status": "CURRENT", "links": [
    {"rel": "self", "href": "/v2.0/"}]}]}


def _path(environ: dict[str, Any]) -> str:
    path = environ.get("PATH_INFO", "/").rstrip("/")
    return path.removesuffix(".json") or "/"


def application(environ: dict[str, Any],
                start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Answer Nova's read calls with empty lists, anything else 404."""
    path = _path(environ)
    method = environ.get("REQUEST_METHOD", "GET")
    if method == "GET" and path in EMPTY_LISTS:
        status, body = "200 OK", {EMPTY_LISTS[path]: []}
    elif method == "GET" and path in ("/", "/v2.0"):
        status, body = "200 OK", VERSIONS
    else:
        status = "404 Not Found"
        body = {"NeutronError": {
            "type": "NotFound", "detail": "",
            "message": f"{method} {path}: the cloud's network stand-in "
                       "(tests/functional/cloud/network_standin.py) answers "
                       "only the read calls Nova makes for servers without "
                       "networks"}}
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(data)))])
    return [data]
