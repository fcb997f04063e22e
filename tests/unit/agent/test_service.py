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


"""The agent's wiring: nova.conf read as the scheduler's, capacity gauges."""
import subprocess
import sys
from typing import Any

import fixtures
import testtools
from oslo_config import cfg

from nova_drain_filters.agent import capacity
from nova_drain_filters.agent import metrics
from nova_drain_filters.agent import service
from nova_drain_filters.clients import compute
from nova_drain_filters.conf import agent as agent_conf
from tests.unit import ironic_fakes

NOVA_CONF = """
[drain_filters]
baremetal_notifications_url = rabbit://u:p@broker:5672/
[drain_agent]
reconcile_interval = 30
pool = agents
compute_endpoint = http://nova.example.com/v2.1
[placement]
auth_type = admin_token
token = t
[ironic]
auth_type = none
endpoint_override = http://ironic.example.com
"""


class TestService(testtools.TestCase):
    def conf(self, text: str) -> cfg.ConfigOpts:
        path = self.useFixture(fixtures.TempDir()).join("nova.conf")
        with open(path, "w") as f:
            f.write(text)
        conf = cfg.ConfigOpts()
        service.register_opts(conf)
        conf(["--config-file", path], project="nova")
        return conf

    def test_reads_the_schedulers_nova_conf(self) -> None:
        conf = self.conf(NOVA_CONF)
        self.assertEqual(30, conf.drain_agent.reconcile_interval)
        self.assertEqual("agents", conf.drain_agent.pool)
        self.assertEqual(1, conf.drain_agent.batch_timeout)
        self.assertEqual("ironic_versioned_notifications",
                         conf.drain_filters.baremetal_notifications_topic)
        nova = service.compute_client(conf)
        self.assertEqual("http://nova.example.com/v2.1",
                         nova.adapter.endpoint_override)
        self.assertEqual("compute", nova.adapter.service_type)

    def test_bad_agent_value_fails_at_start(self) -> None:
        conf = self.conf(NOVA_CONF + "\n[drain_agent]\nbatch_size = 0\n")
        self.assertRaises(cfg.ConfigFileValueError,
                          lambda: conf.drain_agent.batch_size)

    def test_main_says_a_bad_value_in_one_line_and_exits_2(self) -> None:
        # In a process of its own, as the console script runs: main()
        # chooses oslo.service's backend, once per process.
        path = self.useFixture(fixtures.TempDir()).join("nova.conf")
        with open(path, "w") as f:
            f.write("[drain_agent]\nreconcile_interval = 0\n")
        run = subprocess.run(
            [sys.executable, "-c", "import sys; from nova_drain_filters."
             "agent import service; sys.exit(service.main(sys.argv[1:]))",
             "--config-file", path], capture_output=True, text=True,
            timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(2, run.returncode, run.stderr)
        self.assertEqual(
            "nova-drain-agent: [drain_agent] reconcile_interval: Should be "
            "greater than or equal to 5", run.stderr.strip().splitlines()[-1])
        self.assertNotIn("Traceback", run.stderr)

    def test_a_misspelled_agent_option_is_named(self) -> None:
        conf = self.conf(NOVA_CONF + "\n[drain_agent]\nreconcile_intervall = 5\n")
        self.assertEqual(
            ["[drain_agent] reconcile_intervall is not an option of "
             "nova-drain-agent and is ignored; did you mean "
             "reconcile_interval?"], agent_conf.validate(conf))


class FakeNova:
    def services(self) -> list[compute.Service]:
        return [compute.Service("s1", "c1", "up", "enabled", False, None,
                                None)]


class TestCapacity(testtools.TestCase):
    def test_gauges_under_the_reports_names(self) -> None:
        log: list[Any] = []
        placement = ironic_fakes.FakeSyncPlacement(log, {
            "CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE": {"n2"}})
        placement.providers = lambda required=None: [  # type: ignore
            {"uuid": u} for u in (["n1", "n2"] if required is None
                                   else sorted(placement.carriers.get(
                                       required, ())))]
        hvs = [compute.Hypervisor(u, u, "ironic", "c1", "s1", "up",
                                  "enabled") for u in ("n1", "n2")]
        nodes = {"n1": ironic_fakes.ironic_node("n1", resource_class="gold"),
                 "n2": ironic_fakes.ironic_node(
                     "n2", resource_class="gold", maintenance=True)}
        verdicts = capacity.read(hvs, nodes, FakeNova(),  # type: ignore
                                 placement)
        served = metrics.AgentMetrics()
        served.report.update(verdicts)
        get = served.registry.get_sample_value
        self.assertEqual(1, get("nova_drain_nodes", {"state": "schedulable"}))
        self.assertEqual(1, get("nova_drain_nodes",
                                {"state": "unschedulable"}))
        self.assertEqual(0.5, get("nova_drain_unschedulable_ratio",
                                  {"resource_class": "CUSTOM_GOLD"}))
