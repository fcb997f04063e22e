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

"""The ``[drain_filters]`` options, documented where they are declared.

The filters run inside ``nova-scheduler``, so these options live in
``nova.conf``. Placement and Ironic are reached with the ``[placement]`` and
``[ironic]`` sections Nova already has; nothing is configured twice.
"""
import math
from collections.abc import Iterable
from typing import Any

from oslo_config import cfg
from oslo_config import types

from nova_drain_filters import traits

GROUP = "drain_filters"

drain_group = cfg.OptGroup(
    GROUP,
    title="nova-drain-filters options",
    help="""
Options for the nova-drain-filters scheduler filters and placement pre-filter.

Enable the filters in ``[filter_scheduler]``::

    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_drain_filters.filters.all_filters
    enabled_filters = ...,DisabledServiceFilter,StaleComputeNodeFilter,
                      BaremetalAvailabilityFilter
""",
)

_trait_type = types.String(regex=traits.CUSTOM_TRAIT_PATTERN, max_length=255)

filter_opts = [
    cfg.BoolOpt(
        "placement_prefilter",
        default=True,
        help="""
Forbid ``forbidden_traits`` in every placement allocation candidate query.

When enabled, loading ``nova_drain_filters.filters.all_filters`` appends a
request filter to Nova's ``nova.scheduler.request_filter.ALL_REQUEST_FILTERS``.
It adds the traits to the request's ``root_forbidden`` set, so placement never
offers a provider that carries one of them and no
``[scheduler] max_placement_results`` slot is spent on it. The traits are
created in placement once per scheduler process (and re-checked every few
minutes), because placement rejects a query that forbids an unknown trait.

Nova has no plugin point for request filters and skips them on rebuild, so a
rebuild on a drained host still goes through; that is intended.

Possible values:

* True: forbid the traits in placement queries.
* False: do not touch placement queries; the host filters still run.

Related options:

* ``forbidden_traits``
* ``[scheduler] max_placement_results``
""",
    ),
    cfg.ListOpt(
        "forbidden_traits",
        item_type=_trait_type,
        default=list(traits.DEFAULT_FORBIDDEN),
        help=f"""
Custom traits that take a provider out of scheduling.

``{traits.STALE_NODE}`` and ``{traits.BAREMETAL_UNAVAILABLE}`` are set and
cleared by the trait sync (``openstack drain sync``). ``{traits.DRAIN_HOST}``
is for operators to drain a host by hand; on an Ironic node set it on the
node, since Nova's Ironic driver overwrites the provider's traits with the
node's on its periodic.

Possible values:

* A list of custom trait names, each matching ``CUSTOM_[A-Z0-9_]+``. An empty
  list turns the pre-filter into a no-op.

Related options:

* ``placement_prefilter``
""",
    ),
    cfg.IntOpt(
        "stale_node_max_age",
        default=0,
        min=0,
        help="""
Reject a compute node whose record was last updated more than this many
seconds ago. 0 turns the rule off, which is the default and the right choice
for most clouds.

The age is that of ``compute_nodes.updated_at``, which Nova writes only when a
node's resources change (``_resource_change`` in
``nova/compute/resource_tracker.py``). An idle host or an idle Ironic node can
be days old and perfectly healthy, so this is no liveness signal: service
liveness is judged by ``DisabledServiceFilter`` from the service heartbeat.
Turn this on only where every node's record is known to change often.

Possible values:

* 0: the age rule is off.
* A positive number of seconds.

Related options:

* ``[DEFAULT] service_down_time``
""",
    ),
]


FAIL_PASS = "pass"
FAIL_REJECT = "reject"

baremetal_opts = [
    cfg.IntOpt(
        "baremetal_refresh_interval",
        default=15,
        min=1,
        max=3600,
        help="""
Seconds between two refreshes of the scheduler's snapshot of Ironic nodes.

A background thread in each scheduler process lists all Ironic nodes (one
request per ``baremetal_page_size`` nodes) and swaps in the new snapshot;
``BaremetalAvailabilityFilter`` and ``StaleComputeNodeFilter`` only read it,
so scheduling never waits on Ironic. Nova itself learns of a node that went
to cleaning or maintenance only on nova-compute's periodic resource update,
which with hundreds of nodes per service takes minutes; keep this well
below that.

Possible values:

* A number of seconds from 1 to 3600.

Related options:

* ``baremetal_max_snapshot_age``
* ``baremetal_startup_wait``
* ``baremetal_page_size``
* The ``[ironic]`` section: how to reach Ironic (auth, endpoint, TLS,
  ``timeout``), shared with Nova's Ironic driver.
""",
    ),
    cfg.IntOpt(
        "baremetal_max_snapshot_age",
        default=120,
        min=1,
        max=86400,
        help="""
How old, in seconds, the Ironic snapshot may get before it is not trusted.

While refreshes fail (Ironic down, timing out, answering 5xx or garbage) the
filters keep deciding on the last good snapshot up to this age; after that,
``baremetal_failure_mode`` applies. Must not be smaller than
``baremetal_refresh_interval``.

Possible values:

* A number of seconds, at least ``baremetal_refresh_interval`` and at
  most 86400 (a day).

Related options:

* ``baremetal_failure_mode``
""",
    ),
    cfg.IntOpt(
        "baremetal_startup_wait",
        default=20,
        min=0,
        max=50,
        help="""
How long, in seconds, a scheduling request waits for the first Ironic
listing of a scheduler process that has none yet.

The refresher starts when Nova loads the filters, and again in each worker
process Nova forks. A request that arrives before that process's first
listing has finished waits for it, but no longer than this many seconds
after the refresher started; then ``baremetal_failure_mode`` applies and an
error is logged once. Without the wait, the first requests after a restart
would pass every node unchecked. Keep it well below ``[DEFAULT]
rpc_response_timeout`` (60 by default), the time the conductor gives the
scheduler to answer.

Possible values:

* 0: never wait; the failure policy applies until the first listing.
* A number of seconds up to 50. The first listing of 10,000 nodes takes
  11 requests, a few seconds on a healthy Ironic.

Related options:

* ``baremetal_failure_mode``
* ``baremetal_refresh_interval``
""",
    ),
    cfg.StrOpt(
        "baremetal_failure_mode",
        default=FAIL_PASS,
        choices=[
            (FAIL_PASS, "Pass every Ironic host; log an error once per "
                        "refresh interval."),
            (FAIL_REJECT, "Reject every Ironic host until Ironic answers."),
        ],
        help="""
What the baremetal filters do without a trustworthy Ironic snapshot.

That is: no listing yet after ``baremetal_startup_wait``, a snapshot older
than ``baremetal_max_snapshot_age``, or, for the nodes a listing lacks, a
listing that lacks more than ``ironic_missing_max_fraction`` of the Ironic
nodes Nova knows.

``pass`` (the default) falls back to what Nova does without these filters:
a node that cannot be used still fails at build time on nova-compute and the
build is rescheduled. ``reject`` would turn an Ironic API outage, which need
not stop nodes from deploying, into ``NoValidHost`` for every baremetal boot,
so it suits only clouds that prefer no build to a failed one.

Possible values:

* ``pass``: every Ironic host passes; an error is logged once per interval.
* ``reject``: every Ironic host is rejected with a ``baremetal state
  unknown`` reason.

Related options:

* ``baremetal_max_snapshot_age``
* ``baremetal_startup_wait``
* ``ironic_missing_max_fraction``
""",
    ),
    cfg.FloatOpt(
        "ironic_missing_max_fraction",
        default=0.1,
        min=0.0,
        max=1.0,
        help="""
The largest share of Nova's Ironic compute nodes an Ironic listing may lack
and still be believed about deleted nodes.

A listing that lacks a node Nova knows says that node was deleted from
Ironic. But credentials that see only their own nodes (Ironic filters by
owner or lessee for project-scoped tokens) or a missing conductor group give
a listing that looks complete and is not. If a listing lacks more than this
share of the Ironic compute nodes Nova knows (and always when it is empty
while Nova knows some), it is not trusted: the filters apply
``baremetal_failure_mode``, the trait sync and ``openstack drain stale``
refuse to call those nodes missing, and the counts are logged. One missing
node is always believed, so a small cloud can still lose a node.

Use credentials that see every node: a system-scoped or admin token.

Possible values:

* A fraction from 0.0 to 1.0. 0.0 believes a single missing node only;
  1.0 believes any listing that is not empty.

Related options:

* ``baremetal_failure_mode``
* The ``[ironic]`` section: the credentials the listing uses.
""",
    ),
    cfg.IntOpt(
        "baremetal_page_size",
        default=1000,
        min=1,
        help="""
Nodes asked for per ``GET /v1/nodes`` request when refreshing the snapshot.

Ironic caps it at its own ``[api] max_limit`` (1000 by default); the refresh
follows Ironic's ``next`` links, so a larger value is harmless. N nodes take
N // page + 1 requests (Ironic links one more, empty, page after a full
one): 2,000 nodes take 3, 10,000 take 11.

Possible values:

* A positive number of nodes.
""",
    ),
]

_AMQP_NAME = r"^[A-Za-z0-9_.:-]+$"

# Event mode (nova_drain_filters/ironic_events.py). Appended to
# baremetal_opts so register_opts and list_opts need no change.
notification_opts = [
    cfg.BoolOpt(
        "baremetal_notifications",
        default=False,
        help="""
Keep the Ironic snapshot current from Ironic's versioned notifications.

Each scheduler process (each forked worker too) listens on the message bus
in a pool of its own, so every process hears every event. An event about a
node makes the process re-read that one node (``GET /v1/nodes/{uuid}``)
and update its snapshot at once; a ``delete`` event marks the node missing.
The filters still only read the snapshot while scheduling.

The full listing of ``baremetal_refresh_interval`` stays as a
reconciliation; with this on, set it long (600 seconds), so that Ironic's
load no longer grows with the number of scheduler workers. If the broker
cannot be reached, the process polls Ironic every
``baremetal_notifications_fallback_interval`` seconds until it can.

Ironic must publish: in ``ironic.conf``, ``[DEFAULT] notification_level =
info`` and ``[oslo_messaging_notifications] driver = messagingv2`` with a
``transport_url`` on the same broker as ``baremetal_notifications_url``.

Possible values:

* True: listen to Ironic's notifications; poll only as a reconciliation.
* False: poll Ironic every ``baremetal_refresh_interval`` seconds.

Related options:

* ``baremetal_notifications_url``
* ``baremetal_notifications_topic``
* ``baremetal_notifications_exchange``
* ``baremetal_notifications_fallback_interval``
* ``baremetal_refresh_interval``
* ``baremetal_max_snapshot_age``
""",
    ),
    cfg.StrOpt(
        "baremetal_notifications_url",
        secret=True,
        help="""
The oslo.messaging transport URL of the broker Ironic publishes to.

Unset, the URL of Nova's own notifications is used: ``[oslo_messaging_notifications]
transport_url``, then ``[DEFAULT] transport_url``. Set it when Ironic
publishes to another broker or virtual host than Nova's.

Possible values:

* Unset: use Nova's notification transport.
* A transport URL such as ``rabbit://user:password@host:5672/vhost``.

Related options:

* ``baremetal_notifications``
* ``[oslo_messaging_notifications] transport_url``
* ``[oslo_messaging_rabbit]``: TLS, heartbeat and retry settings of the
  connection.
""",
    ),
    cfg.StrOpt(
        "baremetal_notifications_topic",
        default="ironic_versioned_notifications",
        regex=_AMQP_NAME,
        max_length=255,
        help="""
The topic Ironic publishes its versioned notifications on.

It must be one of Ironic's ``[DEFAULT] versioned_notifications_topics``.
The listener consumes ``<topic>.info``, ``<topic>.warn`` and
``<topic>.error``.

Possible values:

* A topic name (letters, digits, ``_.:-``).

Related options:

* ``baremetal_notifications_exchange``
""",
    ),
    cfg.StrOpt(
        "baremetal_notifications_exchange",
        default="ironic",
        regex=_AMQP_NAME,
        max_length=255,
        help="""
The exchange Ironic's notifications are published to.

Ironic's ``[DEFAULT] control_exchange`` (``ironic`` by default). Without it
a listener binds to oslo.messaging's default exchange, ``openstack``, and
hears nothing from Ironic.

Possible values:

* An exchange name (letters, digits, ``_.:-``).

Related options:

* ``baremetal_notifications_topic``
""",
    ),
    cfg.IntOpt(
        "baremetal_notifications_fallback_interval",
        default=15,
        min=1,
        max=3600,
        help="""
Seconds between two listings of Ironic while the broker cannot be reached.

When the listener loses its broker (or cannot reach it at start-up) it
logs a warning once and lists Ironic this often, as without
notifications, until the broker is back; then it logs once more, lists
once to catch up on what it missed, and goes back to events.

Possible values:

* A number of seconds from 1 to 3600.

Related options:

* ``baremetal_notifications``
* ``baremetal_refresh_interval``
""",
    ),
]
baremetal_opts.extend(notification_opts)


class ConfigError(ValueError):
    """A ``[drain_filters]`` option has a value the filters cannot use."""


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[drain_filters]`` options on ``conf`` (idempotent)."""
    conf.register_group(drain_group)
    conf.register_opts(filter_opts + baremetal_opts, group=drain_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """Return the options for ``oslo-config-generator``."""
    return [(drain_group, filter_opts + baremetal_opts)]


#: The largest number accepted for an option that declares no ``max``. No
#: interval, age or count these options hold makes sense above it (68 years
#: of seconds), and larger ones overflow what they feed: ``Event.wait`` and
#: ``datetime.timedelta`` raise ``OverflowError``, Ironic's ``limit`` is an
#: integer column.
NUMBER_CEILING = 2**31 - 1


def _all_opts() -> Iterable[cfg.Opt]:
    for _group, opts in list_opts():
        yield from opts


def _problem(exc: Exception) -> str:
    """The part of an oslo.config error that says what is wrong, on one line.

    oslo.config words a bad file value as "Value for option X from
    LocationInfo(...) is not valid: <what>" (``ConfigOpts._do_get`` in
    ``oslo_config/cfg.py``); the operator needs only <what>.
    """
    text = str(exc)
    marker = " is not valid: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return " ".join(text.split())


def _check_value(opt: cfg.Opt, value: Any) -> str | None:
    """What is wrong with an option's value, or None; driven by its type.

    oslo.config reads an empty number as None. None is accepted only where
    the declaration says it means something (``default=None``); an empty
    string only where the default is empty too. A list may be empty. The
    type's own rules (bounds, choices, regex) are applied again, so a value
    that did not come through the type (an override from code, a conf-like
    object) is held to them as well; a number must also be finite and, with
    no declared ``max``, at most NUMBER_CEILING.
    """
    opt_type = opt.type
    if value is None:
        if opt.default is None:
            return None
        return (f"empty value; give one, or remove the line to get the "
                f"default ({opt.default})")
    if isinstance(opt_type, types.List):
        for item in value:
            try:
                opt_type.item_type(item)
            except (TypeError, ValueError) as exc:
                return _problem(exc)
        return None
    if value == "" and opt.default != "":
        default = "unset" if opt.default is None else opt.default
        return (f"empty value; give one, or remove the line to get the "
                f"default ({default})")
    if isinstance(opt_type, (types.Number, types.String, types.Boolean)):
        try:
            opt_type(value)
        except (TypeError, ValueError) as exc:
            return f"{value!r}: {_problem(exc)}"
    if isinstance(opt_type, types.Number) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value!r} is not a finite number"
        if opt_type.max is None and abs(value) > NUMBER_CEILING:
            return f"{value!r} is too large (at most {NUMBER_CEILING})"
    return None


def validate(conf: cfg.ConfigOpts) -> None:
    """Read every option once and raise ConfigError naming a bad one.

    oslo.config checks types and bounds only when a value is read, and takes
    an empty number for None. Reading them all here, when Nova loads the
    filters (``filters.all_filters``), makes a bad value stop
    ``nova-scheduler`` at start-up with one line naming the option, instead
    of failing every request later. Every option ``list_opts`` returns is
    checked by its declaration (``_check_value``), so a new option needs no
    code here.
    """
    group = getattr(conf, GROUP)
    for opt in _all_opts():
        try:
            value = getattr(group, opt.dest)
        except ValueError as exc:  # ConfigFileValueError is one
            raise ConfigError(f"[{GROUP}] {opt.dest}: {_problem(exc)}") from None
        problem = _check_value(opt, value)
        if problem is not None:
            raise ConfigError(f"[{GROUP}] {opt.dest}: {problem}")
    if group.baremetal_max_snapshot_age < group.baremetal_refresh_interval:
        raise ConfigError(
            f"[{GROUP}] baremetal_max_snapshot_age: "
            f"{group.baremetal_max_snapshot_age} is smaller than "
            f"baremetal_refresh_interval ({group.baremetal_refresh_interval})"
        )
