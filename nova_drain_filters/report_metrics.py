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

"""The capacity report's figures as Prometheus metrics, in their own registry.

Names follow Prometheus' conventions (``nova_drain_`` namespace, base units,
one metric per meaning, states and reasons as labels). ``write_to_textfile``
of prometheus_client writes them for node_exporter's textfile collector.
"""
from collections.abc import Sequence

import prometheus_client

from nova_drain_filters import report

SCHEDULABLE = "schedulable"
UNSCHEDULABLE = "unschedulable"


def registry(verdicts: Sequence[report.NodeVerdict]
             ) -> prometheus_client.CollectorRegistry:
    """A new registry holding the report's figures; a pure function.

    ====================================  ===============================
    metric                                labels
    ====================================  ===============================
    nova_drain_unschedulable_nodes        reason (first reason only)
    nova_drain_unschedulable_hosts        reason
    nova_drain_unschedulable_inventory    reason, resource_class
    nova_drain_nodes                      state
    nova_drain_inventory                  resource_class, state
    nova_drain_unschedulable_ratio        resource_class
    ====================================  ===============================
    """
    reg = prometheus_client.CollectorRegistry()

    def gauge(name: str, doc: str, labels: Sequence[str]
              ) -> prometheus_client.Gauge:
        return prometheus_client.Gauge(name, doc, labels, registry=reg)

    nodes = gauge("nova_drain_unschedulable_nodes",
                  "Compute nodes that cannot take a server, by first reason",
                  ["reason"])
    hosts = gauge("nova_drain_unschedulable_hosts",
                  "Compute hosts with a node counted under the reason",
                  ["reason"])
    lost = gauge("nova_drain_unschedulable_inventory",
                 "Total inventory of the nodes counted under the reason",
                 ["reason", "resource_class"])
    states = gauge("nova_drain_nodes", "Compute nodes, schedulable or not",
                   ["state"])
    inventory = gauge("nova_drain_inventory",
                      "Total inventory, schedulable or not",
                      ["resource_class", "state"])
    ratio = gauge("nova_drain_unschedulable_ratio",
                  "Unschedulable share of the total inventory (0 to 1)",
                  ["resource_class"])
    by_state = {SCHEDULABLE: 0, UNSCHEDULABLE: 0}
    for row in report.rows(verdicts):
        if row.reason == report.TOTAL:
            continue
        if row.reason == report.SCHEDULABLE:
            by_state[SCHEDULABLE] += row.nodes
            continue
        by_state[UNSCHEDULABLE] += row.nodes
        nodes.labels(row.reason).set(row.nodes)
        hosts.labels(row.reason).set(row.hosts)
        for rc, total in row.inventory.items():
            lost.labels(row.reason, rc).set(total)
    for state, count in by_state.items():
        states.labels(state).set(count)
    shares = report.fractions(verdicts)
    for rc in report.resource_classes(verdicts):
        usable = sum(n for v in verdicts if v.first is None
                     for c, n in v.inventory if c == rc)
        unusable = sum(n for v in verdicts if v.first is not None
                       for c, n in v.inventory if c == rc)
        inventory.labels(rc, SCHEDULABLE).set(usable)
        inventory.labels(rc, UNSCHEDULABLE).set(unusable)
        ratio.labels(rc).set(shares.get(rc, 0.0))
    return reg


def write(verdicts: Sequence[report.NodeVerdict], path: str) -> None:
    """Write the metrics to ``path`` atomically (prometheus_client writes a
    temporary file beside it, then renames it)."""
    prometheus_client.write_to_textfile(path, registry(verdicts))
