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

"""Fixtures for Nova functional tests, in Nova's tree or downstream.

Use them before the scheduler service starts (Nova loads filters when its
HostManager is created)::

    class MyTest(integrated_helpers._IntegratedTestBase):
        def _setup_scheduler_service(self):
            self.useFixture(ndf_fixtures.DrainFilters())
            return super()._setup_scheduler_service()

The pre-filter reaches placement through Nova's own report client, which
Nova's ``PlacementFixture`` already patches, so no placement setting is
needed.

Everything is undone at clean-up: options, the pre-filter in Nova's
``ALL_REQUEST_FILTERS``, and the module caches.
"""
import os
import sys
from collections.abc import Iterable
from typing import Any

import fixtures
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_config import fixture as oslo_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from nova_drain_filters import request_filter
from nova_drain_filters.filters import FILTER_CLASSES
from nova_drain_filters.filters import summary

CONF = cfg.CONF
ALL_FILTERS = "nova_drain_filters.filters.all_filters"
OUR_FILTER_NAMES = tuple(cls.__name__ for cls in FILTER_CLASSES)


def api_paste_config() -> str | None:
    """Where the nova wheel put ``api-paste.ini`` (``<prefix>/etc/nova``)."""
    for prefix in (sys.prefix, sys.base_prefix):
        path = os.path.join(prefix, "etc", "nova", "api-paste.ini")
        if os.path.exists(path):
            return path
    return None


def placement_fixture(test: Any) -> Any:
    """The PlacementFixture of a Nova ``_IntegratedTestBase`` test.

    ``nova/tests/functional/integrated_helpers.py``
    ``_IntegratedTestBase.setUp`` keeps it as ``self.placement_fixture`` from
    Nova 33 on; Nova 31 and 32 keep only ``self.placement``, the fixture's
    ``PlacementApiClient``, whose ``fixture`` attribute is the fixture
    (``nova/tests/functional/fixtures.py``). :class:`PlacementAuth` needs
    the fixture's ``endpoint`` and ``token``.
    """
    fixture = getattr(test, "placement_fixture", None)
    if fixture is None:
        fixture = test.placement.fixture
    return fixture


def config_fixture(conf: Any) -> Any:
    """An oslo.config ``Config`` fixture that undoes only its own changes.

    oslo.config's fixture resets the whole ``conf`` on clean-up
    (``ConfigOpts.reset`` unsets every default and override). Inside a Nova
    test that also drops what Nova's ``ConfFixture`` set
    (``nova/tests/fixtures/conf.py``), among them ``manager_shutdown_timeout
    = 0``. On Nova 33, ``ComputeManager.graceful_shutdown``
    (``nova/compute/manager.py``) then sleeps the real default, 160 s, as
    each compute stops: minutes per test. This one restores each override
    it replaced, unregisters its options and leaves the rest alone.
    """
    class OwnChangesConfig(oslo_fixture.Config):
        def setUp(self) -> None:
            # Not Config.setUp, which registers conf.reset.
            fixtures.Fixture.setUp(self)
            self._registered_config_opts = {}
            self._default_config_files = getattr(
                self.conf, "default_config_files", None)
            self._default_config_dirs = getattr(
                self.conf, "default_config_dirs", None)
            self.addCleanup(self._reset_default_config_files)
            self.addCleanup(self._reset_default_config_dirs)
            self.addCleanup(self._unregister_config_opts)
            # What reset() did first, without unsetting anyone's defaults:
            # unregistering needs the parsed arguments gone.
            self.addCleanup(self.conf.clear)

        def config(self, **kw: Any) -> None:
            group = kw.pop("group", None)
            for name, value in kw.items():
                info = self.conf._get_opt_info(name, group)
                if "override" in info:
                    self.addCleanup(self.conf.set_override, name,
                                    info["override"], group)
                else:
                    self.addCleanup(self.conf.clear_override, name, group)
                self.conf.set_override(name, value, group)

    return OwnChangesConfig(conf)


class NovaApiPaste(fixtures.Fixture):
    """Point Nova's harness at the wheel's ``api-paste.ini``.

    Nova's ``OSAPIFixture`` looks for ``etc/nova/api-paste.ini`` under
    site-packages; the wheel installs it under the environment's data
    directory. ``OS_WSGI__API_PASTE_CONFIG`` survives the config fixture's
    resets, where a ``[wsgi] api_paste_config`` override would not.
    """

    def _setUp(self) -> None:
        if os.environ.get("OS_WSGI__API_PASTE_CONFIG"):
            return
        path = api_paste_config()
        if path:
            self.useFixture(
                fixtures.EnvironmentVariable("OS_WSGI__API_PASTE_CONFIG", path)
            )


class PlacementAuth(fixtures.Fixture):
    """Let our own ``[placement]`` adapter reach Nova's PlacementFixture.

    Only code that builds its own adapter from ``[placement]`` needs this
    (the pre-filter does only where Nova is not installed); Nova's fixture
    patches Nova's report client, which the pre-filter uses inside Nova. It
    gets the intercepted endpoint and the noauth2 token through the
    ``admin_token`` auth plugin.
    """

    def __init__(self, endpoint: str, token: str = "admin") -> None:
        super().__init__()
        self.endpoint = endpoint
        self.token = token

    def _setUp(self) -> None:
        fixture = self.useFixture(config_fixture(CONF))
        fixture.register_opts(
            ks_loading.get_auth_plugin_conf_options("admin_token"),
            group="placement",
        )
        fixture.config(group="placement", auth_type="admin_token",
                       endpoint=self.endpoint, token=self.token)
        request_filter.reset()
        self.addCleanup(request_filter.reset)


class IronicEndpoint(fixtures.Fixture):
    """Point ``[ironic]`` at an Ironic without auth (a test's own server)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def _setUp(self) -> None:
        fixture = self.useFixture(config_fixture(CONF))
        fixture.config(group="ironic", auth_type="none",
                       endpoint_override=self.url)


class BaremetalView(fixtures.Fixture):
    """A fresh Ironic view for the test, its refresher stopped afterwards."""

    def _setUp(self) -> None:
        self.view = ironic_view.IronicView()
        ironic_view.set_view(self.view)
        self.addCleanup(ironic_view.set_view, None)
        self.addCleanup(self.view.stop)


class DrainFilters(fixtures.Fixture):
    """Enable the drain filters (and by default the pre-filter) in Nova."""

    def __init__(
        self,
        enabled: Iterable[str] = OUR_FILTER_NAMES,
        prefilter: bool = True,
        first: bool = False,
        ironic_url: str | None = None,
        **options: Any,
    ) -> None:
        """
        :param enabled: our filter names to append to ``enabled_filters``.
        :param prefilter: ``[drain_filters] placement_prefilter``.
        :param first: put our filters before Nova's, so their reasons are
            logged before a Nova filter drops the same host without one.
        :param ironic_url: an Ironic (noauth) for the baremetal filters.
        :param options: other ``[drain_filters]`` options.
        """
        super().__init__()
        self.enabled = list(enabled)
        self.prefilter = prefilter
        self.first = first
        self.ironic_url = ironic_url
        self.options = options

    def _setUp(self) -> None:
        self.useFixture(NovaApiPaste())
        drain_conf.register_opts(CONF)
        fixture = self.useFixture(config_fixture(CONF))
        available = list(CONF.filter_scheduler.available_filters)
        if ALL_FILTERS not in available:
            available.append(ALL_FILTERS)
        nova_enabled = [name for name in CONF.filter_scheduler.enabled_filters
                        if name not in self.enabled]
        if self.first:
            enabled = self.enabled + nova_enabled
        else:
            enabled = nova_enabled + self.enabled
        fixture.config(group="filter_scheduler",
                       available_filters=available, enabled_filters=enabled)
        fixture.config(group=drain_conf.GROUP,
                       placement_prefilter=self.prefilter, **self.options)
        # What the pre-filter learnt about the last test's placement.
        request_filter.reset()
        self.addCleanup(request_filter.reset)
        if self.ironic_url is not None:
            self.useFixture(IronicEndpoint(self.ironic_url))
        self.view = self.useFixture(BaremetalView()).view
        summary.reset()
        self.addCleanup(summary.reset)
        self.addCleanup(request_filter.uninstall)


_COPIED_FIELDS = (
    "vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used",
    "local_gb_used", "hypervisor_type", "hypervisor_version", "free_ram_mb",
    "free_disk_gb", "current_workload", "running_vms", "cpu_info",
    "disk_available_least", "host_ip", "supported_hv_specs",
    "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
)


def make_rebalance_duplicate(
    context: Any, placement_api: Any, live: Any, host: str,
    memory_factor: int = 4,
) -> str:
    """Leave the duplicate a racy Ironic rebalance leaves; return its uuid.

    For Nova functional tests: a second compute node record for
    ``live.hypervisor_hostname`` under ``host`` (whose service is alive),
    with its own resource provider, inventory and traits (Nova asks for
    ``root_required=OWNER_NOVA``), as after Nova bugs 1853009 and 1841481.
    ``memory_factor`` makes it look bigger, so the weighers prefer it.

    :param placement_api: Nova's ``PlacementFixture().api`` client.
    :param live: the ``objects.ComputeNode`` that really owns the node.
    """
    from nova import objects
    from oslo_utils import uuidutils

    dup = objects.ComputeNode(context)
    for field in _COPIED_FIELDS:
        if live.obj_attr_is_set(field):
            setattr(dup, field, getattr(live, field))
    dup.host = host
    dup.hypervisor_hostname = live.hypervisor_hostname
    dup.uuid = uuidutils.generate_uuid()
    dup.memory_mb = dup.free_ram_mb = live.memory_mb * memory_factor
    dup.create()
    # Placement names are unique, so the stale provider kept an old name.
    placement_api.post("/resource_providers", {
        "name": f"{live.hypervisor_hostname}-before-rebalance",
        "uuid": dup.uuid}, version="1.20")
    inventory = placement_api.get(
        f"/resource_providers/{live.uuid}/inventories",
        version="1.0").body["inventories"]
    inventory["MEMORY_MB"]["total"] = dup.memory_mb
    placement_api.put(f"/resource_providers/{dup.uuid}/inventories", {
        "resource_provider_generation": 0, "inventories": inventory},
        version="1.20")
    traits = placement_api.get(f"/resource_providers/{live.uuid}/traits",
                               version="1.6").body["traits"]
    placement_api.put(f"/resource_providers/{dup.uuid}/traits", {
        "resource_provider_generation": 1, "traits": traits}, version="1.6")
    return str(dup.uuid)
