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

"""Do the ``[ironic]`` credentials see every node? Told from the token.

Ironic lists every node only to a caller that passes its
``baremetal:node:list_all`` policy: by default a system-scoped token with
the ``reader`` role, or the ``service`` role (``ironic/common/policy.py``,
``SYSTEM_READER``; a project-scoped service role counts only in the
``service`` project with Ironic's ``rbac_service_role_elevated_access``,
``ironic/common/context.py`` ``to_policy_values``). Anyone else gets the
nodes their project owns or leases, a listing that looks complete and is
not. The token is already there after a listing, so asking costs no
request.
"""
from typing import Any

#: Roles that make Ironic list every node under its default policy.
LIST_ALL_ROLES = frozenset({"reader", "member", "admin", "service"})


def scope_problem(access: Any) -> str | None:
    """Why a token may see only some nodes; None if it sees them all.

    ``access`` is keystoneauth's ``AccessInfo``. A system-scoped token with
    a reader role (``member`` and ``admin`` imply it) or a ``service`` role
    passes; so does any token with the ``service`` role.
    """
    roles = set(getattr(access, "role_names", None) or ())
    if "service" in roles:
        return None
    if getattr(access, "system_scoped", False) and roles & LIST_ALL_ROLES:
        return None
    scope = ("system" if getattr(access, "system_scoped", False) else
             f"project {getattr(access, 'project_id', None)}"
             if getattr(access, "project_scoped", False) else "no scope")
    return (f"the [ironic] credentials have {scope} and roles "
            f"{sorted(roles)}: Ironic lists only the nodes such a token's "
            f"project owns or leases; set [ironic] system_scope = all for a "
            f"user with the reader role on the system, or use the service "
            f"role in the service project with Ironic's "
            f"rbac_service_role_elevated_access = true")


def token_of(adapter: Any) -> Any:
    """The adapter's current ``AccessInfo``, or None (no auth, noauth)."""
    session = getattr(adapter, "session", None)
    auth = getattr(adapter, "auth", None) or getattr(session, "auth", None)
    if auth is None or not hasattr(auth, "get_access"):
        return None
    return auth.get_access(session)
