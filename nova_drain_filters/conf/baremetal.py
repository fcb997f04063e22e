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

"""Options of the cached Ironic view the baremetal rules read."""
from typing import Any

from oslo_config import cfg

FAIL_PASS = "pass"
FAIL_REJECT = "reject"

#: The smallest derived ``baremetal_max_snapshot_age``: the default of old.
SNAPSHOT_AGE_FLOOR = 120

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

* ``baremetal_max_snapshot_age``: unset, it follows this interval in
  polling mode.
* ``baremetal_startup_wait``
* ``baremetal_page_size``
* The ``[ironic]`` section: how to reach Ironic (auth, endpoint, TLS,
  ``timeout``), shared with Nova's Ironic driver.
""",
    ),
    cfg.IntOpt(
        "baremetal_max_snapshot_age",
        min=1,
        max=86400,
        help="""
How old, in seconds, the Ironic snapshot may get before it is not trusted.

While refreshes fail (Ironic down, timing out, answering 5xx or garbage) the
filters keep deciding on the last good snapshot up to this age; after that,
``baremetal_failure_mode`` applies.

Unset (the default), it is derived, so that setting
``baremetal_refresh_interval`` alone is never an error:

* polling (``baremetal_notifications = false``): twice
  ``baremetal_refresh_interval``, at least 120. One refresh may fail and
  the snapshot is still trusted until the next.
* event mode (``baremetal_notifications = true``): twice
  ``baremetal_notifications_fallback_interval``, at least 120.

In event mode the age is counted from the last full listing or from the
last moment the listener's broker connection was seen up and caught up,
whichever is later: a quiet cloud sends no events for hours, and a healthy
connection, not the last event, is what keeps the snapshot current. When
the connection drops, the process lists Ironic every
``baremetal_notifications_fallback_interval`` seconds, and this age bounds
how long it decides on the snapshot if those listings fail too.

Possible values:

* Unset: derived as above (120 with the other defaults).
* A number of seconds, at least ``baremetal_refresh_interval`` and at
  most 86400 (a day).

Related options:

* ``baremetal_failure_mode``
* ``baremetal_refresh_interval``
* ``baremetal_notifications``
* ``baremetal_notifications_fallback_interval``
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

Use credentials that see every node: ``[ironic] system_scope = all`` for a
user with the reader role on the system, or the service role in the service
project with Ironic's ``rbac_service_role_elevated_access = true``. A
project-scoped admin is not enough under Ironic's default policies.

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


def derived_snapshot_age(refresh_interval: int, notifications: bool,
                         fallback_interval: int) -> int:
    """The ``baremetal_max_snapshot_age`` used when the option is unset.

    ==============  ===========================================
    mode            derived age
    ==============  ===========================================
    polling         max(120, 2 x baremetal_refresh_interval)
    event mode      max(120, 2 x fallback_interval)
    ==============  ===========================================

    Twice the period of the listings that keep the snapshot current when
    nothing else does: one of them may fail. In event mode those are the
    fallback listings of a lost broker connection; while the connection is
    up the snapshot's age is counted from the last moment it was seen up
    (``IronicView.trusted``), so the long reconciliation interval does not
    enter.
    """
    period = fallback_interval if notifications else refresh_interval
    return max(SNAPSHOT_AGE_FLOOR, 2 * period)


def max_snapshot_age(group: Any) -> int:
    """The ``[drain_filters]`` snapshot age limit: the option, or derived."""
    explicit = group.baremetal_max_snapshot_age
    if explicit is not None:
        return int(explicit)
    return derived_snapshot_age(
        group.baremetal_refresh_interval, group.baremetal_notifications,
        group.baremetal_notifications_fallback_interval)
