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

"""Nova's own Ironic driver in Nova's harness, against a real Ironic.

nova-compute runs ``compute_driver = ironic.IronicDriver``
(``nova/virt/ironic/driver.py``) and talks to a real Ironic on loopback
(fake-hardware, noauth) through openstacksdk: servers deploy and undeploy
through Ironic's real provision path, and every periodic copies the node's
traits and reservation into placement as in production.

One Ironic serves a whole test class (starting one costs seconds). Each
test puts its nodes in a shard of its own and sets ``[ironic] shard`` to
it, so Nova's driver sees that test's nodes only
(``IronicDriver._refresh_cache`` lists ``shard=CONF.ironic.shard``).
"""
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any
from typing import ClassVar

import fixtures
from openstack import proxy as sdk_proxy

from tests.functional import base
from tests.functional.services import ironic_client
from tests.functional.services import ironic_server
from tests.functional.services import process
from tests.functional.services import rabbitmq_server

# Nova's harness stubs openstack.proxy.Proxy.get_endpoint for every test
# (nova/tests/fixtures/nova.py OpenStackSDKFixture), which would send the
# driver's requests nowhere; the real one is put back for the baremetal
# proxy only (placement's proxy relies on the stub there).
_REAL_GET_ENDPOINT = sdk_proxy.Proxy.get_endpoint


def _baremetal_gets_real_endpoint() -> fixtures.MonkeyPatch:
    stub = sdk_proxy.Proxy.get_endpoint

    def get_endpoint(proxy: Any, *args: Any, **kwargs: Any) -> Any:
        if proxy.service_type == "baremetal":
            return _REAL_GET_ENDPOINT(proxy, *args, **kwargs)
        return stub(proxy, *args, **kwargs)
    return fixtures.MonkeyPatch("openstack.proxy.Proxy.get_endpoint",
                                get_endpoint)

RESOURCE_CLASS = "baremetal"
#: How placement names RESOURCE_CLASS (nova/utils.py normalize_rc_name).
PLACEMENT_RC = "CUSTOM_BAREMETAL"
#: Seconds the fake vendor clean step sleeps ([fake] vendor_delay): long
#: enough for two boots on a loaded 2-core machine while a node cleans.
#: No test waits for a slow clean to end.
CLEAN_SECONDS = 30
#: Ironic's fake vendor clean step, which sleeps CLEAN_SECONDS.
SLOW_CLEAN_STEP = {"interface": "vendor", "step": "log_passthrough"}
#: The view's listing interval in polling mode.
REFRESH = 1


def report(line: str) -> None:
    """Print one measured figure where the test run shows it (stderr)."""
    sys.stderr.write(f"ndf-ironic-driver: {line}\n")
    sys.stderr.flush()


def driver_ironic_config(
    broker_url: str | None,
) -> dict[str, dict[str, str | int | bool]]:
    """ironic.conf sections over the defaults for this tier."""
    sections: dict[str, dict[str, str | int | bool]] = {
        # Automated cleaning on; each node turns it off for itself until a
        # test turns it on (node.automated_clean, ironic/conductor/utils.py
        # skip_automated_cleaning), so setUp's provide is quick.
        "conductor": {"automated_clean": True},
        "fake": {"vendor_delay": str(CLEAN_SECONDS)},
        # A conductor stopped mid-clean exits at once, not after 60 s.
        "DEFAULT": {"graceful_shutdown_timeout": 1},
    }
    if broker_url:
        for name, options in rabbitmq_server.ironic_notification_config(
                broker_url).items():
            sections[name] = {**sections.get(name, {}), **options}
    return sections


class IronicDriverTestBase(base.DrainTestBase):
    """nova-compute ``HOSTS`` run Nova's Ironic driver over ``NODES``."""

    HOSTS: tuple[str, ...] = ("bm-compute",)
    COMPUTE_DRIVER = "ironic.IronicDriver"
    DRAIN_OPTIONS: dict[str, Any] = {"baremetal_refresh_interval": REFRESH,
                                     "baremetal_max_snapshot_age": 60}
    #: Node names (prefixed with the test's shard in Ironic).
    NODES: tuple[str, ...] = ("a", "b", "c")
    #: Event mode: a private broker, Ironic publishing to it.
    EVENTS = False
    #: False: no [ironic] shard (for peer_list tests; one node set per class).
    USE_SHARD = True

    ironic_srv: ClassVar[ironic_server.IronicServer]
    broker: ClassVar[rabbitmq_server.RabbitMQServer | None] = None

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        broker_url = None
        if cls.EVENTS:
            broker = rabbitmq_server.RabbitMQServer()
            cls.addClassCleanup(broker.stop)
            broker.start()
            cls.broker = broker
            broker_url = broker.transport_url
        srv = ironic_server.IronicServer(
            extra_config=driver_ironic_config(broker_url))
        cls.addClassCleanup(srv.stop)
        srv.start()
        cls.ironic_srv = srv

    def setUp(self) -> None:
        self.ironic_url = self.ironic_srv.url
        # The class's Ironic log, read when the test is reported.
        self.addDetail("ironic-log",
                       process.log_detail(self.ironic_srv.log_tail))
        self.ironic = ironic_client.IronicTestClient(self.ironic_url)
        self.addCleanup(self.ironic.close)
        self.shard = f"ndf-{uuid.uuid4().hex[:10]}"
        self.nodes = self.make_nodes(self.NODES)
        self.by_uuid = {u: n for n, u in self.nodes.items()}
        if self.EVENTS:
            assert self.broker is not None
            self.DRAIN_OPTIONS = rabbitmq_server.drain_event_options(
                self.broker.transport_url)
        super().setUp()
        self.flavor_id = self.post_baremetal_flavor()
        if self.DRAIN:
            self.wait_for_view()

    # Nova's side ----------------------------------------------------------

    def _setup_compute_service(self) -> Any:
        self.useFixture(_baremetal_gets_real_endpoint())
        # noauth Ironic: keystoneauth's 'none' plugin and a fixed endpoint
        # (nova/utils.py get_sdk_adapter loads [ironic] auth and session).
        self.flags(group="ironic", auth_type="none",
                   endpoint_override=self.ironic_url,
                   # spawn's and _unprovision's polls (min 0, an IntOpt).
                   api_retry_interval=1,
                   shard=self.shard if self.USE_SHARD else None)
        return super()._setup_compute_service()

    def post_baremetal_flavor(self) -> str:
        """A flavor for one node of RESOURCE_CLASS and nothing else.

        ``resources:VCPU=0`` and the like drop the standard classes Nova
        would ask for (``nova/scheduler/utils.py`` ``ResourceRequest``).
        """
        flavor = self.admin_api.post_flavor({"flavor": {
            "name": f"bm-{self.shard}", "ram": 1, "vcpus": 1, "disk": 0}})
        self.admin_api.post_extra_spec(flavor["id"], {"extra_specs": {
            f"resources:{PLACEMENT_RC}": "1", "resources:VCPU": "0",
            "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}})
        return str(flavor["id"])

    def boot(self, expected_state: str = "ACTIVE", **kw: Any) -> dict:
        kw.setdefault("flavor_id", self.flavor_id)
        return super().boot(expected_state=expected_state, **kw)

    def node_of(self, server: dict) -> str:
        return self.by_uuid[server["OS-EXT-SRV-ATTR:hypervisor_hostname"]]

    def periodic(self) -> float:
        """Run update_available_resource on every compute; its seconds."""
        # Nova's raise_on_error looks for any traceback in the whole log,
        # and a boot that found no host has logged one: count new ones.
        marker = "Traceback (most recent call last"
        before = self.stdlog.logger.output.count(marker)
        start = time.monotonic()
        self._run_periodics()
        took = time.monotonic() - start
        output = self.stdlog.logger.output
        if output.count(marker) > before:
            self.fail("update_available_resource logged a traceback:\n"
                      + output[max(0, output.rindex(marker) - 2000):][:6000])
        return took

    def reserved(self, name: str) -> int:
        """The node's reserved count in placement."""
        inv = self._get_provider_inventory(self.nodes[name])
        return int(inv[PLACEMENT_RC]["reserved"])

    def candidates(self) -> set[str]:
        """Node names placement offers for one RESOURCE_CLASS unit."""
        body = self.placement.get(
            f"/allocation_candidates?resources={PLACEMENT_RC}:1",
            version="1.38").body
        return {self.by_uuid[rp] for rp in body["provider_summaries"]
                if rp in self.by_uuid}

    # Ironic's side --------------------------------------------------------

    def make_nodes(self, names: tuple[str, ...]) -> dict[str, str]:
        """Create available, powered-off nodes in this test's shard."""
        return {name: self.make_node(name) for name in names}

    def make_node(self, name: str, **fields: Any) -> str:
        """Create one available, powered-off node; return its UUID."""
        node = self.ironic.create_node(
            name=f"{self.shard}-{name}", resource_class=RESOURCE_CLASS,
            shard=self.shard, automated_clean=False,
            properties={"cpu_arch": "x86_64"}, **fields)
        self.ironic.manage(node["uuid"])
        self.ironic.provide(node["uuid"])
        # Power state None is unavailable to Nova's driver
        # (_node_resources_unavailable).
        self.ironic.set_power_state(node["uuid"], "power off")
        return str(node["uuid"])

    # The Ironic view ------------------------------------------------------

    def wait_for_view(self) -> None:
        """Wait for a listing (polling) or a settled listener (events)."""
        if self.EVENTS:
            events = self.drain.view._events
            assert events is not None, "the view did not start its listener"
            self.wait_until("the listener settles", lambda: events.settled,
                            timeout=60)
        moment = time.monotonic()
        self.wait_until("a listing", lambda: (
            (snap := self.drain.view.trusted()) is not None
            and (self.EVENTS or snap.started_at > moment)))

    def excluded_by_view(self, name: str) -> bool:
        """Whether BaremetalAvailabilityFilter would reject the node now."""
        snap = self.drain.view.trusted()
        return snap is not None and bool(snap.unusable.get(self.nodes[name]))

    def wait_until(self, what: str, check: Callable[[], object],
                   timeout: float = 30, poll: float = 0.02) -> float:
        """Poll check until true; return the seconds it took."""
        start = time.monotonic()
        while not check():
            if time.monotonic() - start > timeout:
                self.fail(f"{what}: not within {timeout}s")
            time.sleep(poll)
        return time.monotonic() - start
