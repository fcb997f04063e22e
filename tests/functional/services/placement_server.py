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

"""Run the real Placement WSGI app in a subprocess on loopback for tests.

The child runs ``placement.wsgi.api:application`` (openstack-placement's
own WSGI entry point) under the stdlib single-threaded ``wsgiref`` server,
with a private SQLite database that placement migrates at start-up
(``[placement_database] sync_on_startup``) and ``noauth2`` auth.

Run as ``python -m tests.functional.services.placement_server HOST PORT
[WORKERS]`` this module is that child; ``OS_PLACEMENT_CONFIG_DIR`` must
name the directory holding ``placement.conf``. With WORKERS above 1 the
child binds once and forks, and each worker process accepts on the shared
socket, as a pre-forking WSGI container (uWSGI, mod_wsgi) serves placement
in a real cloud: requests are served in parallel, one per worker.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.functional.services.process import REPO_ROOT
from tests.functional.services.process import JsonTestClient
from tests.functional.services.process import LoopbackService
from tests.functional.services.process import ServiceFixture
from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import child_env
from tests.functional.services.process import given
from tests.functional.services.process import http_session
from tests.functional.services.process import make_service_dir
from tests.functional.services.process import write_ini

PLACEMENT_API_VERSION = "1.39"
"""Placement microversion the test client pins (the newest in 16.0.0)."""

ADMIN_TOKEN = "admin"
"""``noauth2`` treats the token ``admin`` as a user with the admin role."""

MODULE = "tests.functional.services.placement_server"

SERVING = "placement serving on"
"""What each worker logs once its app is built and it accepts."""


def placement_config(
    state_dir: Path, debug: bool = False, database: Path | None = None
) -> dict[str, dict[str, str | bool]]:
    """Return placement.conf sections for an isolated server: its own new
    database, or ``database`` (an SQLite file already migrated)."""
    return {
        "DEFAULT": {"debug": debug, "use_stderr": True},
        "api": {"auth_strategy": "noauth2"},
        "placement_database": {
            "connection": f"sqlite:///{database or state_dir / 'placement.db'}",
            "sync_on_startup": database is None,
        },
    }


class PlacementServer(LoopbackService):
    """A real Placement API process bound to a loopback port."""

    name = "placement"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout: float = 60.0,
        debug: bool = False,
        python: str = sys.executable,
        database: Path | None = None,
        workers: int = 1,
    ):
        super().__init__(host, port, ready_timeout, debug)
        if workers > 1 and database is None:
            raise ValueError("workers > 1 needs a database already migrated:"
                             " each worker would migrate a new one at once")
        self.python = python
        self.database = database
        self.workers = workers

    def _start_once(self) -> None:
        self.state_dir = make_service_dir("ndf-placement-")
        atexit.register(self.stop)
        write_ini(
            self.state_dir / "placement.conf",
            placement_config(self.state_dir, self.debug, self.database),
        )
        process = self._process = ServiceProcess(
            "placement",
            [self.python, "-m", MODULE, self.host, str(self.port),
             str(self.workers)],
            self.state_dir / "placement.log",
            env=child_env({"OS_PLACEMENT_CONFIG_DIR": str(self.state_dir)}),
            cwd=REPO_ROOT,
        )
        process.start()
        # Each worker builds the app (and the DB sync) before it says it
        # serves, so an answer from / after every worker has said so means
        # the database is ready too.
        with http_session({"X-Auth-Token": ADMIN_TOKEN}) as session:
            self._wait_ready(
                lambda: process.log_tail(10**6).count(SERVING) >= self.workers
                and session.get(f"{self.url}/", timeout=2).status_code == 200
            )


class PlacementServerFixture(ServiceFixture):
    """Runs a :class:`PlacementServer` for the test's lifetime.

    Exposes ``url``, ``server`` and a ready :class:`PlacementTestClient` as
    ``client``; the server log is attached as the detail ``placement-log``.
    """

    server: PlacementServer
    client: PlacementTestClient

    def __init__(self, ready_timeout: float = 60.0, debug: bool = False):
        super().__init__(
            PlacementServer(ready_timeout=ready_timeout, debug=debug),
            PlacementTestClient,
        )


class PlacementTestClient(JsonTestClient):
    """Minimal typed Placement API client for test set-up and checks."""

    def __init__(
        self, url: str, api_version: str = PLACEMENT_API_VERSION, timeout: float = 10.0
    ):
        super().__init__(url, {
            "X-Auth-Token": ADMIN_TOKEN,
            "OpenStack-API-Version": f"placement {api_version}",
        }, timeout)

    def create_resource_provider(
        self, name: str, uuid: str | None = None, parent_uuid: str | None = None
    ) -> dict[str, Any]:
        """Create a resource provider and return it."""
        body = {"name": name,
                **given(uuid=uuid, parent_provider_uuid=parent_uuid)}
        return self.request("POST", "/resource_providers", body, (200,)).json()

    def get_resource_provider(self, uuid: str) -> dict[str, Any]:
        """Return one resource provider."""
        return self.request("GET", f"/resource_providers/{uuid}").json()

    def ensure_trait(self, name: str) -> bool:
        """Create a ``CUSTOM_*`` trait; True if new, False if it existed."""
        resp = self.request("PUT", f"/traits/{name}", expected=(201, 204))
        return resp.status_code == 201

    def trait_exists(self, name: str) -> bool:
        """Return whether the trait is known to placement."""
        resp = self.request("GET", f"/traits/{name}", expected=(204, 404))
        return resp.status_code == 204

    def get_provider_traits(self, uuid: str) -> list[str]:
        """Return the traits of a resource provider."""
        path = f"/resource_providers/{uuid}/traits"
        return self.request("GET", path).json()["traits"]

    def set_provider_traits(self, uuid: str, traits: Iterable[str]) -> list[str]:
        """Replace a provider's traits (using its current generation)."""
        generation = self.get_resource_provider(uuid)["generation"]
        body = {"resource_provider_generation": generation, "traits": sorted(traits)}
        path = f"/resource_providers/{uuid}/traits"
        return self.request("PUT", path, body).json()["traits"]


def serve(host: str, port: int, workers: int = 1) -> None:
    """Serve placement's WSGI app on ``host:port`` until killed.

    The socket is bound before any fork and the app is built after it, in
    each worker, so no database connection is shared across processes.
    """
    import os
    from wsgiref import simple_server

    class Server(simple_server.WSGIServer):
        # socketserver's backlog of 5 drops connections when more clients
        # than that connect at once (1 s SYN retries); uWSGI listens with 100.
        request_queue_size = 128

    server = Server((host, port), simple_server.WSGIRequestHandler)
    for _ in range(workers - 1):
        if os.fork() == 0:
            break  # a worker: build the app and serve
    from placement.wsgi import api

    server.set_app(api.application)
    print(f"{SERVING} http://{host}:{port} (pid {os.getpid()})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]),
          int(sys.argv[3]) if len(sys.argv) > 3 else 1)
