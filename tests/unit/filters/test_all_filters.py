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

"""all_filters(), where Nova loads the filters, starts the Ironic view."""
import fixtures
import nova.conf  # noqa: F401  (registers [ironic])

from nova_drain_filters import filters as drain_filters
from nova_drain_filters import ironic_view
from nova_drain_filters import request_filter
from tests.unit.filters import helpers


class TestAllFiltersStartsTheView(helpers.FilterTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.view = helpers.FakeIronicView()
        self.view.start = lambda: setattr(  # type: ignore[attr-defined]
            self.view, "started", self.view.started + 100)
        self.useFixture(fixtures.MockPatchObject(
            ironic_view, "get_view", lambda: self.view))
        self.conf.config(group="drain_filters", placement_prefilter=False)
        self.addCleanup(request_filter.uninstall)

    def test_started_when_enabled_and_ironic_is_configured(self) -> None:
        self.conf.config(group="ironic", auth_type="none",
                         endpoint_override="http://ironic.example:6385")
        drain_filters.all_filters()
        self.assertEqual(100, self.view.started)

    def test_keystone_credentials_count_as_configured(self) -> None:
        self.conf.config(group="ironic", auth_type="password")
        drain_filters.all_filters()
        self.assertEqual(100, self.view.started)

    def test_not_started_without_the_baremetal_filter(self) -> None:
        self.conf.config(group="ironic", auth_type="none",
                         endpoint_override="http://ironic.example:6385")
        self.conf.config(group="filter_scheduler", enabled_filters=[
            "DisabledServiceFilter", "StaleComputeNodeFilter"])
        drain_filters.all_filters()
        self.assertEqual(0, self.view.started)

    def test_not_started_on_a_cloud_without_ironic(self) -> None:
        drain_filters.all_filters()
        self.assertEqual(0, self.view.started)
