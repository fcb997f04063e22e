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

"""Nova functional test bases with a real Ironic behind the drain filters.

``BaremetalTestBase``: one nova-compute fronts several nodes whose UUIDs
are real Ironic node UUIDs (``FakeIronicDriver``); the filters learn of
their state from the Ironic view's refresher. ``EventModeTestBase`` adds a
real broker that Ironic publishes its notifications to.
"""
import time
from collections.abc import Callable

from tests.functional import base
from tests.functional import fake_ironic_driver
from tests.functional.services import ironic_client
from tests.functional.services import ironic_server
from tests.functional.services import rabbitmq_server

REFRESH = 1


class BaremetalTestBase(base.DrainTestBase):
    HOSTS = ("bm-compute",)
    COMPUTE_DRIVER = "drain_fake_ironic.FakeIronicDriver"
    DRAIN_OPTIONS = {"baremetal_refresh_interval": REFRESH,
                     "baremetal_max_snapshot_age": 60}
    #: name -> how to prepare the node in Ironic before Nova starts.
    NODES: dict[str, str] = {}

    def ironic_extra_config(self) -> dict[str, dict[str, str | int | bool]]:
        """ironic.conf sections over the defaults (event mode adds some)."""
        return {}

    def setUp(self) -> None:
        server = self.useFixture(ironic_server.IronicServerFixture(
            extra_config=self.ironic_extra_config()))
        self.ironic_fixture = server
        self.ironic_url = server.url
        self.ironic = ironic_client.IronicTestClient(server.url)
        self.addCleanup(self.ironic.close)
        self.nodes = {name: self._prepare(name, how)
                      for name, how in self.NODES.items()}
        self.by_uuid = {uuid: name for name, uuid in self.nodes.items()}
        driver = fake_ironic_driver.FakeIronicDriver
        self.addCleanup(setattr, driver, "NODES", driver.NODES)
        driver.NODES = list(self.nodes.values())
        super().setUp()
        self.wait_for_first_listing()

    def wait_for_first_listing(self) -> None:
        """Nova started the refresher when it loaded the filters. Wait for a
        listing that started after the compute node records were written,
        so that the node deleted from Ironic counts as known before it.
        """
        self.wait_for_refresh_after(time.monotonic())

    def _prepare(self, name: str, how: str) -> str:
        node = self.ironic.make_available_node(name=name)
        uuid = node["uuid"]
        self.ironic.set_power_state(uuid, "power off")
        if how == "maintenance":
            self.ironic.set_maintenance(uuid, True, reason="disk swap")
        elif how == "manageable":
            self.ironic.manage(uuid)
        elif how == "clean failed":
            self.ironic.manage(uuid)
            self.ironic.fail_cleaning(uuid)
        elif how == "deleted":
            self.ironic.delete_node(uuid)
        return uuid

    def node_of(self, server: dict) -> str:
        return self.by_uuid[server["OS-EXT-SRV-ATTR:hypervisor_hostname"]]

    def wait_for_refresh_after(self, moment: float, timeout: float = 15) -> None:
        """Wait until the view holds a listing that started after moment.

        Take ``moment`` after the change has been made (the Ironic calls
        returned), never before: a listing that starts in between may read
        the old state.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snap = self.drain.view.trusted()
            if snap is not None and snap.started_at > moment:
                return
            time.sleep(0.05)
        self.fail(f"no Ironic refresh within {timeout}s")


class EventModeTestBase(BaremetalTestBase):
    NODES = {"a": "available", "b": "available", "c": "available"}

    def setUp(self) -> None:
        self.broker = self.useFixture(
            rabbitmq_server.RabbitMQServerFixture()).server
        # nova.conf as an operator writes it for event mode.
        self.DRAIN_OPTIONS = rabbitmq_server.drain_event_options(
            self.broker.transport_url)
        super().setUp()
        events = self.drain.view._events
        assert events is not None, "the view did not start its listener"
        self.events = events
        self.wait_until("the listener settles", lambda: self.events.settled,
                        timeout=60)

    def wait_for_first_listing(self) -> None:
        # With a 600 s interval the next listing is far off; no node here is
        # deleted before the start, so any trusted listing will do. The
        # listener lists once more when it first connects (setUp waits for
        # that below).
        self.wait_until("a first listing",
                        lambda: self.drain.view.trusted() is not None)

    def ironic_extra_config(self) -> dict[str, dict[str, str | int | bool]]:
        return rabbitmq_server.ironic_notification_config(
            self.broker.transport_url)

    def wait_until(self, what: str, check: Callable[[], object],
                   timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {timeout}s")
            time.sleep(0.02)

    def in_view(self, name: str) -> object:
        snap = self.drain.view.trusted()
        assert snap is not None
        return snap.nodes.get(self.nodes[name])

    def maintenance(self, name: str) -> bool:
        node = self.in_view(name)
        return node is not None and bool(node.maintenance)
