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

"""Small fakes shared by the unit tests."""
import datetime
from typing import Any

import testtools
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from nova.scheduler import host_manager
from requests_mock.contrib import fixture as rm_fixture


class FakeHostState(host_manager.HostState):
    """Nova's own HostState, with what the drain filters read filled in.

    Built on the real type, as nova/tests/unit/scheduler/fakes.py does, and
    stricter: a field is set only where ``HostState.__init__`` defines it
    and the service dict goes in through ``HostState.update`` (which wraps
    it read-only as the scheduler does), so a field Nova renames breaks a
    unit test, not production.
    """

    def __init__(
        self,
        host: str = "host1",
        nodename: str | None = None,
        uuid: str | None = None,
        updated: datetime.datetime | None = None,
        hypervisor_type: str = "QEMU",
        **service: Any,
    ) -> None:
        super().__init__(host, nodename or host, None)
        fields = {"uuid": uuid or f"uuid-{host}-{self.nodename}",
                  "updated": updated, "hypervisor_type": hypervisor_type}
        for name, value in fields.items():
            if not hasattr(self, name):
                raise AttributeError(f"nova's HostState has no {name!r}")
            setattr(self, name, value)
        record = {
            "host": host,
            "binary": "nova-compute",
            "disabled": False,
            "disabled_reason": None,
            "forced_down": False,
            "last_seen_up": None,
            "created_at": None,
            "updated_at": None,
        }
        self.update(service=dict(record, **service))


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakePlacement:
    """Stands in for PlacementClient.ensure_trait."""

    def __init__(self, existing: tuple[str, ...] = ()) -> None:
        self.existing = set(existing)
        self.calls: list[str] = []
        self.error: Exception | None = None
        self.before_call: Any = None

    def ensure_trait(self, name: str) -> bool:
        if self.before_call is not None:
            self.before_call()
        self.calls.append(name)
        if self.error is not None:
            raise self.error
        created = name not in self.existing
        self.existing.add(name)
        return created


def version_document(service_type: str, low: str, high: str) -> Any:
    """The version document each service answers, in its own shape.

    placement: ``GET /`` (placement/handlers/root.py); baremetal: ``GET /``
    (ironic/api/controllers/root.py); compute: ``GET /v2.1/``
    (nova/api/openstack/compute/versionsV21.py).
    """
    if service_type == "placement":
        return {"versions": [{"id": f"v{low}", "status": "CURRENT",
                              "min_version": low, "max_version": high,
                              "links": []}]}
    if service_type == "baremetal":
        entry = {"id": "v1", "status": "CURRENT", "min_version": low,
                 "version": high, "links": []}
        return {"name": "OpenStack Ironic API", "versions": [entry],
                "default_version": entry}
    return {"version": {"id": "v2.1", "status": "CURRENT", "version": high,
                        "min_version": low, "links": []}}


#: Requests a client's first use costs before its own: the version check.
VERSION_CHECK = 1


class MockedServiceTestCase(testtools.TestCase):
    """A real keystoneauth Session and Adapter in front of requests_mock.

    Subclasses name the client class, its service type and the endpoint;
    ``self.client`` talks to ``self.mock``, which answers the version
    document with a range holding the client's microversion (the client's
    first request is that check: ``self.mock.request_history[0]``).
    """

    CLIENT: Any = None
    SERVICE_TYPE = ""
    ENDPOINT = ""

    def setUp(self) -> None:
        super().setUp()
        self.mock = self.useFixture(rm_fixture.Fixture())
        pinned = getattr(self.CLIENT, "microversion", None)
        if pinned:
            major = pinned.split(".")[0]
            self.mock.get(self.ENDPOINT + "/", json=version_document(
                self.SERVICE_TYPE, f"{major}.1", f"{major}.99"))
        adapter = ks_adapter.Adapter(ks_session.Session(),
                                     endpoint_override=self.ENDPOINT,
                                     service_type=self.SERVICE_TYPE)
        self.client = self.CLIENT(adapter)

    def api_calls(self) -> list[Any]:
        """The requests sent, without the version check."""
        return [r for r in self.mock.request_history
                if not (r.method == "GET" and r.url == self.ENDPOINT + "/")]
