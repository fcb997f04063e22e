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

"""The three services the drain commands talk to, on openstackclient's session.

Endpoints come from the catalog, or from the usual overrides
(``--os-<service>-endpoint-override`` in clouds.yaml terms, or
``OS_COMPUTE_ENDPOINT_OVERRIDE``-style variables), through keystoneauth.
Nova and placement get the session's (project-scoped) token; Ironic gets a
system-scoped token from the same credentials when that one would not list
every node (:mod:`osc_plugin.scope`).
"""
import functools
import logging
from collections.abc import Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from osc_lib import exceptions

from nova_drain_filters.clients import compute
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement
from nova_drain_filters.clients import server_moves
from nova_drain_filters.clients import server_needs
from nova_drain_filters.ironic_view import credentials as ironic_credentials
from osc_plugin import scope

LOG = logging.getLogger(__name__)


class DrainClient:
    """Nova, placement and (when the cloud has it) Ironic clients."""

    def __init__(self, session: Any, interface: str | None = None,
                 region_name: str | None = None,
                 overrides: dict[str, str | None] | None = None,
                 auth_type: str | None = None,
                 auth_options: Mapping[str, Any] | None = None) -> None:
        self.session = session
        self.interface = interface
        self.region_name = region_name
        self.overrides = overrides or {}
        #: How openstackclient authenticated (clouds.yaml's auth_type and
        #: auth), to ask for a system-scoped token for Ironic.
        self.auth_type = auth_type
        self.auth_options = dict(auth_options or {})
        self._clients: dict[str, Any] = {}

    @classmethod
    def from_client_manager(cls, instance: Any) -> "DrainClient":
        override = getattr(instance, "_override_for", lambda _t: None)
        # osc-lib's ClientManager.get_configuration: a copy of the cloud's
        # config, whose auth_type and auth built instance.session's plugin.
        get_configuration = getattr(instance, "get_configuration", None)
        config = get_configuration() if callable(get_configuration) else {}
        return cls(instance.session, instance.interface, instance.region_name,
                   {t: override(t) for t in ("compute", "placement",
                                             "baremetal")},
                   config.get("auth_type"), config.get("auth") or {})

    def _adapter(self, service_type: str,
                 auth: Any = None) -> ks_adapter.Adapter:
        return ks_adapter.Adapter(
            self.session, service_type=service_type, interface=self.interface,
            region_name=self.region_name, auth=auth,
            endpoint_override=self.overrides.get(service_type))

    def _client(self, service_type: str, cls: type,
                key: str | None = None, auth: Any = None) -> Any:
        key = key or service_type
        if key not in self._clients:
            self._clients[key] = cls(self._adapter(service_type, auth))
        return self._clients[key]

    @functools.cached_property
    def ironic_auth(self) -> scope.IronicAuth:
        """The token Ironic gets, chosen once per run (``scope.choose``)."""
        chosen = scope.choose(self.session, self.auth_type, self.auth_options)
        if chosen.kept_because:
            LOG.debug("Ironic gets the project token: %s",
                      chosen.kept_because)
        return chosen

    @property
    def nova(self) -> compute.ComputeClient:
        return self._client("compute", compute.ComputeClient)

    @property
    def moves(self) -> server_moves.MoveClient:
        """Nova's move calls, at their own (newer) microversion."""
        return self._client("compute", server_moves.MoveClient, "moves")

    @property
    def needs(self) -> server_needs.NeedsClient:
        """Servers with their flavors and pins, at their own microversion."""
        return self._client("compute", server_needs.NeedsClient, "needs")

    @property
    def placement(self) -> placement.PlacementClient:
        return self._client("placement", placement.PlacementClient)

    @property
    def ironic(self) -> ironic.IronicClient:
        return self._client("baremetal", ironic.IronicClient,
                            auth=self.ironic_auth.plugin)

    def has_ironic(self) -> bool:
        """Whether the catalog (or an override) has a baremetal endpoint.

        Only a catalog without one means no Ironic. Any other failure to
        look it up (Keystone unreachable, expired token...) raises a
        CommandError naming the endpoint: taking it for "no Ironic" would
        silently drop the rules that need Ironic.
        """
        if self.overrides.get("baremetal"):
            return True
        try:
            return bool(self._adapter("baremetal").get_endpoint())
        except ks_exc.EndpointNotFound:
            return False
        except ks_exc.ClientException as exc:
            raise exceptions.CommandError(
                "cannot look up the baremetal (Ironic) endpoint: "
                f"{type(exc).__name__}: {exc}") from None

    def token_scope(self) -> str | None:
        """Why the token Ironic gets may not see every node, or None.

        The rule is the scheduler's (``ironic_view.credentials.scope_problem``,
        after Ironic's ``baremetal:node:list_all`` default, ``SYSTEM_READER``
        in ``ironic/common/policy.py``): a system-scoped token with the
        reader role, or any token with the service role, lists every node;
        anyone else gets the nodes their project owns or leases. Only the
        words are the CLI's. None when the token cannot be inspected (the
        listing's counts still decide).
        """
        chosen = self.ironic_auth
        try:
            access = scope.access_of(self.session, chosen.plugin)
        except ks_exc.ClientException as exc:
            LOG.debug("cannot inspect the token: %s", exc)
            return None
        if access is None or ironic_credentials.scope_problem(access) is None:
            return None
        roles = ", ".join(sorted(getattr(access, "role_names", None) or ())
                          ) or "none"
        if getattr(access, "system_scoped", False):
            return (f"the token is system-scoped but its roles ({roles}) do "
                    "not include reader: by Ironic's default policy listing "
                    "every node needs the reader (or service) role")
        project = getattr(access, "project_name", None) or getattr(
            access, "project_id", None)
        kept = chosen.kept_because or "no system-scoped token was had"
        return (f"the token is scoped to project {project} (roles: "
                f"{roles}) and {kept}; by Ironic's default policy it lists "
                "only the nodes that project owns or leases: "
                f"{scope.CONFIGURE}")

    @property
    def requests(self) -> int:
        """Requests sent so far by all three clients."""
        return sum(c.requests for c in self._clients.values())
