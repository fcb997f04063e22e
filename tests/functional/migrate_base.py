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

"""A base for ``drain host migrate`` tests and the benchmark: held live
migrations (:mod:`tests.functional.migration_fakes`) and helpers that read
Nova's own records."""
import json
import time
from typing import Any

import fixtures
from nova import objects

from tests.functional import cli_harness
from tests.functional import migration_fakes

DRIVER = "drain_held_migration.HeldLiveMigrationDriver"
#: Nova's migration statuses after which a move is over.
OVER = ("completed", "confirmed", "reverted", "error", "failed",
        "cancelled", "done")


class MigrateTestBase(cli_harness.CliTestBase):
    """Computes run the held-migration fake, MediumFakeDriver-sized."""

    HOSTS: tuple[str, ...] = ("host1", "host2", "host3")
    COMPUTE_DRIVER = DRIVER
    #: RPC casts stay casts, as in a cloud: the API answers 202 before the
    #: conductor's pre-checks (the harness's default makes them calls).
    CAST_AS_CALL = False
    #: Seconds each live migration takes (None: until aborted or released).
    HOLD: float | None = 0.2
    #: Nova's default, 1, would queue a host's second live migration.
    PARALLEL_LIVE = 4

    def setUp(self) -> None:
        self.useFixture(fixtures.MonkeyPatch(
            "tests.functional.migration_fakes.HeldLiveMigrationDriver.hold",
            self.HOLD))
        self.flags(max_concurrent_live_migrations=self.PARALLEL_LIVE)
        super().setUp()
        # Before the computes stop (cleanups run newest first): Nova's
        # graceful shutdown waits for a held migration forever.
        self.addCleanup(self.release_all)

    def release_all(self) -> None:
        for host in self.HOSTS:
            if host in self.computes:
                self.driver(host).hold = 0.0

    def driver(self, host: str) -> migration_fakes.HeldLiveMigrationDriver:
        found: migration_fakes.HeldLiveMigrationDriver = (
            self.computes[host].driver)
        return found

    def boot_on(self, host: str, **kw: Any) -> dict[str, Any]:
        return self._create_server(networks="none", host=host, **kw)

    def group(self, name: str, policy: str) -> str:
        """A server group; its ID."""
        found: str = self.admin_api.post_server_groups(
            {"name": name, "policy": policy})["id"]
        return found

    def boot_in(self, group: str, host: str) -> dict[str, Any]:
        """Boot on ``host`` as a member of ``group`` (a scheduler hint)."""
        body = self._build_server(networks="none", host=host)
        self.admin_api.microversion = "2.74"
        return self.settle(lambda: self.admin_api.post_server(
            {"server": body, "os:scheduler_hints": {"group": group}}))

    def start_drain(self, *hosts: str) -> None:
        run = self.cli("drain", "host", "start", *hosts, "--reason",
                       "migrate test", "--yes")
        self.assertEqual(0, run.rc, run)

    def migrate(self, *argv: str, rc: int = 0
                ) -> tuple[dict[str, dict[str, Any]], cli_harness.CliResult]:
        """``drain host migrate ... --yes -f json``: rows by server."""
        run = self.cli("drain", "host", "migrate", *argv, "--yes", "-f",
                       "json")
        self.assertEqual(rc, run.rc, run)
        self.assertNotIn("Traceback", run.stderr)
        return {r["Server"]: r for r in json.loads(run.stdout)}, run

    def records(self, server: dict[str, Any]) -> list[Any]:
        """Nova's migration records of a server, oldest first."""
        found = objects.MigrationList.get_by_filters(
            self.ctxt, {"instance_uuid": server["id"]})
        return sorted(found, key=lambda m: m.id)

    def wait_for(self, what: str, check: Any, seconds: float = 20.0) -> Any:
        """Poll ``check()`` until it is truthy; fail naming ``what``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}")

    def server(self, server: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = self.admin_api.get_server(server["id"])
        return found

    def actions(self, server: dict[str, Any]) -> list[str]:
        """Its instance actions since it was created, oldest first."""
        return [a["action"] for a in reversed(self.admin_api.api_get(
            f"/servers/{server['id']}/os-instance-actions").body[
                "instanceActions"]) if a["action"] != "create"]

    def usage(self, host: str) -> dict[str, int]:
        rp = self._get_provider_uuid_by_host(host)
        found: dict[str, int] = self._get_provider_usages(rp)
        return found
