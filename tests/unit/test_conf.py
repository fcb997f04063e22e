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

import os
import types

import fixtures
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import traits

GROUP = drain_conf.GROUP


class ConfTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.conf = cfg.ConfigOpts()
        drain_conf.register_opts(self.conf)
        self.fixture = self.useFixture(config_fixture.Config(self.conf))
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def load(self, *lines: str) -> cfg.ConfigOpts:
        """A fresh ConfigOpts loaded from a nova.conf with these lines."""
        path = os.path.join(self.tmp, "nova.conf")
        with open(path, "w") as f:
            f.write("[DEFAULT]\ndebug = False\n\n[drain_filters]\n")
            f.write("".join(line + "\n" for line in lines))
        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf(args=[], default_config_files=[path])
        self.addCleanup(conf.reset)
        return conf


class TestRegisterAndList(ConfTestCase):
    def test_register_opts_is_idempotent(self) -> None:
        drain_conf.register_opts(self.conf)
        drain_conf.register_opts(self.conf)
        self.assertEqual(0, self.conf.drain_filters.stale_node_max_age)

    def test_defaults(self) -> None:
        opts = self.conf.drain_filters
        self.assertIs(True, opts.placement_prefilter)
        self.assertEqual(list(traits.DEFAULT_FORBIDDEN), opts.forbidden_traits)
        self.assertEqual(0, opts.stale_node_max_age)
        drain_conf.validate(self.conf)

    def test_list_opts(self) -> None:
        listed = drain_conf.list_opts()
        self.assertEqual(1, len(listed))
        group, opts = listed[0]
        self.assertEqual(GROUP, group.name)
        names = [opt.dest for opt in opts]
        self.assertEqual(len(names), len(set(names)))
        for name in ("placement_prefilter", "forbidden_traits",
                     "stale_node_max_age"):
            self.assertIn(name, names)
            self.assertIn(name, self.conf.drain_filters)
        for opt in opts:
            self.assertGreater(len(opt.help.strip()), 20, opt.dest)

    def test_list_opts_returns_a_copy(self) -> None:
        count = len(drain_conf.list_opts()[0][1])
        drain_conf.list_opts()[0][1].clear()
        self.assertEqual(count, len(drain_conf.list_opts()[0][1]))


class TestValidate(ConfTestCase):
    def test_valid_overrides_pass(self) -> None:
        self.fixture.config(group=GROUP, forbidden_traits=["CUSTOM_A"],
                            stale_node_max_age=3600, placement_prefilter=False)
        drain_conf.validate(self.conf)
        self.assertEqual(["CUSTOM_A"], self.conf.drain_filters.forbidden_traits)

    def test_valid_file_passes(self) -> None:
        conf = self.load("stale_node_max_age = 86400",
                         "forbidden_traits = CUSTOM_A,CUSTOM_B_2",
                         "placement_prefilter = false")
        drain_conf.validate(conf)
        self.assertEqual(["CUSTOM_A", "CUSTOM_B_2"],
                         conf.drain_filters.forbidden_traits)
        self.assertEqual(86400, conf.drain_filters.stale_node_max_age)

    def test_empty_trait_list_is_valid(self) -> None:
        conf = self.load("forbidden_traits =")
        drain_conf.validate(conf)
        self.assertEqual([], conf.drain_filters.forbidden_traits)

    def test_negative_age_named(self) -> None:
        conf = self.load("stale_node_max_age = -5")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        self.assertIn("[drain_filters] stale_node_max_age", str(exc))
        self.assertIsInstance(exc, ValueError)

    def test_non_integer_age_named(self) -> None:
        conf = self.load("stale_node_max_age = an hour")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        self.assertIn("[drain_filters] stale_node_max_age", str(exc))

    def test_bad_traits_named(self) -> None:
        for value in ("FOO", "CUSTOM_lower", "CUSTOM_A,FOO", "CUSTOM_A-B"):
            conf = self.load(f"forbidden_traits = {value}")
            exc = self.assertRaises(drain_conf.ConfigError,
                                    drain_conf.validate, conf)
            self.assertIn("[drain_filters] forbidden_traits", str(exc))

    def test_overlong_trait_named(self) -> None:
        conf = self.load("forbidden_traits = CUSTOM_" + "A" * 250)
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        self.assertIn("[drain_filters] forbidden_traits", str(exc))

    def test_bad_placement_prefilter_named(self) -> None:
        conf = self.load("placement_prefilter = maybe")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        self.assertIn("[drain_filters] placement_prefilter", str(exc))

    def test_trait_that_bypassed_the_type_is_caught(self) -> None:
        # A value that did not come through the option type (a conf-like
        # object, a set_default from code) still meets the trait rule.
        values = {opt.dest: opt.default
                  for _group, opts in drain_conf.list_opts() for opt in opts}
        values["forbidden_traits"] = ["CUSTOM_A", "CUSTOM_lower"]
        fake = types.SimpleNamespace(
            drain_filters=types.SimpleNamespace(**values))
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, fake)
        self.assertIn("[drain_filters] forbidden_traits", str(exc))
        self.assertIn("'CUSTOM_lower'", str(exc))

    def test_snapshot_age_below_refresh_interval_named(self) -> None:
        conf = self.load("baremetal_refresh_interval = 60",
                         "baremetal_max_snapshot_age = 30")
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        self.assertIn("[drain_filters] baremetal_max_snapshot_age", str(exc))


class TestNotificationOptions(ConfTestCase):
    def test_defaults(self) -> None:
        group = getattr(self.conf, GROUP)
        self.assertIs(False, group.baremetal_notifications)
        self.assertIsNone(group.baremetal_notifications_url)
        self.assertEqual("ironic_versioned_notifications",
                         group.baremetal_notifications_topic)
        self.assertEqual("ironic", group.baremetal_notifications_exchange)
        self.assertEqual(15, group.baremetal_notifications_fallback_interval)

    def test_listed_for_the_sample(self) -> None:
        names = {opt.dest for _, opts in drain_conf.list_opts()
                 for opt in opts}
        for name in ("baremetal_notifications", "baremetal_notifications_url",
                     "baremetal_notifications_topic",
                     "baremetal_notifications_exchange",
                     "baremetal_notifications_fallback_interval"):
            self.assertIn(name, names)

    def test_url_is_secret(self) -> None:
        opts = {o.dest: o for _, group in drain_conf.list_opts()
                for o in group}
        self.assertTrue(opts["baremetal_notifications_url"].secret)

    def test_bad_values_are_named(self) -> None:
        for line, name in (
                ("baremetal_notifications_fallback_interval = 0",
                 "baremetal_notifications_fallback_interval"),
                ("baremetal_notifications_fallback_interval = 3601",
                 "baremetal_notifications_fallback_interval"),
                ("baremetal_notifications_topic = has space",
                 "baremetal_notifications_topic"),
                ("baremetal_notifications_exchange = a/b",
                 "baremetal_notifications_exchange"),
                ("baremetal_notifications = maybe",
                 "baremetal_notifications")):
            conf = self.load(line)
            exc = self.assertRaises(drain_conf.ConfigError,
                                    drain_conf.validate, conf)
            self.assertIn(f"[{GROUP}] {name}", str(exc))
