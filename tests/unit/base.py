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

"""Base test cases shared by the unit tests."""
import os

import fixtures
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf


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
