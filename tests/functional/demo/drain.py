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

"""Act 6: a host drained from start to finish with ``openstack drain host``
(as in tests/functional/test_cli_drain_host.py LifecycleTest), its server
moved by ``drain host migrate``."""
from __future__ import annotations

from typing import Any

from tests.functional import cli_harness

from .screen import ActMixin


class DrainAct(ActMixin, cli_harness.CliTestBase):
    """host1 runs a server; it is drained, emptied and released."""

    NUMBER, TITLE = 6, "A host drained: start, migrate, show, finish"
    HOSTS = ("host1", "host2", "host3")

    def boot_on(self, host: str | None = None) -> dict[str, Any]:
        return self._create_server(networks="none", host=host)

    def test_act(self) -> None:
        say, check = self.screen.say, self.screen.check
        busy = self.boot_on("host1")
        say(f"host1 runs server {busy['id']}.")
        self.openstack("drain", "host", "start", "host1", "--reason",
                       "rack 7 retire", "--yes")
        landed = [self.boot_on()["OS-EXT-SRV-ATTR:host"] for _ in range(2)]
        check("host1" not in landed, f"a new boot landed on host1: {landed}")
        say(f"Two new boots land on {', '.join(landed)}, not host1.")
        shown = self.openstack("drain", "host", "show", "host1")
        check("Draining" in shown.stdout,
              "host1 not Draining while its server is there")

        moved = self.openstack("drain", "host", "migrate", "host1", "--yes")
        check(" moved " in moved.stdout, "drain host migrate moved nothing")
        where = self.api.get_server(busy["id"])["OS-EXT-SRV-ATTR:host"]
        check(where != "host1", f"the server is still on {where}")
        say(f"drain host migrate live-migrated it through the scheduler: on "
            f"{where} now.")
        shown = self.openstack("drain", "host", "show", "host1")
        check("Drained" in shown.stdout, "host1 not Drained once empty")

        say("host1 is powered off (its nova-compute stops, marked down):")
        self.computes["host1"].stop()
        self.admin_api.put_service_force_down(self.service_id("host1"), True)
        done = self.openstack("drain", "host", "finish", "host1", "--yes")
        check("released" in done.stdout,
              "drain host finish did not release host1")
        # Nova keeps nothing of a released host: show refuses the name as
        # it refuses a typo, with exit 1.
        argv = ["drain", "host", "show", "host1"]
        gone = cli_harness.run_cli(self, argv)
        say(f"$ openstack {' '.join(argv)}")
        say(gone.stderr.strip())
        check(gone.rc == 1 and "host1: no compute service" in gone.stderr,
              "host show did not refuse host1, which Nova no longer knows")
        self.keep_logs()
