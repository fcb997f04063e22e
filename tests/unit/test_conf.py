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
from unittest import mock

import ddt
import testtools
from oslo_config import cfg
from oslo_config import types as cfg_types

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import traits
from nova_drain_filters.conf import validation
from tests.unit.base import ConfTestCase

GROUP = drain_conf.GROUP
#: ``[drain_filters]``'s options; ``[drain_agent]``'s are tested in
#: tests/unit/agent/test_conf.py.
OPTS = {opt.dest: opt for group, opts in drain_conf.list_opts()
        if group.name == GROUP for opt in opts}

#: The bad values every option is tried with, as they appear in nova.conf.
KINDS = {
    "empty": "",
    "negative": "-1",
    "zero": "0",
    "huge": "99999999999999999999",
    "wrong type": "ten",
    "not finite": "nan",
}


def accepted(opt: cfg.Opt, kind: str) -> bool:
    """Whether ``KINDS[kind]`` is a good value for ``opt``, by its type.

    Written from what each value means, not from the code under test: an
    empty list is "no traits"; ``0`` is a boolean (false); a number takes
    ``0`` or ``-1`` only within its declared bounds; nothing takes an empty
    number, a number beyond any sane bound, a word or NaN.
    """
    opt_type = opt.type
    if isinstance(opt_type, cfg_types.List):
        return kind == "empty"
    if isinstance(opt_type, cfg_types.Boolean):
        return kind == "zero"
    if isinstance(opt_type, cfg_types.Number):
        if kind == "empty":
            # Read as None: "unset", where the declaration has no default.
            return opt.default is None
        number = {"zero": 0, "negative": -1}.get(kind)
        if number is None:
            return False
        return ((opt_type.min is None or opt_type.min <= number)
                and (opt_type.max is None or number <= opt_type.max))
    if isinstance(opt_type, cfg_types.String):
        if opt_type.choices:
            return KINDS[kind] in opt_type.choices
        return kind != "empty"
    raise AssertionError(f"{opt.dest}: no rule for {type(opt_type)}")


CASES = [(name, kind) for name in OPTS for kind in KINDS]


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
        self.assertEqual([GROUP, "drain_agent"],
                         [group.name for group, _opts in listed])
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

    def test_empty_values_named_not_type_errors(self) -> None:
        # Each used to slip through as None or stop start-up with a raw
        # TypeError that named no option.
        for name in ("stale_node_max_age", "baremetal_page_size",
                     "baremetal_refresh_interval",
                     "ironic_missing_max_fraction"):
            conf = self.load(f"{name} =")
            exc = self.assertRaises(drain_conf.ConfigError,
                                    drain_conf.validate, conf)
            self.assertIn(f"[drain_filters] {name}: empty value", str(exc))

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


@ddt.ddt
class TestEveryOptionEveryBadValue(ConfTestCase):
    """Every option, with every kind of bad value: stopped, named, one line.

    The cases come from ``list_opts()``, so an option added later is tried
    too, without a line of test code.
    """

    @ddt.data(*CASES)
    @ddt.unpack
    def test_value(self, name: str, kind: str) -> None:
        raw = KINDS[kind]
        conf = self.load(f"{name} = {raw}".rstrip())
        if accepted(OPTS[name], kind):
            drain_conf.validate(conf)
            # An empty number is accepted only as "unset" (the default).
            self.assertEqual(kind == "empty" and OPTS[name].default is None,
                             getattr(conf.drain_filters, name) is None)
            return
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        message = str(exc)
        self.assertTrue(message.startswith(f"[{GROUP}] {name}: "), message)
        self.assertNotIn("\n", message)
        self.assertNotIn("LocationInfo", message)
        self.assertLess(len(message), 200, message)

    def test_cases_cover_every_option(self) -> None:
        self.assertEqual(set(OPTS), {name for name, _kind in CASES})
        self.assertGreaterEqual(len(OPTS), 8)

    def test_every_number_has_a_lower_bound(self) -> None:
        for name, opt in OPTS.items():
            if isinstance(opt.type, cfg_types.Number):
                self.assertIsNotNone(opt.type.min, name)


class TestCheckValueIsGeneric(testtools.TestCase):
    """The rules follow a declaration, whatever option it is."""

    def check(self, opt: cfg.Opt, value: object) -> str | None:
        return validation.check_value(opt, value)

    def test_empty_number_rejected_unless_none_is_the_default(self) -> None:
        self.assertIn("empty value", str(self.check(
            cfg.IntOpt("n", default=3, min=0), None)))
        self.assertIn("default (3)", str(self.check(
            cfg.IntOpt("n", default=3, min=0), None)))
        self.assertIsNone(self.check(cfg.IntOpt("n", default=None), None))

    def test_empty_string_rejected_unless_empty_is_the_default(self) -> None:
        self.assertIn("empty value", str(self.check(
            cfg.StrOpt("s", default="x"), "")))
        self.assertIsNone(self.check(cfg.StrOpt("s", default=""), ""))

    def test_number_without_max_has_a_ceiling(self) -> None:
        opt = cfg.IntOpt("n", default=1, min=0)
        self.assertIsNone(self.check(opt, drain_conf.NUMBER_CEILING))
        self.assertIn("too large", str(self.check(
            opt, drain_conf.NUMBER_CEILING + 1)))
        # A declared max is the ceiling instead.
        bounded = cfg.IntOpt("n", default=1, min=0,
                             max=drain_conf.NUMBER_CEILING * 2)
        self.assertIsNone(self.check(bounded, drain_conf.NUMBER_CEILING + 1))

    def test_float_must_be_finite(self) -> None:
        opt = cfg.FloatOpt("f", default=1.0, min=0.0, max=2.0)
        self.assertIn("not a finite number",
                      str(self.check(opt, float("nan"))))
        self.assertIsNotNone(self.check(opt, float("inf")))
        self.assertIsNone(self.check(opt, 1.5))

    def test_bounds_and_choices_of_the_type_apply_again(self) -> None:
        self.assertIn("greater than or equal to 1", str(self.check(
            cfg.IntOpt("n", default=1, min=1), 0)))
        self.assertIsNotNone(self.check(
            cfg.StrOpt("s", default="a", choices=["a", "b"]), "c"))
        self.assertIsNotNone(self.check(
            cfg.ListOpt("l", default=[], item_type=cfg_types.Integer(min=0)),
            [1, -1]))
        self.assertIsNone(self.check(
            cfg.ListOpt("l", default=[], item_type=cfg_types.Integer(min=0)),
            []))

    def test_bool_is_not_taken_for_a_number(self) -> None:
        self.assertIsNone(self.check(cfg.BoolOpt("b", default=True), False))


class TestNotificationOptions(ConfTestCase):
    def test_defaults(self) -> None:
        group = getattr(self.conf, GROUP)
        self.assertIs(False, group.baremetal_notifications)
        self.assertIsNone(group.baremetal_notifications_url)
        self.assertEqual("ironic_versioned_notifications",
                         group.baremetal_notifications_topic)
        self.assertEqual("ironic", group.baremetal_notifications_exchange)
        self.assertEqual(15, group.baremetal_notifications_fallback_interval)
        # A reader per process unless nova.conf says otherwise: every
        # process hears every event (issue 41).
        self.assertIs(False, group.baremetal_notifications_host_reader)

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


class TestUnknownOptions(ConfTestCase):
    """A misspelled name in nova.conf is said, not read as the default."""

    def warnings(self, conf: cfg.ConfigOpts) -> list[str]:
        with mock.patch.object(drain_conf.LOG, "warning") as warning:
            drain_conf.validate(conf)
        return [call.args[0] % call.args[1] for call in warning.call_args_list]

    def test_a_misspelled_option_is_named_with_the_closest(self) -> None:
        conf = self.load("baremetal_notification_host_reader = true",
                         "baremetal_notifications = true")
        self.assertEqual(
            ["[drain_filters] baremetal_notification_host_reader is not an "
             "option of nova-drain-filters and is ignored; did you mean "
             "baremetal_notifications_host_reader?"], self.warnings(conf))
        # And it is what oslo.config made of it: the default, off.
        self.assertFalse(
            conf.drain_filters.baremetal_notifications_host_reader)

    def test_a_name_like_nothing_gets_no_guess(self) -> None:
        conf = self.load("xyzzy = 1")
        self.assertEqual(["[drain_filters] xyzzy is not an option of "
                          "nova-drain-filters and is ignored"],
                         self.warnings(conf))

    def test_every_option_and_its_dashed_spelling_are_known(self) -> None:
        conf = self.load(*(f"{name} = {value}" for name, value in (
            ("placement_prefilter", "false"),
            ("baremetal-notifications", "true"),
            ("baremetal_notifications_host_reader", "true"))))
        self.assertEqual([], self.warnings(conf))

    def test_no_files_no_warning(self) -> None:
        self.assertEqual([], self.warnings(self.conf))

    def test_a_config_dir_is_read_too(self) -> None:
        conf_dir = os.path.join(self.tmp, "nova.conf.d")
        os.mkdir(conf_dir)
        with open(os.path.join(conf_dir, "50-drain.conf"), "w") as f:
            f.write("[drain_filters]\nplacement_prefiltre = false\n")
        conf = cfg.ConfigOpts()
        drain_conf.register_opts(conf)
        conf(args=["--config-dir", conf_dir], default_config_files=[])
        self.addCleanup(conf.reset)
        self.assertEqual(["[drain_filters] placement_prefiltre is not an "
                          "option of nova-drain-filters and is ignored; "
                          "did you mean placement_prefilter?"],
                         self.warnings(conf))
