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

"""``openstack drain sync`` and the Ironic rule of ``stale list``: the real
openstack shell, Nova's harness and a real Ironic.

Driver: ``FakeIronicDriver``, no deploy needed (Nova's own: test_ironic_driver_*).
"""
import json
import os
import signal
import sys
import time
from pathlib import Path

import fixtures
import testtools

from nova_drain_filters import traits
from tests.functional import baremetal_base
from tests.functional import base
from tests.functional import cli_harness
from tests.functional.services import process

BM = traits.BAREMETAL_UNAVAILABLE
STALE = traits.STALE_NODE


class SyncTest(cli_harness.CliTestBase,
               baremetal_base.BaremetalTestBase):
    NODES = {"a": "available", "b": "maintenance", "c": "available"}

    def test_sync_then_placement_keeps_them_out(self) -> None:
        # c is deleted from Ironic after Nova learned of it.
        self.ironic.delete_node(self.nodes["c"])

        stale = self.cli_json("drain", "stale", "list", "--reason",
                              "ironic_node_missing")
        self.assertEqual([self.nodes["c"]], [r["UUID"] for r in stale])
        self.assertEqual("ironic", stale[0]["Hypervisor Type"])

        dry = self.cli("drain", "sync", "--dry-run", "-f", "json")
        self.assertEqual(0, dry.rc, dry.stderr)
        planned = {(r["Target"], r["UUID"], r["Trait"], r["Action"])
                   for r in json.loads(dry.stdout)}
        expected = {("ironic", self.nodes["b"], BM, "add"),
                    ("placement", self.nodes["b"], BM, "add"),
                    ("placement", self.nodes["c"], STALE, "add")}
        self.assertEqual(expected, planned)
        self.assertEqual([], self.ironic.get_traits(self.nodes["b"]))

        run = self.cli("drain", "sync", "-f", "json")
        self.assertEqual(0, run.rc, run.stderr)
        self.assertEqual(expected, {
            (r["Target"], r["UUID"], r["Trait"], r["Action"])
            for r in json.loads(run.stdout)})
        self.assertIn("sync: 3 compute nodes, 2 Ironic nodes, 3 change(s), "
                      "0 failure(s)", run.stderr)
        self.assertEqual([BM], self.ironic.get_traits(self.nodes["b"]))
        self.assertIn(BM, self._get_provider_traits(self.nodes["b"]))
        self.assertIn(STALE, self._get_provider_traits(self.nodes["c"]))
        self.assertEqual([], self.cli_json("drain", "sync"))
        # --yes, as every changing command takes it (issue 21 finding 5).
        self.assertEqual([], self.cli_json("drain", "sync", "--yes"))

        # The scheduler's view would reject b anyway; placement now keeps
        # both b and c out of the candidates before any filter runs.
        for _ in range(3):
            self.assertEqual("a", self.node_of(self.boot()))
        log = self.stdlog.logger.output
        self.assertIn("%21CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE", log)

        # b comes back: the trait goes from Ironic and placement.
        self.ironic.set_maintenance(self.nodes["b"], False)
        back = self.cli_json("drain", "sync")
        self.assertEqual({("ironic", "remove"), ("placement", "remove")},
                         {(r["Target"], r["Action"]) for r in back})
        self.assertEqual([], self.ironic.get_traits(self.nodes["b"]))
        self.assertNotIn(BM, self._get_provider_traits(self.nodes["b"]))

    def test_untrusted_listing_is_not_believed(self) -> None:
        # The listing lacks two of the three nodes Nova knows, as with a
        # token that sees only its project's nodes.
        self.ironic.delete_node(self.nodes["a"])
        self.ironic.delete_node(self.nodes["c"])
        counts = ("the Ironic listing lacks 2 of the 3 Ironic compute nodes "
                  "Nova knows (at most 1 may be missing), more than "
                  "--max-missing-fraction 0.1 ([drain_filters] "
                  "ironic_missing_max_fraction) allows")

        run = self.cli("drain", "sync")
        self.assertEqual(1, run.rc)
        [line] = run.stderr.splitlines()
        self.assertTrue(line.startswith("refusing to sync: " + counts), line)
        self.assertEqual([], self.ironic.get_traits(self.nodes["b"]))
        self.assertNotIn(STALE, self._get_provider_traits(self.nodes["c"]))

        listed = self.cli("drain", "stale", "list", "-f", "json")
        self.assertEqual(0, listed.rc, listed.stderr)
        self.assertEqual([], json.loads(listed.stdout))
        self.assertTrue(listed.stderr.startswith(
            "not reporting ironic_node_missing: " + counts), listed.stderr)

        clear = self.cli("drain", "stale", "clear", "--all", "--yes")
        self.assertEqual(1, clear.rc)
        self.assertTrue(clear.stderr.startswith(
            "refusing to clear anything: " + counts), clear.stderr)

        # The operator knows the nodes are gone and says so.
        marked = self.cli_json("drain", "sync", "--max-missing-fraction",
                               "0.7")
        self.assertEqual({self.nodes["a"], self.nodes["c"]},
                         {r["UUID"] for r in marked if r["Trait"] == STALE})

    def test_bad_interval(self) -> None:
        # Bad arguments exit 2 before any request; a huge interval used to
        # end --watch after one pass with 'timestamp too large'.
        for value in ("1", "99999999999999999999", "86401"):
            bad = self.cli("drain", "sync", "--watch", "--interval", value)
            self.assertEqual(2, bad.rc, bad.stderr)
            self.assertIn(f"argument --interval: --interval '{value}': must "
                          "be an integer from 5 to 86400", bad.stderr)


class NoIronicSyncTest(cli_harness.CliTestBase,
                       base.RebalanceDuplicateMixin):
    """A cloud whose catalog has no baremetal endpoint."""

    def test_sync_marks_the_duplicate(self) -> None:
        dry = self.cli_json("drain", "sync", "--dry-run")
        self.assertEqual([("placement", self.dup_uuid, STALE, "add",
                           "planned")], [(r["Target"], r["UUID"], r["Trait"],
                                          r["Action"], r["Result"])
                                         for r in dry])
        run = self.cli("drain", "sync", "-f", "json")
        self.assertEqual(0, run.rc, run.stderr)
        self.assertIn("sync: 4 compute nodes, no Ironic, 1 change(s), "
                      "0 failure(s)", run.stderr)
        self.assertIn(STALE, self._get_provider_traits(self.dup_uuid))
        live = self.compute_node("host2", "node-x").uuid
        self.assertNotIn(STALE, self._get_provider_traits(live))
        self.assertEqual([], self.cli_json("drain", "sync"))


#: Run a command with SIGINT at its default, as from an operator's
#: terminal. A runner started in the background (``cmd &`` without job
#: control) ignores SIGINT, every child inherits that through exec, and
#: Python then installs no KeyboardInterrupt handler: Ctrl-C would be lost.
DEFAULT_SIGINT = (sys.executable, "-c",
                  "import os, signal, sys; "
                  "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.argv[1], sys.argv[1:])")


class WatchTest(testtools.TestCase):
    """``sync --watch`` as a process, with Nova unreachable, and a signal."""

    def test_failed_passes_back_off_until_a_signal(self) -> None:
        closed = process.free_port()  # nothing listens there
        log = Path(self.useFixture(fixtures.TempDir()).path) / "watch.log"
        openstack = Path(sys.executable).parent / "openstack"
        watch = process.ServiceProcess(
            "drain sync --watch",
            [*DEFAULT_SIGINT, str(openstack), "--os-auth-type", "none",
             "drain", "sync", "--watch", "--interval", "5"],
            log, env=process.child_env({
                "OS_COMPUTE_ENDPOINT_OVERRIDE":
                    f"http://127.0.0.1:{closed}/v2.1",
                "OS_PLACEMENT_ENDPOINT_OVERRIDE": f"http://127.0.0.1:{closed}",
            }))
        self.addCleanup(watch.stop)
        watch.start()
        # Two failed passes, the second after a doubled wait: the process
        # is still running (wait_ready fails if it exits).
        watch.wait_ready(lambda: "sync: pass failed (2 in a row)" in
                         log.read_text(), timeout=120)
        os.kill(watch.pid or 0, signal.SIGINT)
        deadline = time.monotonic() + 30
        while watch.returncode() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(130, watch.returncode(), watch.log_tail())
        lines = [line for line in log.read_text().splitlines()
                 if line.startswith("sync: ")]
        self.assertEqual(2, len(lines), lines)
        # The first request is the compute client's version check (GET /).
        # keystoneauth of Nova 31's set reports the closed port as a failed
        # endpoint discovery, newer ones as a connect failure.
        self.assertRegex(lines[0], r"^sync: pass failed \(1 in a row\): "
                         r"nova GET \S+: (ConnectFailure|EndpointNotFound): ")
        self.assertTrue(lines[0].endswith("; next pass in 10 s"), lines[0])
        self.assertTrue(lines[1].endswith("; next pass in 20 s"), lines[1])
        self.assertNotIn("Traceback", log.read_text())
