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

"""A base test case for the drain filters."""
import datetime
import logging
from typing import Any

import fixtures
import testtools
from nova import objects
from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslo_utils import fixture as utils_fixture

import nova_drain_filters.filters  # noqa: F401  (registers the options)
from nova_drain_filters import ironic_view
from nova_drain_filters.filters import summary
from tests.unit import fakes

#: The scheduler's "now" in these tests (naive UTC, like timeutils.utcnow()).
NOW = datetime.datetime(2024, 5, 1, 12, 0, 0)
INSTANCE = "9b1a3a3e-7f1e-4c43-b6a7-0fbd3c5b2f11"
OURS = ["DisabledServiceFilter", "StaleComputeNodeFilter",
        "BaremetalAvailabilityFilter"]


def ago(seconds: float) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


class FilterTestCase(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        objects.register_all()
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group="filter_scheduler",
                         enabled_filters=["ComputeCapabilitiesFilter", *OURS])
        self.useFixture(utils_fixture.TimeFixture(NOW))
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format="%(levelname)s %(message)s"))
        summary.reset()
        self.addCleanup(summary.reset)

    def spec(self, rebuild: bool = False) -> Any:
        spec = objects.RequestSpec(instance_uuid=INSTANCE)
        if rebuild:
            spec.scheduler_hints = {"_nova_check_type": ["rebuild"]}
        return spec

    def host(self, host: str = "host1", **kw: object) -> fakes.FakeHostState:
        """A host whose service heartbeated 10 seconds ago, unless told."""
        kw.setdefault("last_seen_up", ago(10))
        kw.setdefault("created_at", ago(86400))
        kw.setdefault("updated", ago(30))
        return fakes.FakeHostState(host, **kw)


class FakeIronicView:
    """Stands in for nova_drain_filters.ironic_view.IronicView."""

    def __init__(self) -> None:
        self.started = 0
        self.unavailable: dict[str, list[object]] = {}
        self.missing: dict[str, object] = {}
        self.asked: list[tuple[object, ...]] = []
        self.error: Exception | None = None
        #: What trusted() returns: None, or an object with ``nodes`` and
        #: ``unusable`` like ironic_view.snapshot.Snapshot.
        self.snapshot: object = None
        self.observed: list[str] = []

    def ensure_running(self) -> None:
        self.started += 1

    def wait_until_ready(self) -> None:
        self.ensure_running()

    def trusted(self) -> object:
        return self.snapshot

    def observe(self, node_uuids: object) -> None:
        self.observed.extend(node_uuids)  # type: ignore[call-overload]

    def availability_reasons(self, node_uuid: str) -> list[object]:
        self.asked.append((node_uuid,))
        if self.error is not None:
            raise self.error
        return list(self.unavailable.get(node_uuid, []))

    def missing_reason(self, node_uuid: str,
                       updated_at: object = None) -> object:
        self.asked.append((node_uuid, updated_at))
        return self.missing.get(node_uuid)


class ViewFilterTestCase(FilterTestCase):
    """``self.filt``, a ``FILTER``, reading ``self.view``, a FakeIronicView."""

    FILTER: Any = None

    def setUp(self) -> None:
        super().setUp()
        self.filt = self.FILTER()
        self.view = FakeIronicView()
        self.useFixture(fixtures.MockPatchObject(
            ironic_view, "get_view", lambda: self.view))


def ironic_host(node: str, host: str = "ironic-compute",
                **kw: object) -> fakes.FakeHostState:
    kw.setdefault("last_seen_up", ago(10))
    kw.setdefault("updated", ago(30))
    return fakes.FakeHostState(host, nodename=node, uuid=node,
                               hypervisor_type="ironic", **kw)
