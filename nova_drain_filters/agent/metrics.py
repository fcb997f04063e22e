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


"""The agent's figures on ``/metrics``, in a registry of its own.

Its health (events, writes, lag, reconciles, the last good reconcile's
time) and the capacity gauges of ``drain report``, under the names its
``--prometheus-textfile`` writes (``report_metrics``), from the latest
reconcile's picture.
"""
import threading
from collections.abc import Iterator
from collections.abc import Sequence

import prometheus_client
from prometheus_client import registry as prom_registry
from prometheus_client.metrics_core import Metric

from nova_drain_filters import report
from nova_drain_filters import report_metrics

#: Lag buckets, in seconds: from a batch's second to a stuck agent.
LAG_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class ReportCollector(prom_registry.Collector):
    """The report's gauges of the latest picture; none before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._registry: prometheus_client.CollectorRegistry | None = None

    def update(self, verdicts: Sequence[report.NodeVerdict]) -> None:
        built = report_metrics.registry(verdicts)
        with self._lock:
            self._registry = built

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            current = self._registry
        if current is not None:
            yield from current.collect()


class AgentMetrics:
    """Every figure the agent serves; one object per agent process."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        reg = self.registry
        self.events_received = prometheus_client.Counter(
            "nova_drain_agent_events_received",
            "Ironic notifications received", registry=reg)
        self.events_applied = prometheus_client.Counter(
            "nova_drain_agent_events_applied",
            "Node verdicts changed by an event and written", registry=reg)
        self.lag = prometheus_client.Histogram(
            "nova_drain_agent_event_lag_seconds",
            "From Ironic's event stamp to the trait written",
            buckets=LAG_BUCKETS, registry=reg)
        self.writes = prometheus_client.Counter(
            "nova_drain_agent_writes", "Trait changes written, by target",
            ["target"], registry=reg)
        self.write_failures = prometheus_client.Counter(
            "nova_drain_agent_write_failures",
            "Trait changes that failed, by target", ["target"], registry=reg)
        self.budget_refusals = prometheus_client.Counter(
            "nova_drain_agent_budget_refusals",
            "Marks refused by the per-interval budget", registry=reg)
        self.reconciles = prometheus_client.Counter(
            "nova_drain_agent_reconciles",
            "Reconciles, by result (ok, untrusted, failed)", ["result"],
            registry=reg)
        self.last_success = prometheus_client.Gauge(
            "nova_drain_agent_reconcile_last_success_timestamp_seconds",
            "When the last reconcile that could write ended", registry=reg)
        self.trusted = prometheus_client.Gauge(
            "nova_drain_agent_picture_trusted",
            "1 while the agent's picture may be written from", registry=reg)
        self.report = ReportCollector()
        reg.register(self.report)

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread."""
        prometheus_client.start_http_server(port, addr=host,
                                            registry=self.registry)
