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
