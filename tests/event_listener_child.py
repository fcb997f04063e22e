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
LOCK_PATH OUT`` configures ``[drain_filters]`` as an operator would, starts
the view (which starts the listener), and writes one JSON line per event it
hears to OUT: first ``{"pool": ...}`` once it listens, then
``{"event": ..., "node": ...}`` for each node event queued for the view.
It runs until its standard input closes or it is killed.

It lives outside ``tests.functional`` on purpose: importing that package
imports Nova's functional harness, which monkey-patches eventlet, and a
listener on native threads in an eventlet-patched process hears nothing.
"""
import json
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

CONF = cfg.CONF


def main(transport_url: str, ironic_url: str, lock_path: str,
         out_path: str) -> None:
    drain_conf.register_opts(CONF)
    CONF([], project="nova")
    CONF.set_override("lock_path", lock_path, "oslo_concurrency")
    CONF.set_override("baremetal_notifications", True, "drain_filters")
    CONF.set_override("baremetal_notifications_url", transport_url,
                      "drain_filters")
    CONF.set_override("baremetal_refresh_interval", 600, "drain_filters")
    CONF.set_override("baremetal_max_snapshot_age", 900, "drain_filters")

    def client() -> ironic.IronicClient:
        return ironic.IronicClient(ks_adapter.Adapter(
            ks_session.Session(timeout=10), endpoint_override=ironic_url,
            service_type="baremetal"))

    out = open(out_path, "a", buffering=1)
    lock = threading.Lock()
    # Every node event reaches the view's queue here, whoever parsed it:
    # the reader process (on_parsed), our consumer in this process
    # (on_batch) or oslo.messaging's listener (on_event). A notification
    # that changes nothing (an announced .start) is parsed away before.
    original = events.EventListener._enqueue

    def enqueue(self: events.EventListener, queued: list[Any]) -> int:
        with lock:
            for event in queued:
                out.write(json.dumps({"event": event.event_type,
                                      "node": event.node_uuid}) + "\n")
        return original(self, queued)

    events.EventListener._enqueue = enqueue  # type: ignore[method-assign]
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


if __name__ == "__main__":
    main(*sys.argv[1:5])
