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

"""``openstack drain host check``: parser, rows, summary, exit codes."""
from unittest import mock

import fixtures
from osc_lib import exceptions

from nova_drain_filters import fit
from nova_drain_filters.clients import compute
from nova_drain_filters.migration import plan
from osc_plugin.v1 import check
from tests.unit import ironic_fakes
from tests.unit.osc_plugin import fakes

AGGS = [compute.Aggregate(1, "rack1", ("c1", "c2"), "az1"),
        compute.Aggregate(2, "empty", (), "az2")]


def verdict(server: str, dest: str = "", why: fit.Why | None = None,
            detail: str = "", action: plan.Action = plan.Action.LIVE,
            stays: plan.Why | None = None) -> fit.Verdict:
    step = plan.Step("c1", server, "n-" + server, action, stays,
                     "g (1 other member(s))" if stays else "")
    return fit.Verdict(fit.Need(step, {"MEMORY_MB": 512}),
                       2 if dest else 0, dest, why, detail)


class TestCheck(fakes.CommandTestCase):
    cls, prog = check.CheckHost, "openstack drain host check"

    def simulate(self, *verdicts: fit.Verdict) -> None:
        result = fit.Result(list(verdicts), [fit.ClassRoom("MEMORY_MB", 4096,
                                                           2048, 1024)])
        self.useFixture(fixtures.MockPatchObject(
            check, "picture", return_value=(["c1"], mock.sentinel.cloud)))
        self.useFixture(fixtures.MockPatchObject(
            check.fit_check, "check", return_value=result))

    def test_rows_and_exit_0_when_all_fit(self) -> None:
        self.simulate(verdict("a", "c3"), verdict(
            "b", why=fit.Why.UNMOVABLE, action=plan.Action.NONE,
            stays=plan.Why.AFFINITY))
        columns, rows = self.take(mock.Mock(), "c1")
        self.assertEqual(check.COLUMNS, columns)
        self.assertEqual(
            [("c1", "a", "n-a", "live", "yes", 2, "c3", ""),
             ("c1", "b", "n-b", "unmovable", "no", 0, "",
              "in affinity group: g (1 other member(s))")], rows)
        self.assertEqual(0, self.run_cmd(mock.Mock(), "c1"))
        out = self.app.stderr.getvalue()  # -f value: the summary on stderr
        self.assertIn("MEMORY_MB: free 2048 of 4096 (50.0%) before, 1024 "
                      "(25.0%) after", out)
        self.assertIn("nowhere to go: 0 server(s)", out)
        self.assertIn("not modelled: NUMA", out)

    def test_exit_1_when_one_does_not_fit(self) -> None:
        self.simulate(verdict("a", why=fit.Why.NO_ROOM,
                              detail="MEMORY_MB: needs 512, at most 0 free "
                                     "on any host"))
        _, [row] = self.take(mock.Mock(), "c1")
        self.assertEqual(("no", "no room left: MEMORY_MB: needs 512, at "
                          "most 0 free on any host"), (row[4], row[7]))
        self.assertEqual(check.NO_FIT_EXIT, self.run_cmd(mock.Mock(), "c1"))
        self.assertIn("nowhere to go: 1 server(s)\n  c1: n-a (a)",
                      self.app.stderr.getvalue())


class TestUntrusted(fakes.CommandTestCase):
    def test_refused_as_the_report_refuses_it(self) -> None:
        client = fakes.stale_cloud()
        client.ironic = ironic_fakes.FakeIronicClient([])
        error = self.assertRaises(exceptions.CommandError, check.picture,
                                  client, ["c1"], [], [], 0.5)
        self.assertTrue(str(error).startswith(
            "refusing to check hosts: the Ironic listing lacks"), error)


class TestResolve(fakes.CommandTestCase):
    cls, prog = check.CheckHost, "openstack drain host check"

    def resolve(self, hosts: list[str], aggs: tuple[str, ...] = (),
                zones: tuple[str, ...] = ()) -> list[str]:
        return check.resolve(hosts, aggs, zones, {"c1", "c2", "c3"}, AGGS)

    def test_hosts_aggregates_and_zones_each_once(self) -> None:
        self.assertEqual(["c3", "c1", "c2"],
                         self.resolve(["c3"], ("rack1",), ("az1",)))

    def test_one_line_errors(self) -> None:
        for args, text in (
                ((["c9"],), "unknown host(s) c9: no compute node record"),
                (([], ("empty",)), "aggregate 'empty': no such aggregate, or "
                                  "it has no host"),
                (([], (), ("az2",)), "availability zone 'az2': no such "
                                    "availability zone, or it has no host"),
                (([],), "name at least one host, --aggregate or --az")):
            error = self.assertRaises(exceptions.CommandError, self.resolve,
                                      *args)
            self.assertEqual(text, str(error))

    def test_parser(self) -> None:
        parsed = self.parse("c1", "--aggregate", "a", "--az", "z", "--az",
                            "y")
        self.assertEqual((["c1"], ["a"], ["z", "y"]), (
            parsed.hosts, parsed.aggregate, parsed.az))
