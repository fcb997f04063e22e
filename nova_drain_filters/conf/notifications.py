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

"""Options of event mode: Ironic's notifications keep the view current.

Read by ``nova_drain_filters/ironic_view/events.py``.
"""

from oslo_config import cfg

_AMQP_NAME = r"^[A-Za-z0-9_.:-]+$"

notification_opts = [
    cfg.BoolOpt(
        "baremetal_notifications",
        default=False,
        help="""
Keep the Ironic snapshot current from Ironic's versioned notifications.

Each scheduler process (each forked worker too) listens on the message bus
in a pool of its own, so every process hears every event. An event about a
node updates the process's snapshot at once: from the event's payload,
which carries the node (Ironic's ``NodePayload`` 1.14 and later), so a
change costs Ironic no request however many processes listen; an event
without the whole node (an older Ironic, an allocation event) makes the
process re-read that one node (``GET /v1/nodes/{uuid}``). A ``delete``
event marks the node missing.
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
once to catch up on what it missed, and goes back to events. In event
mode an unset ``baremetal_max_snapshot_age`` is twice this, at least 120.

Possible values:

* A number of seconds from 1 to 3600.

Related options:

* ``baremetal_notifications``
* ``baremetal_refresh_interval``
* ``baremetal_max_snapshot_age``
""",
    ),
    cfg.BoolOpt(
        "baremetal_notifications_host_reader",
        default=False,
        help="""
Read Ironic's notifications once per host, for every scheduler process on it.

Off (the default), each scheduler process (each forked worker) runs an
event reader of its own on a queue of its own,
``nova-drain-filters.<host>.<slot>``, so every process hears every event;
a host with eight workers reads and parses every event eight times.

On, the processes of one host elect one of them by a lock file in
``[oslo_concurrency] lock_path``; its reader consumes one queue for the
host (``nova-drain-filters.<host>.shared``) and hands every event, parsed
once, to every process over a Unix socket beside the lock, which only
processes of the same user may use. A batch is acknowledged once every
process has applied it, or 30 seconds after one stopped applying (a
follower is then dropped and reconnects). If the elected process exits,
another takes over within seconds; meanwhile the processes list Ironic as
when the broker is away, and the broker keeps the events. A reader of
the host's queue always holds the lock; one that finds another consumer
on that queue all the same logs an error and stops, and its process
reads a queue of its own. It was the default for one release, and is off
again since two readers on one host could split the host's events
between its processes (issue 41).

Only one of the two kinds of queue is read at a time: once connected, a
reader deletes the host's queues of the other kind that nobody reads, so
that they do not fill.

Possible values:

* False: one reader per scheduler process (the default).
* True: one reader per host.

Related options:

* ``baremetal_notifications``
* ``[oslo_concurrency] lock_path``
""",
    ),
]
