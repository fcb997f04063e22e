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


"""The agent's reconcile: the whole picture in bulk, judged and repaired.

At start and then every ``[drain_agent] reconcile_interval`` seconds. It
reads through ``sync.TraitSync.gather`` (Nova's compute nodes, then
Ironic's node pages, then placement's ``required=`` queries), with the
sync's refusals: an Ironic listing that is empty or lacks too many of the
nodes Nova knows (``[drain_filters] ironic_missing_max_fraction``), or a
service that cannot be read, leaves the agent with no picture, so nothing
is written, by the reconcile or by events, until a reconcile succeeds.

oslo.messaging has no public hook for a reconnection to the broker
(``oslo_messaging/notify/listener.py`` offers ``start``, ``stop`` and
``wait`` only), so an event lost while the broker was away is repaired by
the next reconcile, within one interval, not at the reconnection.
"""
import logging
import threading
import time
from collections.abc import Callable

from nova_drain_filters import stale
from nova_drain_filters import sync
from nova_drain_filters.agent import metrics as metrics_mod
from nova_drain_filters.agent import writer as writer_mod
from nova_drain_filters.clients import http

LOG = logging.getLogger(__name__)

OK, UNTRUSTED, FAILED = "ok", "untrusted", "failed"


class Reconciler:
    """One ``once()`` per interval; ``run`` loops until stopped."""

    def __init__(
        self, engine: sync.TraitSync, writer: writer_mod.Writer,
        metrics: metrics_mod.AgentMetrics, interval: Callable[[], float],
        clock: Callable[[], float] = time.time,
        after: Callable[[writer_mod.Picture], None] | None = None,
    ) -> None:
        """:param after: called with each trusted picture, once written
            (the capacity gauges); an ApiError of it is logged only."""
        self.engine = engine
        self.after = after
        self.writer = writer
        self.metrics = metrics
        self.interval = interval
        self.clock = clock
        self.stopped = threading.Event()
        self._refused: str | None = None

    def once(self) -> str:
        """One reconcile; returns ``OK``, ``UNTRUSTED`` or ``FAILED``."""
        self.writer.begin_gather()
        try:
            nodes, ironic_nodes, have = self.engine.gather()
        except stale.UntrustedListing as exc:
            return self._refuse(UNTRUSTED, f"untrusted listing: {exc}")
        except http.ApiError as exc:
            return self._refuse(FAILED, f"cannot read the cloud: {exc}")
        picture = writer_mod.Picture(nodes, dict(ironic_nodes or {}), have)
        applied = self.writer.install(picture)
        if self._refused is not None:
            LOG.info("Reconciles succeed again: writing")
            self._refused = None
        LOG.info("Reconciled %(nodes)d compute node(s), %(ironic)d Ironic "
                 "node(s): %(changes)d change(s) written", {
                     "nodes": len(nodes), "ironic": len(picture.ironic),
                     "changes": len(applied)})
        self.metrics.reconciles.labels(OK).inc()
        self.metrics.last_success.set(self.clock())
        if self.after is not None:
            try:
                self.after(picture)
            except http.ApiError as exc:
                LOG.warning("Capacity gauges not updated: %(error)s",
                            {"error": exc})
        return OK

    def _refuse(self, result: str, why: str) -> str:
        self.writer.untrust()
        self.metrics.reconciles.labels(result).inc()
        if self._refused != why:
            LOG.warning("Writing nothing until a reconcile succeeds: "
                        "%(why)s", {"why": why})
        self._refused = why
        return result

    def run(self) -> None:
        """Reconcile now, then every interval, until ``stop``."""
        while not self.stopped.is_set():
            try:
                self.once()
            except Exception:
                self.writer.untrust()
                self.metrics.reconciles.labels(FAILED).inc()
                LOG.exception("Reconcile failed; writing nothing until one "
                              "succeeds")
            self.stopped.wait(self.interval())

    def stop(self) -> None:
        self.stopped.set()
