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

"""A Nova functional test base with the drain filters enabled.

Nova's real API, conductor, scheduler and placement (wsgi-intercept) run
in-process with the fake virt driver (``nova/tests/functional``).
"""
import datetime
import time
from collections.abc import Callable
from typing import Any

from nova import context as nova_context
from nova import objects
from nova.db.main import api as db_api
from nova.db.main import models
from nova.tests.functional import integrated_helpers

from nova_drain_filters import fixtures as ndf_fixtures

# Nova's default enabled_filters, minus ComputeFilter: DisabledServiceFilter
# makes the same decisions, with reasons. Ours run first so that their
# reasons are logged before a Nova filter drops the same host silently.
NOVA_FILTERS = [
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
]
IMAGE_B = "a2459075-d96c-40d5-893e-577ff92e721c"

#: oslo.db's error when greenthreads of Nova's in-process harness share one
#: RequestContext's transaction. Its cause, oslo.db imported before eventlet
#: patched (on Nova 32 every time), is fixed in tests/functional/__init__.py
#: and checked by test_concurrency_mode; boots still guard against it, since
#: a build it hits ends in ERROR with no allocation: the harness, not the
#: scenario.
HARNESS_RACE = "Can't upgrade a READER transaction to a WRITER"
#: Builds tried before a boot that keeps meeting HARNESS_RACE fails.
BOOT_ATTEMPTS = 3
#: How long a build may take to reach ACTIVE or ERROR, in seconds.
BUILD_SECONDS = 60.0


@db_api.pick_context_manager_writer
def backdate_compute_node(context: Any, cn_id: int, when: Any) -> None:
    """Set compute_nodes.updated_at, which compute_node_update always
    overwrites with now (``nova/db/main/api.py``)."""
    context.session.query(models.ComputeNode).filter_by(id=cn_id).update(
        {"updated_at": when}, synchronize_session=False)


@db_api.pick_context_manager_writer
def backdate_service(context: Any, service_id: int, when: Any) -> None:
    """Set services.updated_at, which every save overwrites with now
    (nova/db/main/api.py service_update), as backdate_compute_node does
    for compute nodes."""
    context.session.query(models.Service).filter_by(id=service_id).update(
        {"updated_at": when}, synchronize_session=False)


def age_service(context: Any, host: str, ago: datetime.timedelta) -> None:
    """Make host's nova-compute last seen ``ago``: its heartbeat
    (last_seen_up) and updated_at, the time the API shows
    (nova/servicegroup/drivers/db.py updated_time) and the CLI's grace
    counts from."""
    when = datetime.datetime.now(datetime.timezone.utc) - ago
    service = objects.Service.get_by_compute_host(context, host)
    service.last_seen_up = when
    service.save()
    backdate_service(context, service.id, when.replace(tzinfo=None))


class DrainTestBase(integrated_helpers._IntegratedTestBase):
    """Starts ``HOSTS`` computes; the scheduler runs with our filters."""

    ADMIN_API = True
    microversion = "latest"
    HOSTS: tuple[str, ...] = ("host1", "host2")
    #: False runs the same scenario with Nova's filters only.
    DRAIN = True
    PREFILTER = True
    DRAIN_OPTIONS: dict[str, Any] = {}
    #: The fake virt driver; fake.FakeDriver has room for many servers.
    COMPUTE_DRIVER = "fake.SmallFakeDriver"

    def setUp(self) -> None:
        self.useFixture(ndf_fixtures.NovaApiPaste())
        super().setUp()
        self.flags(instances=-1, cores=-1, ram=-1, group="quota")
        self.ctxt = nova_context.get_admin_context()

    def _setup_scheduler_service(self) -> Any:
        self.flags(enabled_filters=list(NOVA_FILTERS),
                   group="filter_scheduler")
        if self.DRAIN:
            self.drain = self.useFixture(ndf_fixtures.DrainFilters(
                prefilter=self.PREFILTER, first=True,
                ironic_url=getattr(self, "ironic_url", None),
                **self.DRAIN_OPTIONS))
        else:
            self.flags(enabled_filters=["ComputeFilter"] + NOVA_FILTERS,
                       group="filter_scheduler")
        return super()._setup_scheduler_service()

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver=self.COMPUTE_DRIVER)
        for host in self.HOSTS:
            self._start_compute(host)
        return self.computes[self.HOSTS[0]]

    # helpers -------------------------------------------------------------

    def boot(self, expected_state: str = "ACTIVE", **kw: Any) -> dict:
        return self._create_server(networks="none",
                                   expected_state=expected_state, **kw)

    def _create_server(self, name: Any = None, image_uuid: Any = None,
                       flavor_id: Any = None, networks: Any = None,
                       az: Any = None, host: Any = None,
                       expected_state: str = "ACTIVE",
                       api: Any = None) -> dict:
        """Nova's helper (integrated_helpers._create_server), whose builds
        that met HARNESS_RACE are booted again (:meth:`settle`)."""
        if expected_state != "ACTIVE":
            return super()._create_server(
                name, image_uuid, flavor_id, networks, az, host,
                expected_state=expected_state, api=api)
        # The same API and body as Nova's helper picks.
        if not api:
            api = self.api if not az and not host else self.admin_api
        if host and not api.microversion:
            api.microversion = "2.74"
            networks = "none" if networks is None else networks
        body = self._build_server(name, image_uuid, flavor_id, networks,
                                  az, host)
        return self.settle(lambda: api.post_server({"server": body}))

    def settle(self, post: Callable[[], dict]) -> dict:
        """``post()`` a server and wait until it is ACTIVE.

        A build that ended in ERROR because of HARNESS_RACE (in its fault
        or in what Nova logged meanwhile) is deleted and posted again, at
        most BOOT_ATTEMPTS times. Any other ERROR fails the test at once.
        """
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            logged = len(self.stdlog.logger.output)
            server = self.built(post())
            if server["status"] == "ACTIVE":
                return server
            fault = server.get("fault") or {}
            seen = " ".join((fault.get("message", ""),
                             fault.get("details", ""),
                             self.stdlog.logger.output[logged:]))
            if HARNESS_RACE not in seen or attempt == BOOT_ATTEMPTS:
                self.fail(f"server {server['id']} went to ERROR, not "
                          f"ACTIVE (attempt {attempt}): {fault}")
            self._delete_server(server)
            self._wait_until_deleted(server)
        raise AssertionError("unreachable")

    def built(self, server: dict) -> dict:
        """Poll ``server`` until it is ACTIVE or ERROR (with its fault)."""
        deadline = time.monotonic() + BUILD_SECONDS
        while True:
            server = self.admin_api.get_server(server["id"])
            if server["status"] == "ACTIVE" or (
                    server["status"] == "ERROR" and "fault" in server):
                return server
            if time.monotonic() > deadline:
                self.fail(f"server {server['id']} is still "
                          f"{server['status']} after {BUILD_SECONDS:.0f} s")
            time.sleep(0.1)

    def host_of(self, server: dict) -> str:
        return server["OS-EXT-SRV-ATTR:host"]

    def service_id(self, host: str) -> str:
        services = self.admin_api.get_services(binary="nova-compute",
                                               host=host)
        return services[0]["id"]

    def compute_node(self, host: str, nodename: str) -> Any:
        return objects.ComputeNode.get_by_host_and_nodename(
            self.ctxt, host, nodename)

    def add_trait(self, host: str, trait: str) -> None:
        rp_uuid = self._get_provider_uuid_by_host(host)
        self._create_trait(trait)
        traits = self._get_provider_traits(rp_uuid)
        self._set_provider_traits(rp_uuid, traits + [trait])

    def summary_lines(self) -> list[str]:
        return [line for line in self.stdlog.logger.output.splitlines()
                if "nova-drain-filters: request for instance" in line]


class RebalanceDuplicateMixin(DrainTestBase):
    """host2 owns node-x; a rebalance left a duplicate record on host1.

    The duplicate is made the way it looks after a racy Ironic rebalance
    (Nova bugs 1853009, 1841481): a second compute node row for node-x under
    host1, whose service is still alive, with its own resource provider.
    It looks bigger than anything else, so the weighers prefer it.
    """

    def setUp(self) -> None:
        super().setUp()
        host2 = self.computes["host2"]
        host2.manager.driver._set_nodes(["host2", "node-x"])
        host2.manager.update_available_resource(self.ctxt)
        live = self.compute_node("host2", "node-x")
        self.dup_uuid = ndf_fixtures.make_rebalance_duplicate(
            self.ctxt, self.placement, live, "host1")
