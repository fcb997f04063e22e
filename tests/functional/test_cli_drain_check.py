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

"""``openstack drain host check`` through the real shell, against Nova's
real API, scheduler, computes (MediumFakeDriver-sized: 8192 MB each) and
placement: the prediction is asserted, and for anti-affinity compared with
where ``drain host migrate`` really puts the server."""
import json
import random
from typing import Any
from unittest import mock

from tests.functional import migrate_base


class CheckTestBase(migrate_base.MigrateTestBase):
    def flavor(self, name: str, ram: int) -> str:
        # An ID of our own: Nova lists flavors by ID, and the harness boots
        # the first one by default (integrated_helpers._build_server); a
        # random UUID starting with 0 would sort before m1.tiny's "1".
        found = self.admin_api.post_flavor({"flavor": {
            "name": name, "ram": ram, "vcpus": 1, "disk": 1,
            "id": f"ndf-{name}"}})
        return str(found["id"])

    def check(self, *argv: str, rc: int = 0
              ) -> tuple[dict[str, dict[str, Any]], str]:
        """``drain host check ... -f json``: rows by server, and stderr."""
        run = self.cli("drain", "host", "check", *argv, "-f", "json")
        self.assertEqual(rc, run.rc, run)
        self.assertNotIn("Traceback", run.stderr)
        return {r["Server"]: r for r in json.loads(run.stdout)}, run.stderr


class FitTest(CheckTestBase):
    def test_a_server_larger_than_the_room_left_does_not_fit(self) -> None:
        big, half = self.flavor("big", 6000), self.flavor("half", 3000)
        large = self.boot_on("host1", flavor_id=big)
        small = self.boot_on("host1")
        for host in ("host2", "host3"):
            self.boot_on(host, flavor_id=half)

        rows, stderr = self.check("host1", rc=1)
        self.assertEqual(["Host", "Server", "Name", "Move", "Fits",
                          "Candidates", "Destination", "Why"],
                         list(rows[large["id"]]))
        row = rows[large["id"]]
        self.assertEqual(("live", "no", 0, ""), (
            row["Move"], row["Fits"], row["Candidates"],
            row["Destination"]))
        self.assertTrue(row["Why"].startswith("no room left: MEMORY_MB: "
                                              "needs 6000"), row["Why"])
        row = rows[small["id"]]
        self.assertEqual(("yes", 2), (row["Fits"], row["Candidates"]))
        self.assertIn(row["Destination"], ("host2", "host3"))
        self.assertIn("nowhere to go: 1 server(s)", stderr)
        self.assertIn("not modelled: NUMA", stderr)
        # It reads only: nothing moved, no drain started.
        self.assertEqual("host1", self.server(large)["OS-EXT-SRV-ATTR:host"])
        shown = self.cli_json("drain", "host", "show", "host1")
        self.assertEqual("Active", shown[0]["Phase"])

    def test_bad_input_is_one_line(self) -> None:
        run = self.cli("drain", "host", "check", "nosuch")
        self.assertEqual(1, run.rc, run)
        self.assertIn("unknown host(s) nosuch", run.stderr)
        run = self.cli("drain", "host", "check", "--az", "nowhere")
        self.assertEqual(1, run.rc, run)
        self.assertIn("availability zone 'nowhere'", run.stderr)
        self.assertNotIn("Traceback", run.stderr)


class AntiAffinityTest(CheckTestBase):
    def test_prediction_matches_migrate(self) -> None:
        anti = self.group("spread", "anti-affinity")
        mover = self.boot_in(anti, "host1")
        self.boot_in(anti, "host2")
        # host3 is busier, so the weigher alone would pick host2: only the
        # anti-affinity rule keeps the mover off it.
        for _ in range(2):
            self.boot_on("host3")

        rows, _ = self.check("host1")
        row = rows[mover["id"]]
        self.assertEqual(("yes", 1, "host3"), (
            row["Fits"], row["Candidates"], row["Destination"]))

        self.start_drain("host1")
        moved, _run = self.migrate("host1")
        self.assertEqual("host3", moved[mover["id"]]["Destination"])
        self.assertEqual("host3", self.server(mover)["OS-EXT-SRV-ATTR:host"])


class MigrateRefusesTest(CheckTestBase):
    HOSTS = ("host1", "host2")

    def setUp(self) -> None:
        super().setUp()
        big = self.flavor("big", 6000)
        self.large = self.boot_on("host1", flavor_id=big)
        self.small = self.boot_on("host1")
        self.boot_on("host2", flavor_id=self.flavor("half", 3000))
        self.start_drain("host1")

    def test_refuses_without_allow_partial(self) -> None:
        run = self.cli("drain", "host", "migrate", "host1", "--yes", "-f",
                       "json")
        self.assertEqual(1, run.rc, run)
        self.assertIn("nothing moved: 1 server(s) have nowhere to go",
                      run.stderr)
        self.assertIn(self.large["id"], run.stderr)
        self.assertNotIn("Traceback", run.stderr)
        for server in (self.large, self.small):
            self.assertEqual([], self.records(server))

    def test_dry_run_shows_the_prediction(self) -> None:
        run = self.cli("drain", "host", "migrate", "host1", "--dry-run",
                       "-f", "json")
        self.assertEqual(0, run.rc, run)
        rows = {r["Server"]: r for r in json.loads(run.stdout)}
        self.assertEqual(
            {self.large["id"]: ("planned", "no", 0, ""),
             self.small["id"]: ("planned", "yes", 1, "host2")},
            {s: (r["Result"], r["Fits"], r["Candidates"], r["Destination"])
             for s, r in rows.items()})
        self.assertIn("a run without --dry-run would stop", run.stderr)

    def test_allow_partial_moves_the_rest(self) -> None:
        rows, _run = self.migrate("host1", "--allow-partial", rc=1)
        self.assertEqual(("moved", "host2"), (
            rows[self.small["id"]]["Result"],
            rows[self.small["id"]]["Destination"]))
        self.assertEqual("host2", self.server(self.small)[
            "OS-EXT-SRV-ATTR:host"])
        self.assertEqual("host1", self.server(self.large)[
            "OS-EXT-SRV-ATTR:host"])


class DifferentialTest(CheckTestBase):
    """check's prediction against what migrate really does, on small
    random clouds: the same servers fit. Nova weighs by RAM alone here, as
    the simulation does (Nova's other default weighers can break a tie
    the other way, and change a tight packing)."""

    FLAVORS = (1024, 2048, 3072, 4096)

    def setUp(self) -> None:
        self.flags(weight_classes=["nova.scheduler.weights.ram.RAMWeigher"],
                   group="filter_scheduler")
        super().setUp()
        self.flavors = {ram: self.flavor(f"r{ram}", ram)
                        for ram in self.FLAVORS}
        self.booted = 0

    def fill(self, rng: random.Random, host: str, up_to: int) -> None:
        used = 0
        while True:
            ram = rng.choice(self.FLAVORS)
            if used + ram > up_to:
                return
            # Named in boot order: migrate moves a host's servers by name.
            self.booted += 1
            self.boot_on(host, flavor_id=self.flavors[ram],
                         name=f"s{self.booted:02d}")
            used += ram

    def compare(self, seed: int) -> None:
        rng = random.Random(seed)
        for host in ("host2", "host3"):
            self.fill(rng, host, rng.randint(3072, 7168))
        self.fill(rng, "host1", rng.randint(5120, 7680))

        predicted, _ = self.check("host1", rc=mock.ANY)
        self.start_drain("host1")
        run = self.cli("drain", "host", "migrate", "host1", "--yes",
                       "--allow-partial", "--concurrency", "1", "--retries",
                       "0", "-f", "json")
        self.assertNotIn("Traceback", run.stderr)
        moved = {r["Server"]: r["Destination"] for r in json.loads(run.stdout)
                 if r["Result"] == "moved"}
        fits = {s: r["Destination"] for s, r in predicted.items()
                if r["Fits"] == "yes"}
        self.assertEqual(sorted(fits), sorted(moved),
                         f"seed {seed}: predicted {fits}, moved {moved}")
        # The seeds are chosen so that some fit and some do not.
        self.assertTrue(0 < len(fits) < len(predicted), predicted)

    def test_seed_4(self) -> None:
        self.compare(4)

    def test_seed_11(self) -> None:
        self.compare(11)

    def test_seed_35(self) -> None:
        self.compare(35)


class HeadroomTest(CheckTestBase):
    HOSTS = ("host1", "host2")

    def test_free_room_per_host(self) -> None:
        self.boot_on("host1", flavor_id=self.flavor("r1000", 1000))
        rows = {r["Host"]: r for r in self.cli_json(
            "drain", "report", "--headroom", "--by", "host")}
        self.assertEqual(["host1", "host2"], sorted(rows))
        used = {h: r["MEMORY_MB Capacity"] - r["MEMORY_MB Free"]
                for h, r in rows.items()}
        self.assertEqual({"host1": 1000, "host2": 0}, used)
        self.assertEqual((1, 1), (rows["host1"]["Hosts"],
                                  rows["host1"]["Nodes"]))
