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

"""``tools/cloud.sh stop NAME...``: an unknown name is refused, named."""
import io
from unittest import mock

import fixtures
import testtools

from tests.functional.cloud import __main__ as cloud_main
from tests.functional.cloud import state


class TestStop(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        # A cloud that is not up: no state file.
        self.useFixture(fixtures.EnvironmentVariable(
            state.CLOUD_DIR_ENV, self.useFixture(fixtures.TempDir()).path))

    def stop(self, names: list[str]) -> tuple[int, str]:
        with mock.patch("sys.stderr", new_callable=io.StringIO) as err:
            rc = cloud_main.stop(names)
        return rc, err.getvalue()

    def test_an_empty_name_is_shown_as_one(self) -> None:
        rc, err = self.stop([""])
        self.assertEqual(2, rc)
        self.assertEqual("cloud: no process '' (known: none: the cloud is "
                         "not up)\n", err)

    def test_each_unknown_name_is_named(self) -> None:
        rc, err = self.stop(["nova-api", "nova-shceduler"])
        self.assertEqual(2, rc)
        self.assertIn("no process 'nova-api', 'nova-shceduler' (known:", err)
