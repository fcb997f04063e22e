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

"""The harness helpers in nova_drain_filters.fixtures, without a harness."""
import types

import testtools
from oslo_config import cfg

from nova_drain_filters import fixtures as ndf_fixtures


class TestConfigFixture(testtools.TestCase):
    """Undo only our own changes, so Nova's test defaults survive."""

    def setUp(self) -> None:
        super().setUp()
        self.conf = cfg.ConfigOpts()
        self.conf.register_opts([cfg.IntOpt("timeout", default=160),
                                 cfg.StrOpt("name", default="a")])
        self.conf([], default_config_files=[])

    def test_keeps_other_defaults_and_overrides(self) -> None:
        self.conf.set_default("timeout", 0)
        self.conf.set_override("name", "outer")
        fixture = ndf_fixtures.config_fixture(self.conf)
        fixture.setUp()
        fixture.config(name="inner")
        fixture.register_opt(cfg.BoolOpt("extra", default=True))
        self.assertEqual("inner", self.conf.name)
        self.assertTrue(self.conf.extra)
        fixture.cleanUp()
        # oslo's own Config fixture would leave timeout=160, name="a".
        self.assertEqual(0, self.conf.timeout)
        self.assertEqual("outer", self.conf.name)
        self.assertNotIn("extra", self.conf)

    def test_new_override_is_cleared(self) -> None:
        fixture = ndf_fixtures.config_fixture(self.conf)
        fixture.setUp()
        fixture.config(timeout=5)
        self.assertEqual(5, self.conf.timeout)
        fixture.cleanUp()
        self.assertEqual(160, self.conf.timeout)


class TestPlacementFixture(testtools.TestCase):
    """Nova 33 on keep the fixture; 31 and 32 only its API client."""

    def test_nova_33_and_later(self) -> None:
        fixture = object()
        test = types.SimpleNamespace(placement_fixture=fixture,
                                     placement=None)
        self.assertIs(fixture, ndf_fixtures.placement_fixture(test))

    def test_nova_31_and_32(self) -> None:
        fixture = object()
        test = types.SimpleNamespace(
            placement=types.SimpleNamespace(fixture=fixture))
        self.assertIs(fixture, ndf_fixtures.placement_fixture(test))
