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


"""``nova-drain-agent``: the oslo.service ``Service`` and ``main``.

It reads ``nova.conf`` (``--config-file``; by default oslo.config's
search for ``nova.conf``) as nova-scheduler does: ``[drain_filters]``
(notification transport, exchange and topic; the listing budget),
``[ironic]`` and ``[placement]`` (keystoneauth sections, as Nova's own),
``[oslo_messaging_*]``, and its own ``[drain_agent]``. Nova's API is
reached with the ``[placement]`` credentials (Nova's service user) at the
catalog's ``compute`` endpoint, or ``[drain_agent] compute_endpoint``.

SIGTERM: the listener stops taking batches and the batch in hand is
finished and acknowledged (``oslo_messaging/server.py``
``MessageHandlingServer.stop`` then ``wait``, which waits for the
executor's work); what was not taken stays in the pool's queue for
another agent.
"""
import sys
import threading
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import decisions
from nova_drain_filters import sync
from nova_drain_filters.agent import capacity
from nova_drain_filters.agent import events
from nova_drain_filters.agent import metrics as metrics_mod
from nova_drain_filters.agent import reconcile
from nova_drain_filters.agent import writer as writer_mod
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement
from nova_drain_filters.conf import agent as agent_conf
from nova_drain_filters.conf import validation as conf_validation

LOG = logging.getLogger(__name__)

#: The keystoneauth sections the agent reads, as Nova registers them.
KS_SECTIONS = ("ironic", "placement")
#: How long a stop waits for the reconcile in progress.
STOP_WAIT = 30.0


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Every option the agent reads, on ``conf``."""
    logging.register_options(conf)
    drain_conf.register_opts(conf)
    agent_conf.register_opts(conf)
    for group in KS_SECTIONS:
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)
        ks_loading.register_adapter_conf_options(conf, group)


def compute_client(conf: cfg.ConfigOpts) -> compute.ComputeClient:
    """Nova's API with ``[placement]``'s session and credentials."""
    session = ks_loading.load_session_from_conf_options(conf, "placement")
    auth = ks_loading.load_auth_from_conf_options(conf, "placement")
    kwargs: dict[str, Any] = {"service_type": "compute",
                              "region_name": conf.placement.region_name}
    if conf.drain_agent.compute_endpoint:
        kwargs["endpoint_override"] = conf.drain_agent.compute_endpoint
    elif conf.placement.valid_interfaces:
        kwargs["interface"] = conf.placement.valid_interfaces
    return compute.ComputeClient(ks_adapter.Adapter(session, auth=auth,
                                                    **kwargs))


class AgentService:
    """The agent: a notification listener and a reconcile thread.

    Built on ``oslo_service.service.ServiceBase`` by ``service_class``,
    after ``main`` chose oslo.service's threading backend.
    """

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.done = threading.Event()
        self.listener: Any = None
        self.transport: Any = None
        self.reconciler: reconcile.Reconciler | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        import oslo_messaging

        conf = self.conf
        opts = conf.drain_agent
        metrics = metrics_mod.AgentMetrics()
        if opts.metrics_port:
            metrics.serve(opts.metrics_host, opts.metrics_port)
        ironic_client = ironic.from_conf(conf)
        placement_client = placement.PlacementClient(
            http.adapter_from_conf(conf, "placement", "placement"))
        nova = compute_client(conf)
        writer = writer_mod.Writer(
            ironic_client, placement_client, metrics,
            lambda: float(conf.drain_agent.max_marked_fraction))
        listed: list[compute.Hypervisor] = []

        def compute_nodes() -> list[decisions.NodeFacts]:
            listed[:] = nova.hypervisors()
            return [h.facts for h in listed]

        def gauges(picture: writer_mod.Picture) -> None:
            metrics.report.update(capacity.read(
                listed, picture.ironic, nova, placement_client))

        engine = sync.TraitSync(
            compute_nodes, ironic_client, placement_client,
            page_size=opts.page_size,
            max_missing_fraction=conf.drain_filters.ironic_missing_max_fraction,
            extra_fields=ironic.REPORT_FIELDS)
        self.reconciler = reconcile.Reconciler(
            engine, writer, metrics,
            lambda: float(conf.drain_agent.reconcile_interval),
            after=gauges if opts.metrics_port else None)
        self.thread = threading.Thread(target=self.reconciler.run,
                                       name="reconcile", daemon=True)
        self.thread.start()
        df = conf.drain_filters
        self.transport = oslo_messaging.get_notification_transport(
            conf, url=df.baremetal_notifications_url or None)
        targets = [oslo_messaging.Target(
            exchange=df.baremetal_notifications_exchange,
            topic=df.baremetal_notifications_topic)]
        endpoint = events.NodeEventsEndpoint(writer, metrics)
        # oslo_messaging/notify/listener.py get_batch_notification_listener:
        # a batch is acknowledged after the endpoint returns (see events).
        self.listener = oslo_messaging.get_batch_notification_listener(
            self.transport, targets, [endpoint], executor="threading",
            pool=opts.pool, batch_size=opts.batch_size,
            batch_timeout=opts.batch_timeout)
        self.listener.start()
        LOG.info("nova-drain-agent listening in pool %(pool)s; reconciling "
                 "every %(interval)d s", {
                     "pool": opts.pool, "interval": opts.reconcile_interval})

    def stop(self, graceful: bool = True) -> None:
        """Finish the batch in hand, acknowledge it, and stop."""
        if self.listener is not None:
            self.listener.stop()
            self.listener.wait()
        if self.reconciler is not None:
            self.reconciler.stop()
        if self.thread is not None:
            self.thread.join(STOP_WAIT)
        if self.transport is not None:
            self.transport.cleanup()
        LOG.info("nova-drain-agent stopped")
        self.done.set()

    def wait(self) -> None:
        self.done.wait()

    def reset(self) -> None:
        """SIGHUP: options are read at call time; nothing to rebuild."""


def service_class() -> type:
    """``AgentService`` on oslo.service's ``ServiceBase`` (imported only
    once the backend is chosen)."""
    from oslo_service import service

    return type("NovaDrainAgent", (AgentService, service.ServiceBase), {})


def main(argv: list[str] | None = None) -> int:
    """The ``nova-drain-agent`` console script."""
    from oslo_service import backend

    # Threads, not eventlet: oslo.messaging's threading executor.
    backend.init_backend(backend.BackendType.THREADING)
    from oslo_service import service

    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf(sys.argv[1:] if argv is None else argv, project="nova",
         prog="nova-drain-agent")
    logging.setup(conf, "nova-drain-agent")
    try:
        # Every option read once now: a bad value is one line and exit 2
        # at start, never a traceback at the first reconcile.
        drain_conf.validate(conf)
        for warning in agent_conf.validate(conf):
            LOG.warning("%s", warning)
    except (cfg.Error, conf_validation.ConfigError) as exc:
        sys.stderr.write(f"nova-drain-agent: {exc}\n")
        return 2
    launcher = service.launch(conf, service_class()(conf), workers=1,
                              restart_method="mutate")
    return int(launcher.wait() or 0)
