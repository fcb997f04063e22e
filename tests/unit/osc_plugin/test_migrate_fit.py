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

"""``drain host migrate`` runs the check first: refuse, warn, predict."""
import argparse
from unittest import mock

import fixtures
from osc_lib import exceptions

from nova_drain_filters import fit
from nova_drain_filters.migration import plan
from osc_plugin.v1 import migrate
from tests.unit.osc_plugin import fakes

HOMELESS = fit.Verdict(fit.Need(plan.Step("h1", "s1", "web", plan.Action.LIVE),
                                {"VCPU": 64}), 0, why=fit.Why.TOO_BIG,
                       detail="VCPU: needs 64, at most 16 on any host")
FITS = fit.Verdict(fit.Need(plan.Step("h1", "s2", "db", plan.Action.COLD),
                            {"VCPU": 1}), 3, destination="h2")


class TestFitNotes(fakes.CommandTestCase):
    cls, prog = migrate.MigrateHost, "openstack drain host migrate"

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            migrate.check, "picture", return_value=(["h1"], mock.Mock())))
        self.useFixture(fixtures.MockPatchObject(
            migrate.fit_check, "check",
            return_value=fit.Result([HOMELESS, FITS], [])))
        self.cmd = self.command(mock.Mock())
        self.cmd.hosts = ["h1"]

    def notes(self, dry_run: bool = False,
              allow_partial: bool = False) -> list[str]:
        notes: list[str] = self.cmd.fit_notes(argparse.Namespace(
            dry_run=dry_run, allow_partial=allow_partial))
        return notes

    def test_refuses_a_run(self) -> None:
        error = self.assertRaises(exceptions.CommandError, self.notes)
        self.assertEqual(
            "nothing moved: 1 server(s) have nowhere to go ('openstack "
            "drain host check' shows why): h1: web (s1): larger than any "
            "host: VCPU: needs 64, at most 16 on any host; pass "
            "--allow-partial to move the rest anyway", str(error))

    def test_dry_run_and_allow_partial_only_say_so(self) -> None:
        [note] = self.notes(dry_run=True)
        self.assertTrue(note.startswith("a run without --dry-run would "
                                        "stop: nothing moved"))
        [note] = self.notes(allow_partial=True)
        self.assertTrue(note.startswith("nowhere to go (--allow-partial): "
                                        "h1: web (s1)"))

    def test_dry_run_rows_carry_the_prediction(self) -> None:
        self.notes(dry_run=True)
        rows = self.cmd.predicted([
            ("h1", "s1", "web", "live", "planned", "", ""),
            ("h1", "s2", "db", "cold", "planned", "", "")])
        self.assertEqual(
            [("h1", "s1", "web", "live", "planned", "", "", "no", 0,
              "larger than any host: VCPU: needs 64, at most 16 on any "
              "host"),
             ("h1", "s2", "db", "cold", "planned", "h2", "", "yes", 3, "")],
            rows)
        self.assertEqual(10, len(migrate.DRY_RUN_COLUMNS))
