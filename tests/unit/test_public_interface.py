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

"""The names operators and deployment tools rely on, imported as they do.

Operators write ``nova_drain_filters.filters.all_filters`` and the filter
class names into nova.conf, test suites use ``nova_drain_filters.fixtures``,
oslo-config-generator and openstackclient find us through entry points.
A rename or a move of any of these must fail here first.
"""
import importlib
from collections.abc import Iterable
from importlib import metadata

import ddt
import fixtures
import testtools
from cliff import command
from oslo_config import cfg
from stevedore import driver
from stevedore import extension

#: The filter class names an operator puts in ``enabled_filters``.
FILTER_NAMES = ("DisabledServiceFilter", "StaleComputeNodeFilter",
                "BaremetalAvailabilityFilter")

#: The config group the options live in: ``[drain_filters]`` in nova.conf.
GROUP = "drain_filters"

#: Every ``[drain_filters]`` option an operator may have set. Pinned: a new
#: option fails test_options_are_the_pinned_ones until it is added here, and
#: a renamed one fails it for good.
OPTION_NAMES = (
    "placement_prefilter", "forbidden_traits", "stale_node_max_age",
    "baremetal_refresh_interval", "baremetal_max_snapshot_age",
    "baremetal_startup_wait", "baremetal_failure_mode",
    "ironic_missing_max_fraction", "baremetal_page_size",
    "baremetal_notifications", "baremetal_notifications_url",
    "baremetal_notifications_topic", "baremetal_notifications_exchange",
    "baremetal_notifications_fallback_interval",
    "baremetal_notifications_host_reader",
)

#: ``nova-drain-agent``'s own group, and its options, pinned alike.
AGENT_GROUP = "drain_agent"
AGENT_OPTION_NAMES = (
    "reconcile_interval", "metrics_host", "metrics_port", "pool",
    "batch_size", "batch_timeout", "max_marked_fraction",
    "compute_endpoint", "page_size",
)

#: What ``nova_drain_filters.fixtures`` offers other projects' tests.
FIXTURE_NAMES = ("DrainFilters", "PlacementAuth", "IronicEndpoint",
                 "BaremetalView", "NovaApiPaste", "api_paste_config",
                 "make_rebalance_duplicate")

#: The ``openstack drain ...`` commands and the classes behind them. Pinned
#: as OPTION_NAMES is: test_commands_are_the_pinned_ones counts them.
COMMANDS = {
    "drain_stale_list": "osc_plugin.v1.stale:ListStale",
    "drain_stale_clear": "osc_plugin.v1.stale:ClearStale",
    "drain_orphan_list": "osc_plugin.v1.orphan:ListOrphan",
    "drain_orphan_clear": "osc_plugin.v1.orphan:ClearOrphan",
    "drain_sync": "osc_plugin.v1.sync:RunSync",
    "drain_host_start": "osc_plugin.v1.host:StartHost",
    "drain_host_show": "osc_plugin.v1.host:ShowHost",
    "drain_host_finish": "osc_plugin.v1.host:FinishHost",
    "drain_host_cancel": "osc_plugin.v1.host:CancelHost",
    "drain_host_migrate": "osc_plugin.v1.migrate:MigrateHost",
    "drain_host_check": "osc_plugin.v1.check:CheckHost",
    "drain_rolling": "osc_plugin.v1.rolling:RollHosts",
    "drain_node_start": "osc_plugin.v1.node:StartNode",
    "drain_node_show": "osc_plugin.v1.node:ShowNode",
    "drain_node_cancel": "osc_plugin.v1.node:CancelNode",
    "drain_report": "osc_plugin.v1.report:ReportCapacity",
}

def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def differences(kind: str, found: Iterable[str],
                pinned: Iterable[str]) -> list[str]:
    """How the names found differ from a pinned list here, in words."""
    found_set, pinned_set = set(found), set(pinned)
    return ([f"new {kind} {name!r}: add it to the pinned list in "
             f"{__name__}" for name in sorted(found_set - pinned_set)]
            + [f"{kind} {name!r} is pinned but gone (renamed or removed?)"
               for name in sorted(pinned_set - found_set)])


@ddt.ddt
class TestPublicInterface(testtools.TestCase):
    def test_all_filters_through_novas_loader(self) -> None:
        from nova.scheduler import filters as nova_filters
        from nova.scheduler import request_filter as nova_request_filter

        # all_filters installs the pre-filter: into a copy of Nova's list.
        self.useFixture(fixtures.MockPatchObject(
            nova_request_filter, "ALL_REQUEST_FILTERS",
            list(nova_request_filter.ALL_REQUEST_FILTERS)))
        # What [filter_scheduler] available_filters names, loaded as
        # nova/loadables.py get_matching_classes loads it.
        classes = nova_filters.HostFilterHandler().get_matching_classes(
            ["nova_drain_filters.filters.all_filters"])
        self.assertEqual(set(FILTER_NAMES), {c.__name__ for c in classes})

    def test_filters_are_the_pinned_ones(self) -> None:
        from nova_drain_filters.filters import FILTER_CLASSES

        self.assertEqual([], differences(
            "filter", [cls.__name__ for cls in FILTER_CLASSES], FILTER_NAMES))

    def test_options_are_the_pinned_ones(self) -> None:
        from nova_drain_filters import conf as drain_conf

        listed = dict((group.name, opts)
                      for group, opts in drain_conf.list_opts())
        self.assertEqual([GROUP, AGENT_GROUP], list(listed))
        self.assertEqual(GROUP, drain_conf.GROUP)
        self.assertEqual([], differences(
            "option", [opt.dest for opt in listed[GROUP]], OPTION_NAMES))
        self.assertEqual([], differences(
            "agent option", [opt.dest for opt in listed[AGENT_GROUP]],
            AGENT_OPTION_NAMES))

    def test_commands_are_the_pinned_ones(self) -> None:
        self.assertEqual([], differences(
            "command", entry_points("openstack.drain.v1"), COMMANDS))

    @ddt.data(*FILTER_NAMES)
    def test_filter_class_importable_by_name(self, name: str) -> None:
        from nova.scheduler import filters as nova_filters

        cls = getattr(importlib.import_module("nova_drain_filters.filters"),
                      name)
        self.assertTrue(issubclass(cls, nova_filters.BaseHostFilter))

    @ddt.data(*FIXTURE_NAMES)
    def test_fixtures(self, name: str) -> None:
        module = importlib.import_module("nova_drain_filters.fixtures")
        self.assertTrue(callable(getattr(module, name)))

    def test_option_names(self) -> None:
        from nova_drain_filters import conf as drain_conf

        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf([])
        for name in OPTION_NAMES:
            self.assertIn(name, conf[GROUP], name)

    def test_oslo_config_opts_entry_point(self) -> None:
        # How oslo-config-generator (tox -e genconfig) loads it.
        self.assertEqual("nova_drain_filters.conf:list_opts",
                         entry_points("oslo.config.opts")[
                             "nova_drain_filters"].value)
        mgr = driver.DriverManager("oslo.config.opts", "nova_drain_filters")
        groups = {getattr(group, "name", group): [o.name for o in opts]
                  for group, opts in mgr.driver()}
        self.assertEqual([GROUP, AGENT_GROUP], list(groups))
        self.assertEqual(set(OPTION_NAMES), set(groups[GROUP]))
        self.assertEqual(set(AGENT_OPTION_NAMES), set(groups[AGENT_GROUP]))

    def test_openstack_cli_extension(self) -> None:
        eps = entry_points("openstack.cli.extension")
        self.assertEqual("osc_plugin.plugin", eps["drain"].value)
        plugin = eps["drain"].load()
        # What openstackclient's clientmanager reads from a plugin module.
        for name in ("API_NAME", "API_VERSION_OPTION", "API_VERSIONS",
                     "make_client", "build_option_parser"):
            self.assertTrue(hasattr(plugin, name), name)
        self.assertEqual("drain", plugin.API_NAME)

    @ddt.data(*sorted(COMMANDS))
    def test_command_entry_point_loads(self, name: str) -> None:
        eps = entry_points("openstack.drain.v1")
        self.assertEqual(COMMANDS[name], eps[name].value)
        self.assertTrue(issubclass(eps[name].load(), command.Command))

    def test_every_command_entry_point_loads(self) -> None:
        # Commands added later are held to the same rule, through the
        # loader cliff's CommandManager uses.
        mgr = extension.ExtensionManager(
            "openstack.drain.v1", on_load_failure_callback=self._load_failed)
        self.assertEqual(set(COMMANDS), set(mgr.names()))
        for ext in mgr:
            self.assertTrue(issubclass(ext.plugin, command.Command), ext.name)

    def _load_failed(self, _mgr: object, ep: object, exc: Exception) -> None:
        self.fail(f"{ep} did not load: {exc}")

    def test_top_level_osc_plugin_package(self) -> None:
        package = importlib.import_module("osc_plugin")
        self.assertEqual("osc_plugin", package.__name__)
        for name in ("osc_plugin.plugin", "osc_plugin.client",
                     "osc_plugin.v1"):
            importlib.import_module(name)
