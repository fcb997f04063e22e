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

from nova_drain_filters import sync as nd_sync
from nova_drain_filters import traits
from nova_drain_filters.clients import http
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
        # Placement first: that is what keeps the node out.
        self.assertEqual([("placement", NODE, BM, "add", WHY, "done"),
                          ("ironic", NODE, BM, "add", WHY, "done")], rows)
        self.assertIn(("ironic.add_trait", NODE, BM), client.ironic.log)
        self.assertIn(("placement.update", NODE, {BM}, set()),
                      client.ironic.log)

    def test_yes_is_accepted_and_changes_nothing_else(self) -> None:
        # Issue 21 finding 5: every changing command takes --yes. The sync
        # never asks, with or without it, terminal or not.
        self.assertEqual((False, True), (self.parse().yes,
                                         self.parse("--yes").yes))
        for argv in ((), ("--yes",)):
            client = sync_cloud()
            _, rows = self.take(client, *argv)
            self.assertEqual(["done", "done"], [r[-1] for r in rows], argv)
            self.assertNotIn("[y/N]", self.app.stderr.getvalue())

    def test_failure_exits_1(self) -> None:
        client = sync_cloud()
        client.ironic.failures[(NODE, BM)] = [
            ironic_fakes.api_error(400, "no way")]
        self.assertEqual(1, self.run_cmd(client))
        self.assertEqual(f"placement {NODE} {BM} add {WHY} done\n"
                         f"ironic {NODE} {BM} add {WHY} failed: ironic PUT /x: "
                         "HTTP 400: no way\n", self.app.stdout.getvalue())
        self.assertIn("1 change(s), 1 failure(s)", self.app.stderr.getvalue())

    def test_failure_rows(self) -> None:
        client = sync_cloud()
        client.ironic.failures[(NODE, BM)] = [
            ironic_fakes.api_error(400, "no way")]
        _, rows = self.take(client)
        # Kept out by placement though Ironic refused; the next run
        # writes the node's trait.
        self.assertEqual([("placement", NODE, BM, "add", WHY, "done"),
                          ("ironic", NODE, BM, "add", WHY,
                           "failed: ironic PUT /x: HTTP 400: no way")], rows)

    def test_exit_code(self) -> None:
        self.assertEqual(3, self.run_cmd(sync_cloud(), "--exit-code",
                                         "--dry-run"))
        self.assertEqual(0, self.run_cmd(sync_cloud(), "--dry-run"))
        client = fakes.FakeDrainClient(
            df.FakeNova(), ironic_fakes.FakeSyncPlacement([]),
            ironic_fakes.FakeSyncIronic([]))
        self.assertEqual(0, self.run_cmd(client, "--exit-code"))

    def sleeps(self, stop_after: int,
               between: Any = None) -> list[float]:
        """Patch the watch's sleep: record waits, Ctrl-C on the last one."""
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if between is not None:
                between(len(slept))
            if len(slept) == stop_after:
                raise KeyboardInterrupt

        self.patch(sync.time, "sleep", sleep)
        return slept

    def test_watch_prints_each_pass_until_interrupted(self) -> None:
        slept = self.sleeps(2)
        client = sync_cloud()
        # Only a signal ends it; cliff turns KeyboardInterrupt into exit 130.
        self.assertRaises(KeyboardInterrupt, self.take, client, "--watch",
                          "--interval", "7", "--dry-run")
        self.assertEqual([7, 7], slept)
        line = f"ironic  {NODE}  {BM}  add  {WHY}  planned\n"
        self.assertEqual(2, self.app.stdout.getvalue().count(line))
        self.assertEqual(2, self.app.stderr.getvalue().count("sync: 1 compute "
                                                             "nodes"))

    def test_watch_goes_on_after_failures_and_backs_off(self) -> None:
        client = sync_cloud()
        client.nova.errors["hypervisors"] = http.ApiError(
            "nova", "GET", "/os-hypervisors/detail", None,
            "ConnectFailure: Unable to establish connection")

        def recover(passes: int) -> None:
            if passes == 3:
                del client.nova.errors["hypervisors"]

        slept = self.sleeps(5, recover)
        self.assertRaises(KeyboardInterrupt, self.take, client, "--watch",
                          "--interval", "7")
        # Three failed passes wait 14, 28, 56 s; a good one resets to 7.
        self.assertEqual([14, 28, 56, 7, 7], slept)
        stderr = self.app.stderr.getvalue().splitlines()
        self.assertEqual(
            "sync: pass failed (1 in a row): nova GET /os-hypervisors/detail: "
            "ConnectFailure: Unable to establish connection; next pass in "
            "14 s", stderr[0])
        self.assertIn("sync: pass failed (3 in a row)", stderr[2])
        self.assertTrue(stderr[3].startswith(
            "sync: 1 compute nodes, 1 Ironic nodes, 2 change(s)"), stderr[3])
        self.assertEqual(5, len(stderr))  # one summary line per pass
        self.assertIn(("ironic.add_trait", NODE, BM), client.ironic.log)

    def test_backoff(self) -> None:
        self.assertEqual([60, 120, 240, 480, 900, 900],
                         [nd_sync.backoff(60, n) for n in range(6)])
        self.assertEqual(86400, nd_sync.backoff(86400, 3))
        self.assertEqual(900, nd_sync.backoff(5, 10 ** 6))

    def test_without_ironic_syncs_what_exists(self) -> None:
        # A KVM cloud: no baremetal endpoint, one duplicate record.
        dup, live = fakes.uuid(0xD), fakes.uuid(0xE)
        nova = df.FakeNova([df.hv(live, "node-x", "c2", "QEMU"),
                            df.hv(dup, "node-x", "c1", "QEMU")])
        client = fakes.FakeDrainClient(
            nova, ironic_fakes.FakeSyncPlacement([]), None, has_ironic=False)
        for argv, result in ((["--dry-run"], "planned"), ([], "done")):
            _, rows = self.take(client, *argv)
            self.assertEqual(1, len(rows), rows)
            self.assertEqual(("placement", traits.STALE_NODE, "add", result),
                             (rows[0][0], rows[0][2], rows[0][3], rows[0][5]))
            self.assertIn("sync: 2 compute nodes, no Ironic, 1 change(s)",
                          self.app.stderr.getvalue())

    def test_ironic_lookup_failure_is_an_error(self) -> None:
        client = sync_cloud()
        error = exceptions.CommandError("cannot look up the baremetal "
                                        "(Ironic) endpoint: ConnectFailure: x")

        def has_ironic() -> bool:
            raise error

        client.has_ironic = has_ironic  # type: ignore[method-assign]
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertIs(error, exc)

    def test_untrusted_listing_refused(self) -> None:
        # Nova knows three Ironic nodes; the token lists one.
        client = sync_cloud()
        client.nova.hypervisor_list += [df.hv(fakes.uuid(0x8)),
                                        df.hv(fakes.uuid(0x9))]
        client.scope = "the token is scoped to project demo"
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertEqual(
            "refusing to sync: the Ironic listing lacks 2 of the 3 Ironic "
            "compute nodes Nova knows (at most 1 may be missing), more than "
            "--max-missing-fraction 0.1 ([drain_filters] "
            "ironic_missing_max_fraction) allows: the credentials may not "
            "see every node (the token is scoped to project demo); if the "
            "nodes really are gone, raise --max-missing-fraction", str(exc))
        self.assertEqual([], [e for e in client.ironic.log if e[0] in (
            "ironic.add_trait", "placement.update", "placement.ensure_trait")])
        # The operator decides the nodes really are gone.
        _, rows = self.take(client, "--max-missing-fraction", "0.7")
        self.assertEqual(4, len(rows))
        self.assertEqual(2, [r[2] for r in rows].count(traits.STALE_NODE))

    def test_watch_untrusted_listing_is_a_failed_pass(self) -> None:
        client = sync_cloud()
        client.nova.hypervisor_list.append(df.hv(fakes.uuid(0x8)))
        client.ironic.nodes = []
        slept = self.sleeps(2)
        self.assertRaises(KeyboardInterrupt, self.take, client, "--watch")
        self.assertEqual([120, 240], slept)
        self.assertIn("sync: pass failed (2 in a row): refusing to sync: the "
                      "Ironic listing lacks 2 of the 2", self.app.stderr.getvalue())

    def test_api_error_while_gathering(self) -> None:
        client = sync_cloud()
        client.ironic.error = ironic_fakes.api_error(503, "down")
        exc = self.assertRaises(exceptions.CommandError, self.take, client)
        self.assertEqual("ironic PUT /x: HTTP 503: down", str(exc))
