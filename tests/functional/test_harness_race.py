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

"""base.DrainTestBase.settle: a build that met the harness's oslo.db race
is booted again; any other failed build still fails the test."""
from typing import Any

from tests.functional import base


class SettleTest(base.DrainTestBase):
    HOSTS = ("host1",)

    def fail_spawns(self, *errors: str) -> list[str]:
        """The next spawns on host1 raise ``errors``, one each, in order."""
        driver = self.computes["host1"].driver
        spawn = driver.spawn
        left = list(errors)
        raised: list[str] = []

        def failing(*args: Any, **kw: Any) -> Any:
            if left:
                raised.append(left.pop(0))
                raise RuntimeError(raised[-1])
            return spawn(*args, **kw)

        driver.spawn = failing
        self.addCleanup(setattr, driver, "spawn", spawn)
        return raised

    def servers(self) -> list[dict]:
        found: list[dict] = self.admin_api.get_servers(
            search_opts={"all_tenants": 1})
        return found

    def test_the_race_is_booted_again(self) -> None:
        raised = self.fail_spawns(f"{base.HARNESS_RACE} mid-transaction")
        server = self.boot()
        self.assertEqual("ACTIVE", server["status"])
        self.assertEqual(1, len(raised))
        # The failed build was deleted: only the one booted again is left.
        self.assertEqual([server["id"]], [s["id"] for s in self.servers()])

    def test_another_error_fails_the_test(self) -> None:
        raised = self.fail_spawns("the disk is on fire")
        failure = self.assertRaises(self.failureException, self.boot)
        self.assertIn("went to ERROR, not ACTIVE (attempt 1)",
                      str(failure))
        self.assertEqual(1, len(raised))

    def test_the_race_every_time_still_fails(self) -> None:
        raised = self.fail_spawns(*[base.HARNESS_RACE] * base.BOOT_ATTEMPTS)
        failure = self.assertRaises(self.failureException, self.boot)
        self.assertIn(f"(attempt {base.BOOT_ATTEMPTS})", str(failure))
        self.assertEqual(base.BOOT_ATTEMPTS, len(raised))
