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

"""Which token Ironic gets, on keystoneauth's own plugins and session.

Keystone is requests_mock answering ``POST /v3/auth/tokens`` with
keystoneauth's token fixtures; the proof against a real Keystone is the
e2e tier's (issue 21, section 5).
"""
import json
from typing import Any

import testtools
from keystoneauth1 import fixture as ksa_fixture
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from requests_mock.contrib import fixture as rm_fixture

from osc_plugin import client
from osc_plugin import scope

AUTH_URL = "http://keystone.example/v3"
IRONIC = "http://ironic.example"
NOVA = "http://nova.example/v2.1"
PASSWORD = {"auth_url": AUTH_URL, "username": "ops", "password": "secret",
            "user_domain_name": "Default", "project_name": "admin",
            "project_domain_name": "Default"}


def token_body(system: bool, roles: tuple[str, ...]) -> Any:
    if system:
        body = ksa_fixture.V3Token(user_name="ops")
        body.set_system_scope()
    else:
        body = ksa_fixture.V3Token(user_name="ops", project_id="p1",
                                   project_name="admin")
    for role in roles:
        body.add_role(name=role)
    for service_type, url in (("baremetal", IRONIC), ("compute", NOVA)):
        body.add_service(service_type).add_standard_endpoints(
            public=url, internal=url, admin=url)
    return body


class Keystone:
    """Keystone's token API: a project token, and a system one if granted."""

    def __init__(self, mock: Any, project_roles: tuple[str, ...] = ("admin",),
                 system_roles: tuple[str, ...] | None = ("admin", "reader")
                 ) -> None:
        self.project_roles, self.system_roles = project_roles, system_roles
        #: The scope of every token request: "project" or "system".
        self.asked: list[str] = []
        self.bodies: list[Any] = []
        mock.post(f"{AUTH_URL}/auth/tokens", json=self.issue)
        mock.get(AUTH_URL, json={"version": ksa_fixture.V3Discovery(AUTH_URL)})

    def issue(self, request: Any, context: Any) -> Any:
        body = json.loads(request.body)
        self.bodies.append(body)
        system = "system" in body["auth"].get("scope", {})
        self.asked.append("system" if system else "project")
        if system and self.system_roles is None:
            # Keystone's answer to a user with no role on the system.
            context.status_code = 401
            return {"error": {"code": 401, "title": "Unauthorized",
                              "message": "The request you have made requires "
                                         "authentication."}}
        context.status_code = 201
        context.headers["X-Subject-Token"] = f"{self.asked[-1]}-token"
        return token_body(system, self.system_roles if system
                          else self.project_roles)


def session(auth_type: str, options: dict[str, Any]) -> ks_session.Session:
    plugin = ks_loading.get_plugin_loader(auth_type).load_from_options(
        **options)
    return ks_session.Session(auth=plugin)


class TestSystemScopeOptions(testtools.TestCase):
    def test_password_drops_the_project_and_asks_for_the_system(self) -> None:
        for auth_type in ("password", "v3password"):
            self.assertEqual(
                {"auth_url": AUTH_URL, "username": "ops",
                 "password": "secret", "user_domain_name": "Default",
                 "system_scope": "all"},
                scope.system_scope_options(auth_type, PASSWORD), auth_type)

    def test_credentials_that_cannot_change_scope(self) -> None:
        for auth_type in ("v3applicationcredential", "none", "harness", None,
                          ""):
            self.assertIsNone(scope.system_scope_options(
                auth_type, {"auth_url": AUTH_URL,
                            "application_credential_id": "a",
                            "application_credential_secret": "s"}),
                auth_type)


class TestChoose(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.mock = self.useFixture(rm_fixture.Fixture())

    def test_project_admin_gets_a_system_token_for_ironic_only(self) -> None:
        keystone = Keystone(self.mock)
        drain = client.DrainClient(session("password", PASSWORD),
                                   interface="public",
                                   auth_type="password",
                                   auth_options=PASSWORD)
        self.mock.get(f"{IRONIC}/v1/nodes", json={"nodes": []})
        self.mock.get(f"{NOVA}/os-services", json={"services": []})
        drain.ironic.adapter.get("/v1/nodes")
        drain.nova.adapter.get("/os-services")
        sent = {r.url.split("/")[2]: r.headers["X-Auth-Token"]
                for r in self.mock.request_history if r.method == "GET"
                and r.url.startswith(("http://ironic", "http://nova"))}
        self.assertEqual({"ironic.example": "system-token",
                          "nova.example": "project-token"}, sent)
        self.assertEqual(["project", "system"], keystone.asked)
        # The same user and password, scoped to the system, no project.
        asked = keystone.bodies[1]["auth"]
        self.assertEqual({"system": {"all": True}}, asked["scope"])
        self.assertEqual(("ops", "secret"), (
            asked["identity"]["password"]["user"]["name"],
            asked["identity"]["password"]["user"]["password"]))
        self.assertIsNone(drain.token_scope())
        self.assertEqual(["project", "system"], keystone.asked)  # once

    def test_keystone_refuses_the_system_scope(self) -> None:
        keystone = Keystone(self.mock, system_roles=None)
        drain = client.DrainClient(session("password", PASSWORD),
                                   auth_type="password",
                                   auth_options=PASSWORD)
        self.assertIsNone(drain.ironic_auth.plugin)
        self.assertEqual(["project", "system"], keystone.asked)
        self.assertEqual(
            "the token is scoped to project admin (roles: admin) and "
            "Keystone refused a system-scoped token for the same user "
            "(Unauthorized); by Ironic's default policy it lists only the "
            "nodes that project owns or leases: " + scope.CONFIGURE,
            drain.token_scope())

    def test_a_system_token_without_reader_is_not_taken(self) -> None:
        Keystone(self.mock, system_roles=("auditor",))
        chosen = scope.choose(session("password", PASSWORD), "password",
                              PASSWORD)
        self.assertEqual((None, "the system-scoped token of the same user "
                                "has no reader role"),
                         (chosen.plugin, chosen.kept_because))

    def test_service_role_keeps_the_project_token(self) -> None:
        keystone = Keystone(self.mock, project_roles=("service",))
        chosen = scope.choose(session("password", PASSWORD), "password",
                              PASSWORD)
        self.assertEqual(scope.IronicAuth(), chosen)
        self.assertEqual(["project"], keystone.asked)

    def test_application_credential_is_not_rescoped(self) -> None:
        keystone = Keystone(self.mock)
        options = {"auth_url": AUTH_URL, "application_credential_id": "a",
                   "application_credential_secret": "s"}
        chosen = scope.choose(session("v3applicationcredential", options),
                              "v3applicationcredential", options)
        self.assertIsNone(chosen.plugin)
        self.assertEqual("auth type v3applicationcredential cannot ask for "
                         "a system-scoped token", chosen.kept_because)
        self.assertEqual(["project"], keystone.asked)
