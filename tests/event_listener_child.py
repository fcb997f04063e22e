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

"""One scheduler-like process with an Ironic view in event mode, for tests.

``python -m tests.event_listener_child TRANSPORT_URL IRONIC_URL
LOCK_PATH OUT [HOST_READER]`` configures ``[drain_filters]`` as an
operator would (``baremetal_notifications_host_reader`` is left at its
default unless HOST_READER, ``true`` or ``false``, is given), starts
the view (which starts the listener), and writes one JSON line per event it
hears to OUT: first ``{"pool": ...}`` once it listens, then
``{"event": ..., "node": ...}`` for each node event parsed for the view.
It runs until its standard input closes or it is killed.

Events are recorded where they are parsed (``notifications.parse_event``),
which on RabbitMQ is the view's reader process: its entry is this module
too (``reader.ENTRY``), which records, then runs the real reader. The
parent sees only each node's latest facts (``wire.py``), not the events;
for each node of each batch handed to its view it writes ``{"applied":
node, "deleted": ..., "unusable": ...}`` (``EventListener.on_parsed``), so
a process that follows the host's reader, and parses nothing, shows what
it heard too.

It lives outside ``tests.functional`` on purpose: importing that package
imports Nova's functional harness, which monkey-patches eventlet, and a
listener on native threads in an eventlet-patched process hears nothing.
"""
import json
import logging
import os
import sys
import threading
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from oslo_concurrency import lockutils  # noqa: F401  registers lock_path
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from nova_drain_filters.clients import ironic
from nova_drain_filters.ironic_view import events
from nova_drain_filters.ironic_view import node_table
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import reader

CONF = cfg.CONF
#: Where the reader process writes: it inherits this process's environment.
OUT_ENV = "NDF_TEST_EVENTS_OUT"


def record_parsed(out_path: str) -> None:
    """Write one line per node event ``parse_event`` makes, in this
    process (lines appended whole, so two processes share the file)."""
    out = open(out_path, "a", buffering=1)
    lock = threading.Lock()
    original = notifications.parse_event

    def parse_event(event_type: Any, payload: Any
                    ) -> notifications.NodeEvent | None:
        event = original(event_type, payload)
        if event is not None:
            with lock:
                out.write(json.dumps({"event": event.event_type,
                                      "node": event.node_uuid}) + "\n")
        return event

    notifications.parse_event = parse_event  # type: ignore[assignment]


def record_applied(out_path: str) -> None:
    """Write one line per node of each batch the view is handed."""
    out = open(out_path, "a", buffering=1)
    lock = threading.Lock()
    original = events.EventListener.on_parsed

    def on_parsed(self: events.EventListener,
                  latest: dict[str, notifications.Pending],
                  *counts: int) -> Any:
        with lock:
            for node, value in latest.items():
                packed = not isinstance(value, notifications.NodeEvent)
                out.write(json.dumps({
                    "applied": node, "deleted": value is None,
                    "unusable": packed and value is not None
                    and node_table.is_unusable(value)}) + "\n")
        return original(self, latest, *counts)

    events.EventListener.on_parsed = on_parsed  # type: ignore[method-assign]


def main(transport_url: str, ironic_url: str, lock_path: str,
         out_path: str, host_reader: str | None = None) -> None:
    # INFO and up on standard error (the test's log of this process), as
    # a scheduler logs; the reader's lines come through this process.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    drain_conf.register_opts(CONF)
    CONF([], project="nova")
    CONF.set_override("lock_path", lock_path, "oslo_concurrency")
    if host_reader is not None:
        CONF.set_override("baremetal_notifications_host_reader",
                          host_reader == "true", "drain_filters")
    CONF.set_override("baremetal_notifications", True, "drain_filters")
    CONF.set_override("baremetal_notifications_url", transport_url,
                      "drain_filters")
    CONF.set_override("baremetal_refresh_interval", 600, "drain_filters")
    CONF.set_override("baremetal_max_snapshot_age", 900, "drain_filters")

    def client() -> ironic.IronicClient:
        return ironic.IronicClient(ks_adapter.Adapter(
            ks_session.Session(timeout=10), endpoint_override=ironic_url,
            service_type="baremetal"))

    # Every node event is parsed in one of two places: the reader process
    # (reader.py), or this one (our consumer in process, or
    # oslo.messaging's listener). A notification that changes nothing (an
    # announced .start) is parsed away.
    os.environ[OUT_ENV] = out_path
    reader.ENTRY = "tests.event_listener_child"
    record_parsed(out_path)
    record_applied(out_path)
    out = open(out_path, "a", buffering=1)
    view = ironic_view.IronicView(client)
    view.ensure_running()
    listener = view._events
    assert listener is not None
    while listener.broker_up is not True:
        threading.Event().wait(0.05)
    out.write(json.dumps({"pool": listener.pool, "up": listener.broker_up})
              + "\n")
    sys.stdin.read()  # until the parent closes it
    view.stop()


def reader_main(argv: list[str]) -> int:
    """This module as the view's reader: record, then read."""
    from nova_drain_filters import event_reader
    record_parsed(os.environ[OUT_ENV])
    sys.argv[1:] = argv
    return event_reader.main()


if __name__ == "__main__":
    if "--fd" in sys.argv:  # started by ReaderProcess as reader.ENTRY
        sys.exit(reader_main(sys.argv[1:]))
    main(*sys.argv[1:6])
