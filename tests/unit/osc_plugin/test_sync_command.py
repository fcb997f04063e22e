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

"""``openstack drain sync`` against fake Nova, Ironic and placement."""
from typing import Any

from osc_lib import exceptions

from nova_drain_filters import traits
from osc_plugin.v1 import sync
from tests.unit import drain_fakes as df
from tests.unit import ironic_fakes
from tests.unit.osc_plugin import fakes

BM = traits.BAREMETAL_UNAVAILABLE
NODE = fakes.uuid(0x7)
WHY = "baremetal: provision_state=clean wait"


def sync_cloud() -> fakes.FakeDrainClient:
    """One Ironic node, cleaning: the sync marks it on both sides."""
    log: list[tuple[Any, ...]] = []
    ironic = ironic_fakes.FakeSyncIronic(log, [ironic_fakes.ironic_node(
        NODE, provision_state="clean wait")])
    placement = ironic_fakes.FakeSyncPlacement(log)
    return fakes.FakeDrainClient(df.FakeNova([df.hv(NODE)]), placement,
                                 ironic, has_ironic=True)


class TestRunSync(fakes.CommandTestCase):
    cls, prog = sync.RunSync, "openstack drain sync"

    def test_columns(self) -> None:
        self.assertEqual(("Target", "UUID", "Trait", "Action", "Why",
                          "Result"), sync.COLUMNS)

    def test_dry_run(self) -> None:
        client = sync_cloud()
        columns, rows = self.take(client, "--dry-run", "--page-size", "50")
        self.assertEqual(sync.COLUMNS, columns)
        self.assertEqual([("ironic", NODE, BM, "add", WHY, "planned"),
                          ("placement", NODE, BM, "add", WHY, "planned")],
                         rows)
        self.assertEqual([50], client.ironic.page_sizes)
        self.assertEqual([], [e for e in client.ironic.log if e[0] in (
            "ironic.add_trait", "placement.update", "placement.ensure_trait")])
        self.assertRegex(self.app.stderr.getvalue(),
                         r"^sync: 1 compute nodes, 1 Ironic nodes, 2 change\(s\)"
                         r", 0 failure\(s\), \d+ requests\n$")

    def test_applies(self) -> None:
        client = sync_cloud()
        _, rows = self.take(client)
        self.assertEqual([("ironic", NODE, BM, "add", WHY, "done"),
                          ("placement", NODE, BM, "add", WHY, "done")], rows)
        self.assertIn(("ironic.add_trait", NODE, BM), client.ironic.log)
        self.assertIn(("placement.update", NODE, {BM}, set()),
                      client.ironic.log)

    def test_failure_exits_1(self) -> None:
        client = sync_cloud()
        client.ironic.failures[(NODE, BM)] = [
            ironic_fakes.api_error(500, "no way")]
        self.assertEqual(1, self.run_cmd(client))
        self.assertEqual(f"ironic {NODE} {BM} add {WHY} failed: ironic PUT /x: "
                         "HTTP 500: no way\n", self.app.stdout.getvalue())
        self.assertIn("0 change(s), 1 failure(s)", self.app.stderr.getvalue())

    def test_failure_rows(self) -> None:
        client = sync_cloud()
        client.ironic.failures[(NODE, BM)] = [
            ironic_fakes.api_error(500, "no way")]
        _, rows = self.take(client)
        self.assertEqual([("ironic", NODE, BM, "add", WHY,
                           "failed: ironic PUT /x: HTTP 500: no way")], rows)

    def test_exit_code(self) -> None:
        self.assertEqual(3, self.run_cmd(sync_cloud(), "--exit-code",
                                         "--dry-run"))
        self.assertEqual(0, self.run_cmd(sync_cloud(), "--dry-run"))
        client = fakes.FakeDrainClient(
            df.FakeNova(), ironic_fakes.FakeSyncPlacement([]),
            ironic_fakes.FakeSyncIronic([]))
        self.assertEqual(0, self.run_cmd(client, "--exit-code"))

    def test_watch_prints_each_pass_until_interrupted(self) -> None:
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if len(slept) == 2:
                raise KeyboardInterrupt

        self.patch(sync.time, "sleep", sleep)
        client = sync_cloud()
        columns, rows = self.take(client, "--watch", "--interval", "7",
                                  "--dry-run")
        self.assertEqual((sync.COLUMNS, []), (columns, rows))
        self.assertEqual([7, 7], slept)
        line = f"ironic  {NODE}  {BM}  add  {WHY}  planned\n"
        self.assertEqual(2, self.app.stdout.getvalue().count(line))
        self.assertEqual(2, self.app.stderr.getvalue().count("sync: "))

    def test_api_error_while_gathering(self) -> None:
        client = sync_cloud()
        client.ironic.error = ironic_fakes.api_error(503, "down")
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertEqual("ironic PUT /x: HTTP 503: down", str(exc))
