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

"""The Ironic view's intervals have upper bounds (issue 14 item 4)."""
from nova_drain_filters import conf as drain_conf
from tests.unit import base


class TestIntervalBounds(base.ConfTestCase):
    def rejected(self, *lines: str) -> str:
        conf = self.load(*lines)
        exc = self.assertRaises(drain_conf.ConfigError,
                                drain_conf.validate, conf)
        return str(exc)

    def test_huge_refresh_interval_stops_start_up(self) -> None:
        # 10000000000 killed the refresher: OverflowError in Event.wait.
        self.assertIn("[drain_filters] baremetal_refresh_interval",
                      self.rejected("baremetal_refresh_interval = 10000000000",
                                    "baremetal_max_snapshot_age = 86400"))

    def test_huge_snapshot_age_stops_start_up(self) -> None:
        self.assertIn("[drain_filters] baremetal_max_snapshot_age",
                      self.rejected("baremetal_max_snapshot_age = 86401"))

    def test_startup_wait_bounds(self) -> None:
        for value in ("-1", "51", "forever"):
            self.assertIn("[drain_filters] baremetal_startup_wait",
                          self.rejected(f"baremetal_startup_wait = {value}"))

    def test_largest_values_pass(self) -> None:
        conf = self.load("baremetal_refresh_interval = 3600",
                         "baremetal_max_snapshot_age = 86400",
                         "baremetal_startup_wait = 50")
        drain_conf.validate(conf)
        self.assertEqual(50, conf.drain_filters.baremetal_startup_wait)
        self.assertEqual(20, self.conf.drain_filters.baremetal_startup_wait)
