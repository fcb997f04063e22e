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

"""Run the real ``openstack`` shell in-process against Nova's test harness.

Nova's API and placement are served by wsgi-intercept at fake hosts and
expect the harness's stub credentials instead of Keystone tokens, so the
CLI gets a test-only auth plugin, :class:`HarnessAuth`. It sends the
``X-Auth-User``/``X-Auth-Project-Id``/``X-Roles`` headers that
``OSAPIFixture._stub_keystone`` reads, plus ``X-Auth-Token: admin`` for
placement's noauth2, and answers endpoint look-ups from a dict. Its
``get_auth_ref`` returns a Keystone v3 token body whose catalog holds the
same endpoints, so osc-lib's catalog look-ups (``auth_ref.service_catalog``,
``get_endpoint_for_service_type``, ``is_service_available``) work too.

What :func:`run_cli` patches, for the duration of one run only:

* argv gets ``--os-auth-type none`` first: osc-lib validates the auth
  options of every command that needs auth (``cloud_config.get_one(...,
  validate=True)``) and ``none`` is the only built-in type that needs no
  options.
* ``openstackclient.common.clientmanager.ClientManager.setup_auth`` (the
  single place where OSC loads the plugin and builds ``session`` and
  ``sdk_connection``) is replaced: it installs :class:`HarnessAuth` as the
  cloud region's auth, builds the session and the openstacksdk connection
  the usual way from that region, and renames the region's ``auth_type``
  to ``harness`` so that osc-lib's ``auth_ref`` property stops
  short-circuiting ``none`` and returns the plugin's token. Every client
  (openstacksdk proxies such as ``compute``, ironicclient, plugins using
  ``client_manager.session``) then goes through that one session.
* ``sys.stdin``/``stdout``/``stderr``, ``OS_*`` client environment
  variables (cleared, so the developer's cloud never leaks in; oslo.config
  ``OS_GROUP__OPT`` variables stay), the warnings filters (osc-lib resets
  them globally) and the logging handlers/levels the shell installs are
  restored afterwards. The shell's console handlers drop records of the
  in-process services (:data:`SERVER_LOGGERS`): a real CLI never sees them.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import threading
import warnings
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any
from typing import NamedTuple

import fixtures
from keystoneauth1 import access
from keystoneauth1 import fixture as ksa_fixture
from keystoneauth1 import plugin
from nova.tests.fixtures.nova import PROJECT_ID
from openstack import connection
from openstackclient import shell
from openstackclient.common import clientmanager
from wsgi_intercept import interceptor

from nova_drain_filters import fixtures as ndf_fixtures
from tests.functional import base

PROG = "openstack"
"""Program name in messages (cliff takes it from ``sys.argv[0]`` at import)."""

UNSERVED_HOST = "unserved.harness.invalid"
UNSERVED_ENDPOINTS = {"identity": f"http://{UNSERVED_HOST}/identity/v3",
                      "image": f"http://{UNSERVED_HOST}/image/v2"}
"""Services the harness does not run but OSC's compute commands build
proxies for (``server list`` needs an identity v3 and an image proxy). The
URLs are versioned, so building a proxy sends no request; requests get
``403 Forbidden`` from :func:`unserved_app`, which OSC treats like a user
not allowed to look names up (``--project ID`` passes through, image
names are not shown)."""

SERVER_LOGGERS = ("nova", "placement", "oslo", "sqlalchemy", "alembic",
                  "keystonemiddleware", "routes", "wsgi_intercept")
"""Loggers of the in-process services (``oslo`` covers ``oslo_*``,
``nova`` covers ``nova_drain_filters``), kept off the CLI's stderr."""

STDERR_ALLOWLIST: tuple[str, ...] = ("sync: ",)
"""Substrings of stderr lines :func:`run_json` tolerates: ``drain sync``'s
summary line, which goes to stderr so that ``-f json`` stays clean."""

_CLIENT_LOGGERS = ("", "requests", "cliff", "stevedore", "iso8601")


class CliResult(NamedTuple):
    """Exit code and captured output of one CLI run."""

    rc: int
    stdout: str
    stderr: str


class HarnessAuth(plugin.BaseAuthPlugin):
    """Auth plugin sending Nova harness stub credentials to fixed endpoints."""

    def __init__(self, endpoints: dict[str, str], user: str = "admin",
                 project: str = PROJECT_ID,
                 roles: str = "admin,member,reader") -> None:
        super().__init__()
        self.endpoints = {**UNSERVED_ENDPOINTS, **endpoints}
        self.user, self.project, self.roles = user, project, roles

    def get_headers(self, session: Any, **kwargs: Any) -> dict[str, str]:
        """Return the stub-keystone headers plus placement's noauth2 token."""
        return {"X-Auth-User": self.user, "X-Auth-Project-Id": self.project,
                "X-Roles": self.roles, "X-Auth-Token": "admin"}

    def get_endpoint(self, session: Any, service_type: str | None = None,
                     interface: str | None = None,
                     **kwargs: Any) -> str | None:
        """Return the endpoint of ``service_type``, None if unknown."""
        return self.endpoints.get(service_type or "")

    def get_endpoint_data(self, session: Any, *,
                          endpoint_override: str | None = None,
                          discover_versions: bool = True,
                          **kwargs: Any) -> Any:
        """Run version discovery on our endpoint (the base needs an override)."""
        return super().get_endpoint_data(
            session,
            endpoint_override=endpoint_override or self.get_endpoint(
                session, **kwargs),
            discover_versions=discover_versions)

    def get_user_id(self, session: Any) -> str:
        """Return the user the requests run as."""
        return self.user

    def get_project_id(self, session: Any) -> str:
        """Return the project the requests are scoped to."""
        return self.project

    def get_auth_ref(self, session: Any) -> access.AccessInfoV3:
        """Return a project-scoped v3 token whose catalog is ``endpoints``."""
        token = ksa_fixture.V3Token(user_id=self.user, user_name=self.user,
                                    project_id=self.project,
                                    project_name=self.project)
        for role in self.roles.split(","):
            token.add_role(name=role)
        for service_type, url in self.endpoints.items():
            token.add_service(service_type).add_standard_endpoints(
                public=url, internal=url, admin=url)
        return access.AccessInfoV3(token, auth_token="admin")


def unserved_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answer every request with 403: the harness runs no such service."""
    message = f"{environ.get('PATH_INFO')} is not served by the CLI harness"
    body = json.dumps({"error": {"code": 403, "title": "Forbidden",
                                 "message": message}}).encode()
    start_response("403 Forbidden", [("Content-Type", "application/json"),
                                     ("Content-Length", str(len(body)))])
    return [body]


class _Stream(io.StringIO):
    """A captured stream whose ``isatty()`` is chosen by the test.

    ``before_read``, if set, is called once, when the command first reads:
    the moment between a plan on stderr and the operator's answer.
    """

    def __init__(self, text: str = "", tty: bool = False,
                 before_read: Callable[[], object] | None = None) -> None:
        super().__init__(text)
        self.tty = tty
        self.before_read = before_read

    def isatty(self) -> bool:
        return self.tty

    def readline(self, size: int | None = -1) -> str:
        if self.before_read is not None:
            before_read, self.before_read = self.before_read, None
            before_read()
        return super().readline(size)


class _DropServerLogs(logging.Filter):
    """Drop records of the in-process services: other threads, or ours."""

    def __init__(self, thread: int) -> None:
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return record.thread == self.thread and not any(
            name == p or name.startswith((p + ".", p + "_"))
            for p in SERVER_LOGGERS)


def _setup_auth(auth: HarnessAuth) -> Any:
    def setup_auth(cm: clientmanager.ClientManager) -> None:
        if cm._auth_setup_completed:
            return
        region = cm._cli_options
        region.config["auth_type"] = cm.auth_plugin_name = "harness"
        region._auth = cm.auth = auth
        cm.session = region.get_session()
        cm.sdk_connection = connection.Connection(config=region)
        cm._auth_setup_completed = True
    return setup_auth


@contextlib.contextmanager
def _shell_logging() -> Iterator[None]:
    """Filter the shell's new root handlers; undo its logging set-up after."""
    loggers = [logging.getLogger(name) for name in _CLIENT_LOGGERS]
    levels = [logger.level for logger in loggers]
    root = logging.getLogger()
    handlers = list(root.handlers)

    drop = _DropServerLogs(threading.get_ident())

    def add_handler(handler: logging.Handler) -> None:
        handler.addFilter(drop)
        logging.Logger.addHandler(root, handler)

    # A run inside a run (a test starting a second CLI while the first
    # waits) finds the outer run's patch and puts it back when done.
    outer = vars(root).get("addHandler")
    root.addHandler = add_handler  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        if outer is None:
            del root.addHandler
        else:
            root.addHandler = outer
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _forget_plugin_clients() -> None:
    """Drop the plugin clients a previous in-process run made.

    openstackclient attaches each plugin to osc-lib's ``ClientManager`` class
    as a ``ClientCache`` descriptor that keeps the first client it builds
    for the life of the process (``openstackclient/common/clientmanager.py``
    ``get_plugin_modules``). One real CLI run is one process; here a later
    run would reuse a client bound to an earlier test's endpoints.
    """
    from osc_lib import clientmanager as osc_clientmanager

    for value in vars(osc_clientmanager.ClientManager).values():
        if isinstance(value, osc_clientmanager.ClientCache):
            value._handle = None


def run_cli(test: Any, argv: list[str], stdin_text: str | None = None,
            tty: bool = False, auth: HarnessAuth | None = None,
            before_answer: Callable[[], object] | None = None) -> CliResult:
    """Run ``openstack <argv>`` in-process as ``auth`` (``test.cli_auth``).

    stdin is always replaced (empty unless ``stdin_text``), so a prompt never
    reads the real terminal; ``tty`` is what all three streams' ``isatty()``
    return. ``before_answer`` runs when the command first reads stdin (after
    it printed its plan, before it gets ``stdin_text``): the cloud can change
    there as it would while an operator reads the plan. ``SystemExit``
    (argparse errors, ``--help``) becomes ``rc``.
    """
    auth = auth or test.cli_auth
    _forget_plugin_clients()
    out, err = _Stream(tty=tty), _Stream(tty=tty)
    stdin = _Stream(stdin_text or "", tty=tty, before_read=before_answer)
    env = [k for k in os.environ if k.startswith("OS_") and "__" not in k]
    with contextlib.ExitStack() as stack:
        for name in env:
            stack.enter_context(fixtures.EnvironmentVariable(name))
        stack.enter_context(fixtures.MonkeyPatch(
            "openstackclient.common.clientmanager.ClientManager.setup_auth",
            _setup_auth(auth)))
        stack.enter_context(interceptor.RequestsInterceptor(
            lambda: unserved_app, host=UNSERVED_HOST, port=80))
        stack.enter_context(warnings.catch_warnings())
        stack.enter_context(_shell_logging())
        stack.enter_context(fixtures.MonkeyPatch("cliff.app.App.NAME", PROG))
        stack.enter_context(fixtures.MonkeyPatch("sys.argv", [PROG, *argv]))
        stack.enter_context(fixtures.MonkeyPatch("sys.stdin", stdin))
        stack.enter_context(fixtures.MonkeyPatch("sys.stdout", out))
        stack.enter_context(fixtures.MonkeyPatch("sys.stderr", err))
        try:
            rc = shell.main(["--os-auth-type", "none", *argv])
        except SystemExit as exc:
            code = exc.code
            rc = code if isinstance(code, int) else (0 if code is None else 1)
    return CliResult(rc, out.getvalue(), err.getvalue())


def unexpected_stderr(stderr: str) -> list[str]:
    """Return the stderr lines not matched by :data:`STDERR_ALLOWLIST`."""
    return [line for line in stderr.splitlines() if line.strip()
            and not any(allowed in line for allowed in STDERR_ALLOWLIST)]


def run_json(test: Any, argv: list[str], **kwargs: Any) -> Any:
    """Run ``argv -f json``, assert success and a clean stderr, parse stdout.

    Clean means every non-blank stderr line matches :data:`STDERR_ALLOWLIST`
    (so no traceback, warning or plugin load failure gets through).
    """
    result = run_cli(test, [*argv, "-f", "json"], **kwargs)
    test.assertEqual(0, result.rc, f"openstack {' '.join(argv)}: {result}")
    test.assertEqual([], unexpected_stderr(result.stderr), result.stderr)
    return json.loads(result.stdout)


class CliTestBase(base.DrainTestBase):
    """A :class:`~tests.functional.base.DrainTestBase` that can run the CLI.

    ``self.cli_auth`` points at this test's Nova API and placement, and at
    ``self.ironic_url`` if a subclass sets it before calling ``setUp``
    (``DrainTestBase`` reads it there too).
    """

    cli_auth: HarnessAuth

    def setUp(self) -> None:
        super().setUp()
        self.cli_auth = HarnessAuth(self.cli_endpoints(),
                                    project=self.api_fixture.project_id)

    def cli_endpoints(self) -> dict[str, str]:
        """Return the endpoints of the services this test runs."""
        endpoints = {"compute": self.api_fixture.base_url,
                     "placement": ndf_fixtures.placement_fixture(self).endpoint}
        if getattr(self, "ironic_url", None):
            endpoints["baremetal"] = self.ironic_url
        return endpoints

    def cli(self, *argv: str, stdin_text: str | None = None, tty: bool = False,
            auth: HarnessAuth | None = None,
            before_answer: Callable[[], object] | None = None) -> CliResult:
        """Run ``openstack *argv``; see :func:`run_cli`."""
        return run_cli(self, list(argv), stdin_text=stdin_text, tty=tty,
                       auth=auth, before_answer=before_answer)

    def cli_json(self, *argv: str, **kwargs: Any) -> Any:
        """Run ``openstack *argv -f json``; see :func:`run_json`."""
        return run_json(self, list(argv), **kwargs)
