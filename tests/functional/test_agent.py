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


"""nova-drain-agent end to end: Ironic's events to placement's traits."""
from tests.functional import agent_base


class AgentTest(agent_base.AgentTestBase):
    def test_maintenance_marks_and_clears_the_provider(self) -> None:
        agent = self.agent()
        self.wait_for("the agent on its queue", lambda: self.consumers() == 1)
        node = self.nodes[0]
        self.ironic.set_maintenance(node, True, reason="psu")
        took = self.wait_for("the drain trait", lambda: self.marked(node))
        self.addDetail("mark-seconds", agent_base.text(f"{took:.2f}"))
        self.assertTrue(self.cleared(self.nodes[1]))
        self.ironic.set_maintenance(node, False)
        took = self.wait_for("the trait cleared", lambda: self.cleared(node))
        self.addDetail("clear-seconds", agent_base.text(f"{took:.2f}"))
        # SIGTERM: the agent finishes and exits.
        agent.stop(grace=30)
        self.assertEqual(0, self.consumers())

    def test_metrics_health_and_capacity(self) -> None:
        port = agent_base.process.free_port()
        self.agent(metrics_port=port)
        self.wait_for("the agent on its queue", lambda: self.consumers() == 1)
        self.ironic.set_maintenance(self.nodes[0], True, reason="psu")
        self.wait_for("the drain trait", lambda: self.marked(self.nodes[0]))
        got = self.scrape(port)
        self.assertGreaterEqual(got["nova_drain_agent_events_received_total{}"],
                                1)
        self.assertEqual(1, got["nova_drain_agent_events_applied_total{}"])
        self.assertEqual(1, got["nova_drain_agent_event_lag_seconds_count{}"])
        for target in ("ironic", "placement"):
            self.assertEqual(1, got['nova_drain_agent_writes_total'
                                    f'{{"target": "{target}"}}'])
        self.assertEqual(1, got['nova_drain_agent_reconciles_total'
                                '{"result": "ok"}'])
        self.assertGreater(got["nova_drain_agent_reconcile_last_success_"
                               "timestamp_seconds{}"], 1.7e9)
        # The report's gauges, from the first reconcile's picture: both
        # nodes schedulable then.
        self.assertEqual(2, got['nova_drain_nodes{"state": "schedulable"}'])
        self.addDetail("fig-metrics", agent_base.text("\n".join(
            f"{k} {v}" for k, v in sorted(got.items()))))
