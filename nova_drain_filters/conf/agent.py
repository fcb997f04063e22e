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


"""Options of ``nova-drain-agent`` alone, in ``[drain_agent]``.

The agent reads the rest of ``nova.conf`` as nova-scheduler does:
``[drain_filters]`` (the notification transport, exchange and topic, and
``ironic_missing_max_fraction``), ``[ironic]`` and ``[placement]``.
Read by ``nova_drain_filters/agent/``.
"""

from oslo_config import cfg

from nova_drain_filters.conf import validation

GROUP = "drain_agent"

agent_group = cfg.OptGroup(
    GROUP,
    title="nova-drain-agent options",
    help="""
Options of the ``nova-drain-agent`` service, which keeps the drain traits
in placement and on Ironic nodes current from Ironic's notifications.
""",
)

agent_opts = [
    cfg.IntOpt(
        "reconcile_interval",
        default=60,
        min=5,
        max=86400,
        help="""
Seconds between two reconciles: a bulk read of Ironic, Nova and placement,
judged and repaired.

A reconcile also runs at start. oslo.messaging has no public hook for a
reconnection to the broker, so an event lost while the broker or the agent
was down is repaired by the next reconcile, within this interval. It also
renews the per-interval write budget.

Possible values:

* A number of seconds from 5 to 86400.

Related options:

* ``max_marked_fraction``
""",
    ),
    cfg.HostAddressOpt(
        "metrics_host",
        default="127.0.0.1",
        help="""
The address ``/metrics`` is served on (Prometheus text format).

Possible values:

* An IP address or host name; ``0.0.0.0`` for every address.

Related options:

* ``metrics_port``
""",
    ),
    cfg.PortOpt(
        "metrics_port",
        default=9736,
        help="""
The TCP port of ``/metrics``; 0 serves no metrics.

Possible values:

* A port number, or 0 to serve no metrics.

Related options:

* ``metrics_host``
""",
    ),
    cfg.StrOpt(
        "pool",
        default="nova-drain-agent",
        regex=r"^[A-Za-z0-9_.:-]+$",
        max_length=200,
        help="""
The oslo.messaging listener pool every agent of the cloud shares.

Agents in one pool share one queue, so each event goes to one agent; run
two or more for availability, with no election. An agent killed before it
acknowledged a batch leaves it to another.

Possible values:

* A pool name (letters, digits, ``_.:-``), the same on every agent.

Related options:

* ``[drain_filters] baremetal_notifications_exchange``
* ``[drain_filters] baremetal_notifications_topic``
""",
    ),
    cfg.IntOpt(
        "batch_size",
        default=100,
        min=1,
        max=10000,
        help="""
The most events handled as one batch.

Events about one node in a batch are coalesced: its last verdict is
written once.

Possible values:

* A number of events from 1 to 10000.

Related options:

* ``batch_timeout``
""",
    ),
    cfg.IntOpt(
        "batch_timeout",
        default=1,
        min=1,
        max=60,
        help="""
Seconds to wait for a batch to fill before handling what came.

Possible values:

* A number of seconds from 1 to 60.

Related options:

* ``batch_size``
""",
    ),
    cfg.FloatOpt(
        "max_marked_fraction",
        default=0.1,
        min=0.0,
        max=1.0,
        help="""
The largest share of the Ironic nodes Nova knows the agent may mark
unschedulable in one reconcile interval.

The same disruption budget as the CLI's ``--max-fraction``: a picture
gone wrong must not take the whole cloud out of scheduling. One node is
always allowed. Marks over the budget are refused with a warning and
tried again in the next interval; clearing a trait is never limited.

Possible values:

* A fraction from 0.0 to 1.0.

Related options:

* ``reconcile_interval``
* ``[drain_filters] ironic_missing_max_fraction``
""",
    ),
    cfg.URIOpt(
        "compute_endpoint",
        schemes=["http", "https"],
        help="""
Nova's compute API endpoint, instead of the catalog's.

The agent reads Nova's compute nodes with the ``[placement]`` session and
credentials (Nova's own service user, which may list hypervisors) at the
catalog's ``compute`` endpoint of ``[placement] valid_interfaces`` and
``region_name``. Set this where the catalog's is not reachable from the
agent.

Possible values:

* Unset: the catalog's ``compute`` endpoint.
* A URL such as ``https://nova.example.com/v2.1``.

Related options:

* ``[placement]``
""",
    ),
    cfg.IntOpt(
        "page_size",
        default=1000,
        min=1,
        max=10000,
        help="""
Ironic nodes per request of a reconcile's listing.

Possible values:

* A number of nodes from 1 to 10000.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[drain_agent]`` options on ``conf`` (idempotent)."""
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)


def validate(conf: cfg.ConfigOpts) -> list[str]:
    """Read every ``[drain_agent]`` option once (a bad value raises
    ConfigError naming it, at start, not at the first reconcile); the
    names in the section that are no option, each with the closest
    one, as warnings to log."""
    validation.validate(conf, GROUP, agent_opts)
    return [f"[{GROUP}] {name} is not an option of nova-drain-agent and is "
            f"ignored" + (f"; did you mean {close}?" if close else "")
            for name, close in validation.unknown_options(
                conf, GROUP, agent_opts).items()]
