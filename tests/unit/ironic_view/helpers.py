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

"""A base test case for IronicView (fake client, fake clock, options), and
the notification payloads the event tests share."""
import logging
from typing import Any

import fixtures
import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from nova_drain_filters.clients import http
from tests.unit import fakes
from tests.unit import ironic_fakes

THREAD = "drain-ironic-refresh"
POLICY = "No trusted Ironic snapshot"
CLEAN = ironic_fakes.ironic_node("clean", provision_state="clean wait")
FREE = ironic_fakes.ironic_node("free")
NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
OTHER = "5d3f0c1e-8a45-4c1b-9f7e-2b6a1c0d9e88"


def payload(**data: Any) -> dict[str, Any]:
    """A versioned notification payload as Ironic sends it."""
    return {"ironic_object.name": "NodePayload",
            "ironic_object.namespace": "ironic",
            "ironic_object.version": "1.17",
            "ironic_object.data": data}


class ViewTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        drain_conf.register_opts(cfg.CONF)
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group="drain_filters", baremetal_refresh_interval=15,
                         baremetal_max_snapshot_age=120,
                         baremetal_page_size=500)
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format="%(levelname)s %(message)s"))
        self.clock = fakes.FakeClock(1000.0)
        self.client = ironic_fakes.FakeIronicClient([CLEAN, FREE], pages=3)
        self.made = 0
        self.view = self.new_view()

    def factory(self) -> ironic_fakes.FakeIronicClient:
        self.made += 1
        return self.client

    def new_view(self) -> ironic_view.IronicView:
        view = ironic_view.IronicView(self.factory, self.clock)  # type: ignore
        self.addCleanup(view.stop)
        return view

    def mode(self, mode: str) -> None:
        self.conf.config(group="drain_filters", baremetal_failure_mode=mode)

    def fail_refresh(self, exc: Exception | None = None) -> bool:
        self.client.error = exc or http.ApiError(
            "ironic", "GET", "/v1/nodes", 503, "Service Unavailable")
        return self.view.refresh()

    def policy_lines(self) -> list[str]:
        return [x for x in self.log.output.splitlines() if POLICY in x]
