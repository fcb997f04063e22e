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

"""Whether the [ironic] token can list every node, and the view's warning."""
import types
from typing import Any

import testtools

from nova_drain_filters.ironic_view import credentials
from tests.unit.ironic_view import helpers


def token(system: bool = False, project: str | None = None,
          roles: tuple[str, ...] = ()) -> Any:
    return types.SimpleNamespace(system_scoped=system,
                                 project_scoped=project is not None,
                                 project_id=project, role_names=list(roles))


class TestScopeProblem(testtools.TestCase):
    def test_tokens_that_list_every_node(self) -> None:
        for access in (token(system=True, roles=("reader",)),
                       token(system=True, roles=("admin", "member")),
                       token(project="p1", roles=("service",))):
            self.assertIsNone(credentials.scope_problem(access))

    def test_project_tokens_see_their_own_nodes(self) -> None:
        problem = credentials.scope_problem(
            token(project="p1", roles=("admin", "reader")))
        self.assertIn("project p1 and roles ['admin', 'reader']", problem)
        self.assertIn("set [ironic] system_scope = all for a user with the "
                      "reader role on the system", problem)
        self.assertIn("rbac_service_role_elevated_access = true", problem)

    def test_system_scope_without_a_role(self) -> None:
        self.assertIn("system and roles []", credentials.scope_problem(
            token(system=True)))

    def test_token_of(self) -> None:
        self.assertIsNone(credentials.token_of(None))
        session = types.SimpleNamespace(auth=None)
        self.assertIsNone(credentials.token_of(
            types.SimpleNamespace(session=session, auth=None)))
        access = token(system=True, roles=("reader",))
        auth = types.SimpleNamespace(get_access=lambda s: access)
        session.auth = auth
        self.assertIs(access, credentials.token_of(
            types.SimpleNamespace(session=session, auth=None)))


class TestViewWarns(helpers.ViewTestCase):
    def test_first_listing_warns_once(self) -> None:
        access = token(project="p1", roles=("admin",))
        self.client.adapter = types.SimpleNamespace(  # type: ignore
            session=None, auth=types.SimpleNamespace(
                get_access=lambda s: access))
        self.view.refresh()
        self.view.refresh()
        lines = [x for x in self.log.output.splitlines()
                 if "may be partial" in x]
        self.assertEqual(1, len(lines))
        self.assertIn("project p1", lines[0])

    def test_no_auth_no_warning(self) -> None:
        self.view.refresh()
        self.assertNotIn("may be partial", self.log.output)
