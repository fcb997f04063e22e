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

"""Event mode set up as baremetal.rst says: a nova.conf file, nothing else.

Issue 23 section 3: ``baremetal_refresh_interval = 600`` with
notifications on stopped nova-scheduler (``baremetal_max_snapshot_age:
120 is smaller than baremetal_refresh_interval (600)``). Here the
``[drain_filters]`` section holds those two lines only, and Nova reads the
file as nova-scheduler does (``nova.config.parse_args``); no fixture of
this project sets an option. Nova's real scheduler with the fake Ironic
driver (``tests/functional/fake_ironic_driver.py``: node names are real
Ironic node UUIDs), a real Ironic publishing to a real RabbitMQ.

The view's clock is the one thing the test controls: it jumps 500 s, past
the derived 120 s and short of the 600 s interval, with no listing in
between, to show that the healthy connection is what keeps the snapshot
trusted.
"""
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import fixtures
from nova.tests.functional import integrated_helpers
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import ironic_view
from nova_drain_filters import request_filter
from nova_drain_filters.filters import summary
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import refresher
from tests.functional import fake_ironic_driver
from tests.functional.services import ironic_client
from tests.functional.services import ironic_server
from tests.functional.services import rabbitmq_server

CONF = cfg.CONF
NOVA_CONF = """
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = nova_drain_filters.filters.all_filters
enabled_filters = DisabledServiceFilter,StaleComputeNodeFilter,
    BaremetalAvailabilityFilter,ComputeCapabilitiesFilter,
    ImagePropertiesFilter,ServerGroupAntiAffinityFilter,
    ServerGroupAffinityFilter

[ironic]
auth_type = none
endpoint_override = {ironic_url}

[oslo_messaging_notifications]
transport_url = {transport_url}

[drain_filters]
baremetal_notifications = true
baremetal_refresh_interval = 600
"""


class SkewedClock:
    """time.monotonic plus a jump the test makes."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skew


class DocumentedEventModeTest(integrated_helpers._IntegratedTestBase):
    ADMIN_API = True
    microversion = "latest"

    def setUp(self) -> None:
        # Harness plumbing only: where the nova wheel put api-paste.ini.
        self.useFixture(ndf_fixtures.NovaApiPaste())
        self.broker = self.useFixture(
            rabbitmq_server.RabbitMQServerFixture()).server
        server = self.useFixture(ironic_server.IronicServerFixture(
            extra_config=rabbitmq_server.ironic_notification_config(
                self.broker.transport_url)))
        self.ironic_url = server.url
        self.ironic = ironic_client.IronicTestClient(server.url)
        self.addCleanup(self.ironic.close)
        self.nodes = {}
        for name in ("good", "maint"):
            uuid = self.ironic.make_available_node(name=name)["uuid"]
            self.ironic.set_power_state(uuid, "power off")
            self.nodes[name] = uuid
        self.ironic.set_maintenance(self.nodes["maint"], True,
                                    reason="disk swap")
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "NODES", driver.NODES)
        driver.NODES = list(self.nodes.values())
        # A fresh scheduler process: the view Nova's filter loading starts
        # is this one, on a clock the test can move.
        self.clock = SkewedClock()
        self.view = ironic_view.IronicView(clock=self.clock)
        ironic_view.set_view(self.view)
        self.addCleanup(ironic_view.set_view, None)
        request_filter.reset()
        self.addCleanup(request_filter.reset)
        self.addCleanup(request_filter.uninstall)
        self.addCleanup(summary.reset)
        super().setUp()
        # Before Nova's fixtures check that no oslo.messaging poller is left
        # (nova/tests/fixtures/nova.py RPCPollerCleanupFixture).
        self.addCleanup(self.view.stop)

    def _setup_scheduler_service(self) -> Any:
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, "nova.conf")
        with open(path, "w") as conf_file:
            conf_file.write(NOVA_CONF.format(
                ironic_url=self.ironic_url,
                transport_url=self.broker.transport_url))
        # How nova-scheduler reads nova.conf (nova/cmd/scheduler.py main ->
        # nova/config.py parse_args -> CONF(..., default_config_files));
        # parse_args itself would register its CLI options a second time.
        # The harness's own overrides stay.
        CONF([], project="nova", default_config_files=[path])
        self.addCleanup(CONF, [], project="nova", default_config_files=[])
        return super()._setup_scheduler_service()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver="drain_fake_ironic.FakeIronicDriver")
        return self._start_compute("bm-compute")

    def wait_until(self, what: str, check: Callable[[], object],
                   timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {timeout}s")
            time.sleep(0.05)

    def node_of(self, server: dict) -> str:
        by_uuid = {uuid: name for name, uuid in self.nodes.items()}
        return by_uuid[server["OS-EXT-SRV-ATTR:hypervisor_hostname"]]

    def boot_lands_on_good(self) -> None:
        server = self._create_server(networks="none")
        self.assertEqual("good", self.node_of(server))
        self._delete_server(server)

    def test_starts_and_stays_trusted_while_connected(self) -> None:
        group = CONF.drain_filters
        # Read from the file: the interval, no age, so a derived one.
        self.assertEqual(600, group.baremetal_refresh_interval)
        self.assertTrue(group.baremetal_notifications)
        self.assertIsNone(group.baremetal_max_snapshot_age)
        self.assertEqual(120, drain_conf.max_snapshot_age(group))
        events = self.view._events
        assert events is not None, "Nova's filter loading started no listener"
        self.wait_until("the listener settles", lambda: events.settled)
        self.wait_until("a trusted snapshot",
                        lambda: self.view.trusted() is not None)
        self.boot_lands_on_good()

        # Past the derived age, short of the interval (and of the
        # watchdog's patience with a refresher that waits for it): no
        # listing comes.
        listings = self.view.refreshes
        self.clock.skew += 500
        jumped = self.clock()
        self.wait_until("the watcher looks after the jump",
                        lambda: (events.healthy_at or 0) >= jumped)
        snap = self.view.trusted()
        self.assertIsNotNone(snap, "a healthy listener lost the trust")
        assert snap is not None
        self.assertGreater(self.clock() - snap.finished_at,
                           drain_conf.max_snapshot_age(group) + 300)
        self.assertEqual(listings, self.view.refreshes)
        # And the filters still decide on it: maintenance keeps its reason.
        self.boot_lands_on_good()
        self.assertEqual(listings, self.view.refreshes)
        self.assertNotIn("No trusted Ironic snapshot",
                         self.stdlog.logger.output)
        self.assertNotIn("ConfigError", self.stdlog.logger.output)
        # Every name in the file's [drain_filters] is an option: none is
        # reported as ignored (conf/validation.py unknown_options).
        self.assertNotIn("is not an option", self.stdlog.logger.output)

    def test_event_threads_yield_to_the_requests(self) -> None:
        # The threads the listener nova.conf turned on started, as Nova's
        # filter loading left them: taking batches in and applying them.
        events = self.view._events
        assert events is not None, "Nova's filter loading started no listener"
        self.wait_until("the listener settles", lambda: events.settled)
        names = ("drain-ironic-events-reader", "drain-ironic-events-apply")
        threads = {t.name: t for t in threading.enumerate()
                   if t.name in names}
        self.assertEqual(set(names), set(threads))
        process_nice = os.getpriority(os.PRIO_PROCESS, os.getpid())
        main_tid = threading.main_thread().native_id
        nice = {name: os.getpriority(os.PRIO_PROCESS, thread.native_id)
                for name, thread in threads.items()}
        if refresher.green_hub() is None:
            # Native threads (Nova 34's nova-scheduler): each its own
            # niceness, the requests' thread untouched.
            expected = min(19, process_nice + priority.THREAD_NICE)
            self.assertEqual(dict.fromkeys(names, expected), nice)
        else:
            # Eventlet: every green thread is the one OS thread, which
            # must keep the process's niceness.
            self.assertEqual(dict.fromkeys(names, process_nice), nice)
        self.assertEqual(process_nice,
                         os.getpriority(os.PRIO_PROCESS, main_tid))
        self.boot_lands_on_good()
