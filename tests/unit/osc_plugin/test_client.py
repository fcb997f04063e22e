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

"""The plugin entry points and DrainClient on openstackclient's session."""
import argparse
import types
from typing import Any

import fixtures
import testtools
from keystoneauth1 import access
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import fixture as ksa_fixture
from osc_lib import exceptions

from nova_drain_filters.clients import compute
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement
from nova_drain_filters.ironic_view import credentials as ironic_credentials
from osc_plugin import client
from osc_plugin import plugin


class FakeSession:
    """Answers endpoint look-ups from a dict (or raises ``error``)."""

    def __init__(self, endpoints: dict[str, str] | None = None,
                 error: Exception | None = None) -> None:
        self.endpoints = endpoints or {}
        self.error = error

    def get_endpoint(self, auth: Any = None, **kwargs: Any) -> str | None:
        if self.error is not None:
            raise self.error
        return self.endpoints.get(kwargs.get("service_type", ""))


def manager(session: Any = None, **overrides: str) -> Any:
    return types.SimpleNamespace(
        session=session or FakeSession(), interface="internal",
        region_name="R1", _override_for=overrides.get)


class TestDrainClient(testtools.TestCase):
    def test_from_client_manager(self) -> None:
        drain = client.DrainClient.from_client_manager(
            manager(compute="http://nova.example/v2.1"))
        self.assertEqual(("internal", "R1"),
                         (drain.interface, drain.region_name))
        self.assertEqual({"compute": "http://nova.example/v2.1",
                          "placement": None, "baremetal": None},
                         drain.overrides)

    def test_manager_without_overrides(self) -> None:
        instance = types.SimpleNamespace(session=FakeSession(),
                                         interface=None, region_name=None)
        drain = client.DrainClient.from_client_manager(instance)
        self.assertEqual({"compute": None, "placement": None,
                          "baremetal": None}, drain.overrides)

    def test_clients_are_built_once_on_the_right_service(self) -> None:
        drain = client.DrainClient.from_client_manager(
            manager(placement="http://placement.example"))
        for attr, cls, service_type in (
                ("nova", compute.ComputeClient, "compute"),
                ("placement", placement.PlacementClient, "placement"),
                ("ironic", ironic.IronicClient, "baremetal")):
            built = getattr(drain, attr)
            self.assertIsInstance(built, cls)
            self.assertIs(built, getattr(drain, attr))
            self.assertEqual((service_type, "internal", "R1"), (
                built.adapter.service_type, built.adapter.interface,
                built.adapter.region_name))
        self.assertEqual("http://placement.example",
                         drain.placement.adapter.endpoint_override)
        self.assertIsNone(drain.nova.adapter.endpoint_override)

    def test_requests_sum_over_built_clients(self) -> None:
        drain = client.DrainClient(FakeSession())
        self.assertEqual(0, drain.requests)
        drain.nova.requests = 3
        drain.placement.requests = 4
        self.assertEqual(7, drain.requests)

    def test_has_ironic(self) -> None:
        self.assertIs(True, client.DrainClient(
            FakeSession(), overrides={"baremetal": "http://ironic"}
        ).has_ironic())
        self.assertIs(True, client.DrainClient(FakeSession(
            {"baremetal": "http://ironic.example"})).has_ironic())
        self.assertIs(False, client.DrainClient(FakeSession()).has_ironic())

    def test_only_a_missing_catalog_entry_means_no_ironic(self) -> None:
        self.assertIs(False, client.DrainClient(FakeSession(
            error=ks_exc.EndpointNotFound("no baremetal"))).has_ironic())
        for error in (ks_exc.ConnectFailure("keystone down"),
                      ks_exc.Unauthorized("token expired"),
                      ks_exc.DiscoveryFailure("bad document")):
            exc = self.assertRaises(
                exceptions.CommandError,
                client.DrainClient(FakeSession(error=error)).has_ironic)
            self.assertEqual("cannot look up the baremetal (Ironic) endpoint: "
                             f"{type(error).__name__}: {error}", str(exc))
        # A bug is a bug, not "no Ironic".
        self.assertRaises(RuntimeError, client.DrainClient(FakeSession(
            error=RuntimeError("bug"))).has_ironic)


def token(system: bool = False, roles: tuple[str, ...] = ("admin",)) -> Any:
    """A session whose auth plugin returns a Keystone v3 token."""
    if system:
        body = ksa_fixture.V3Token()
        body.set_system_scope()
    else:
        body = ksa_fixture.V3Token(project_id="p1", project_name="demo")
    for role in roles:
        body.add_role(name=role)
    ref = access.AccessInfoV3(body, auth_token="t")
    auth = types.SimpleNamespace(get_access=lambda _session: ref)
    return types.SimpleNamespace(auth=auth)


class TestTokenScope(testtools.TestCase):
    def test_project_token_may_see_only_its_nodes(self) -> None:
        scope = client.DrainClient(token(roles=("admin", "member"))
                                   ).token_scope()
        self.assertEqual(
            "the token is scoped to project demo (roles: admin, member) and "
            "auth type none cannot ask for a system-scoped token; by "
            "Ironic's default policy it lists only the nodes that project "
            "owns or leases: give the user a role on the system ('openstack "
            "role add --user USER --system all reader'), or the service role "
            "in the service project with Ironic's [DEFAULT] "
            "rbac_service_role_elevated_access = true", scope)

    def test_system_scope_or_service_role_sees_every_node(self) -> None:
        self.assertIsNone(client.DrainClient(
            token(system=True, roles=("reader",))).token_scope())
        self.assertIsNone(client.DrainClient(
            token(roles=("service",))).token_scope())

    def test_the_rule_is_the_schedulers(self) -> None:
        # One rule with ironic_view.credentials.scope_problem: system scope
        # lists every node only with a reader role (admin and member
        # include it); a role Ironic's SYSTEM_READER does not know fails.
        for roles in (("admin",), ("member",), ("reader",), ("service",)):
            self.assertIsNone(client.DrainClient(
                token(system=True, roles=roles)).token_scope(), roles)
        self.assertEqual(
            "the token is system-scoped but its roles (auditor) do not "
            "include reader: by Ironic's default policy listing every node "
            "needs the reader (or service) role",
            client.DrainClient(token(system=True, roles=("auditor",))
                               ).token_scope())
        for session in (token(system=True, roles=("auditor",)),
                        token(roles=("admin",)), token(system=True, roles=())):
            self.assertEqual(
                ironic_credentials.scope_problem(session.auth.get_access(None))
                is None, client.DrainClient(session).token_scope() is None)

    def test_uninspectable_token_says_nothing(self) -> None:
        self.assertIsNone(client.DrainClient(FakeSession()).token_scope())

        def fail(_session: Any) -> Any:
            raise ks_exc.ConnectFailure("keystone down")

        session = types.SimpleNamespace(
            auth=types.SimpleNamespace(get_access=fail))
        self.assertIsNone(client.DrainClient(session).token_scope())


class TestPlugin(testtools.TestCase):
    def test_entry_point_attributes(self) -> None:
        self.assertEqual(("drain", "os_drain_api_version", "1"), (
            plugin.API_NAME, plugin.API_VERSION_OPTION,
            plugin.DEFAULT_API_VERSION))
        self.assertEqual({"1": "osc_plugin.client.DrainClient"},
                         plugin.API_VERSIONS)

    def test_make_client(self) -> None:
        drain = plugin.make_client(manager(baremetal="http://ironic"))
        self.assertIsInstance(drain, client.DrainClient)
        self.assertEqual("http://ironic", drain.overrides["baremetal"])

    def test_api_version_option(self) -> None:
        self.useFixture(fixtures.EnvironmentVariable("OS_DRAIN_API_VERSION"))
        parser = plugin.build_option_parser(argparse.ArgumentParser())
        self.assertEqual("1", parser.parse_args([]).os_drain_api_version)
        self.assertEqual("2", parser.parse_args(
            ["--os-drain-api-version", "2"]).os_drain_api_version)
        self.useFixture(fixtures.EnvironmentVariable("OS_DRAIN_API_VERSION",
                                                     "9"))
        parser = plugin.build_option_parser(argparse.ArgumentParser())
        self.assertEqual("9", parser.parse_args([]).os_drain_api_version)
