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

"""The token the drain commands send to Ironic: system scope when it helps.

Nova and placement take the project-scoped admin ``openstack`` was given
(Nova 34's default policies refuse a system-scoped token). Ironic lists
every node only to a system-scoped reader or to the service role
(``baremetal:node:list_all`` is ``SYSTEM_READER`` in
``ironic/common/policy.py``); a project-scoped admin gets its project's
nodes, or a 403. One ``openstack`` run holds one scope, so when the
project token would not list every node, :func:`choose` asks Keystone for
a system-scoped token from the same credentials (same auth type and
options, the project dropped, ``system_scope = all``) and uses it for
Ironic alone. When Keystone refuses, or the credentials cannot change
scope, the project token stays and :data:`CONFIGURE` says what to set up.
"""
import dataclasses
from collections.abc import Mapping
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading

from nova_drain_filters.ironic_view import credentials

#: What to configure when neither token lists every Ironic node.
CONFIGURE = ("give the user a role on the system ('openstack role add "
             "--user USER --system all reader'), or the service role in the "
             "service project with Ironic's [DEFAULT] "
             "rbac_service_role_elevated_access = true")

#: Auth types whose credentials are bound to one scope: an application
#: credential authenticates only to the project it was made in.
FIXED_SCOPE = frozenset({"v3applicationcredential"})

#: Auth options that name a scope; a system-scoped copy drops them all.
_SCOPE_OPTIONS = frozenset({
    "project_id", "project_name", "project_domain_id", "project_domain_name",
    "tenant_id", "tenant_name", "domain_id", "domain_name", "trust_id",
    "system_scope"})


@dataclasses.dataclass(frozen=True)
class IronicAuth:
    """The auth plugin for Ironic; None: the session's own (project) one."""

    plugin: Any = None
    #: Why the project token is kept though it may not list every node.
    kept_because: str | None = None


def system_scope_options(auth_type: str | None,
                         options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The same credentials scoped to the system, or None if they cannot be.

    Only for an auth type whose keystoneauth loader takes ``system_scope``
    (``password``, ``v3password``, ``token``...), and not for one bound to
    a scope (:data:`FIXED_SCOPE`).
    """
    if not auth_type or auth_type in FIXED_SCOPE:
        return None
    try:
        loader: Any = ks_loading.get_plugin_loader(auth_type)
    except ks_exc.NoMatchingPlugin:
        return None
    known = {opt.dest for opt in loader.get_options()}
    if "system_scope" not in known:
        return None
    kept = {k: v for k, v in options.items()
            if k in known and k not in _SCOPE_OPTIONS and v is not None}
    return {**kept, "system_scope": "all"}


def access_of(session: Any, auth: Any = None) -> Any:
    """The ``AccessInfo`` of ``auth`` (default: the session's), or None."""
    auth = auth if auth is not None else getattr(session, "auth", None)
    get_access = getattr(auth, "get_access", None) or getattr(
        auth, "get_auth_ref", None)
    if get_access is None:
        return None
    return get_access(session)


def choose(session: Any, auth_type: str | None,
           options: Mapping[str, Any]) -> IronicAuth:
    """The auth Ironic gets: the session's, or a system-scoped copy.

    ========================  =====================  ====================
    project token lists all   Keystone gives system  Ironic gets
    (``scope_problem``)       token with reader
    ========================  =====================  ====================
    yes (service role...)     not asked              the project token
    no, or cannot tell        yes                    the system token
    no                        no, or cannot rescope  the project token
    ========================  =====================  ====================

    One Keystone request at most, and only when the project token would
    not do. Never raises for Keystone's refusal: the listing's counts
    still decide whether it is believed.
    """
    try:
        access = access_of(session)
    except ks_exc.ClientException:
        access = None
    if access is not None and credentials.scope_problem(access) is None:
        return IronicAuth()
    opts = system_scope_options(auth_type, options)
    if opts is None:
        return IronicAuth(kept_because=f"auth type {auth_type or 'none'} "
                                       "cannot ask for a system-scoped token")
    try:
        loader: Any = ks_loading.get_plugin_loader(auth_type or "")
        plugin: Any = loader.load_from_options(**opts)
        system = access_of(session, plugin)
    except ks_exc.ClientException as exc:
        return IronicAuth(kept_because="Keystone refused a system-scoped "
                          f"token for the same user ({type(exc).__name__})")
    problem = credentials.scope_problem(system) if system is not None else ""
    if problem is not None:
        return IronicAuth(kept_because="the system-scoped token of the same "
                          "user has no reader role")
    return IronicAuth(plugin)
