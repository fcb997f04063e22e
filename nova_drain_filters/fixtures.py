"""Fixtures for Nova functional tests, in Nova's tree or downstream.

Use them before the scheduler service starts (Nova loads filters when its
HostManager is created)::

    class MyTest(integrated_helpers._IntegratedTestBase):
        def _setup_scheduler_service(self):
            self.useFixture(ndf_fixtures.DrainFilters(
                placement=self.placement_fixture))
            return super()._setup_scheduler_service()

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
from oslo_config import fixture as config_fixture

from nova_drain_filters import baremetal
from nova_drain_filters import conf as drain_conf
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
    """Let our ``[placement]`` adapter reach Nova's PlacementFixture.

    Nova's fixture patches its own report client; our code builds a
    keystoneauth adapter from ``[placement]`` like a real deployment, so it
    gets the intercepted endpoint and the noauth2 token through the
    ``admin_token`` auth plugin.
    """

    def __init__(self, endpoint: str, token: str = "admin") -> None:
        super().__init__()
        self.endpoint = endpoint
        self.token = token

    def _setUp(self) -> None:
        fixture = self.useFixture(config_fixture.Config(CONF))
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
        fixture = self.useFixture(config_fixture.Config(CONF))
        fixture.config(group="ironic", auth_type="none",
                       endpoint_override=self.url)


class BaremetalView(fixtures.Fixture):
    """A fresh Ironic view for the test, its refresher stopped afterwards."""

    def _setUp(self) -> None:
        self.view = baremetal.IronicView()
        baremetal.set_view(self.view)
        self.addCleanup(baremetal.set_view, None)
        self.addCleanup(self.view.stop)


class DrainFilters(fixtures.Fixture):
    """Enable the drain filters (and by default the pre-filter) in Nova."""

    def __init__(
        self,
        placement: Any = None,
        enabled: Iterable[str] = OUR_FILTER_NAMES,
        prefilter: bool = True,
        first: bool = False,
        ironic_url: str | None = None,
        **options: Any,
    ) -> None:
        """
        :param placement: Nova's PlacementFixture, to reach it for traits.
        :param enabled: our filter names to append to ``enabled_filters``.
        :param prefilter: ``[drain_filters] placement_prefilter``.
        :param first: put our filters before Nova's, so their reasons are
            logged before a Nova filter drops the same host without one.
        :param ironic_url: an Ironic (noauth) for the baremetal filters.
        :param options: other ``[drain_filters]`` options.
        """
        super().__init__()
        self.placement = placement
        self.enabled = list(enabled)
        self.prefilter = prefilter
        self.first = first
        self.ironic_url = ironic_url
        self.options = options

    def _setUp(self) -> None:
        self.useFixture(NovaApiPaste())
        drain_conf.register_opts(CONF)
        fixture = self.useFixture(config_fixture.Config(CONF))
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
        if self.placement is not None:
            self.useFixture(PlacementAuth(self.placement.endpoint,
                                          self.placement.token))
        if self.ironic_url is not None:
            self.useFixture(IronicEndpoint(self.ironic_url))
        self.view = self.useFixture(BaremetalView()).view
        summary.reset()
        self.addCleanup(summary.reset)
        self.addCleanup(request_filter.uninstall)
