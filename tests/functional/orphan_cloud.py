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

"""A harness cloud with live servers and orphans, for the clear races.

Live servers on every host; orphans made three ways: a server deleted while
Nova's allocation removal fails (as when placement is unreachable then), a
consumer that is no instance holding allocations on one or two hosts (what
that leaves behind, written straight into placement so that a round is
quick), and a live server's leftover allocation on another host (what an
evacuation leaves on its source).
"""
import json
import random
from typing import Any

import fixtures
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from oslo_utils import uuidutils

from nova_drain_filters import orphans
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement
from tests.functional import cli_harness

#: The allocation each made-up orphan holds on each of its hosts.
ORPHAN_RESOURCES = {"MEMORY_MB": 64, "DISK_GB": 1}
#: Nova's microversion for allocation writes without consumer types.
NOVA_ALLOCATIONS = "1.28"
#: Reads show consumer types from this microversion on.
READ_VERSION = "1.38"
REMOVAL_FAILS = ("nova.scheduler.client.report.SchedulerReportClient."
                 "delete_allocation_for_instance")


class Counting:
    """Counts the 409s placement (or Nova) answers this client."""

    conflicts = 0

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            return super().request(method, url,  # type: ignore[misc]
                                   **kwargs)
        except http.ApiError as exc:
            if exc.status == 409:
                self.conflicts += 1
            raise


class CountingPlacement(Counting, placement.PlacementClient):
    pass


class OrphanCloudBase(cli_harness.CliTestBase):
    """Three hosts with a live server each, one more on host1."""

    HOSTS = ("host1", "host2", "host3")

    def setUp(self) -> None:
        super().setUp()
        self.rp = {h: self._get_provider_uuid_by_host(h) for h in self.HOSTS}
        self.live = [self._create_server(networks="none", host=h)
                     for h in (*self.HOSTS, "host1")]
        self.project = self.live[0]["tenant_id"]
        self.user = self.live[0]["user_id"]

    # clients -------------------------------------------------------------

    def clients(self, placement_cls: type = CountingPlacement,
                compute_cls: type = compute.ComputeClient) -> tuple[Any, Any]:
        """(compute, placement) clients of our own, on their own session,
        as one ``openstack`` process would have."""
        session = ks_session.Session(auth=self.cli_auth)
        return (compute_cls(ks_adapter.Adapter(session,
                                               service_type="compute")),
                placement_cls(ks_adapter.Adapter(session,
                                                 service_type="placement")))

    # the cloud -----------------------------------------------------------

    def allocations(self, consumer: str) -> dict[str, Any]:
        """``GET /allocations/{consumer}``'s whole body."""
        return dict(self.placement.get(f"/allocations/{consumer}",
                                       version=READ_VERSION).body)

    def put_allocations(self, consumer: str, body: dict[str, Any]) -> None:
        resp = self.placement.put(f"/allocations/{consumer}", body,
                                  version=NOVA_ALLOCATIONS)
        self.assertEqual(204, resp.status, resp.body)

    def make_orphan(self, hosts: tuple[str, ...]) -> str:
        """A consumer that is no instance, holding allocations on ``hosts``."""
        consumer = uuidutils.generate_uuid()
        self.put_allocations(consumer, {
            "allocations": {self.rp[h]: {"resources": dict(ORPHAN_RESOURCES)}
                            for h in hosts},
            "project_id": self.project, "user_id": self.user,
            "consumer_generation": None})
        return consumer

    def make_leftover(self, server: dict, host: str) -> None:
        """Give a live server an allocation on ``host`` too, as an
        evacuation leaves one on its source."""
        body = self.allocations(server["id"])
        allocations = {rp: {"resources": a["resources"]}
                       for rp, a in body["allocations"].items()}
        allocations[self.rp[host]] = {"resources": dict(ORPHAN_RESOURCES)}
        self.put_allocations(server["id"], {
            "allocations": allocations, "project_id": body["project_id"],
            "user_id": body["user_id"],
            "consumer_generation": body["consumer_generation"]})

    def delete_losing_allocations(self, server: dict) -> None:
        """Delete a server while Nova's allocation removal fails."""
        with fixtures.MockPatch(REMOVAL_FAILS, return_value=False):
            self._delete_server(server)
        self.assertTrue(self.allocations(server["id"])["allocations"])

    def make_round(self, rng: random.Random, count: int) -> dict[str, Any]:
        """``count`` orphans of one or two hosts, and one leftover.

        :returns: {orphan consumer: None} plus {leftover server: the
            allocations it had before, which must be all it keeps}.
        """
        made: dict[str, Any] = {}
        for _ in range(count):
            hosts = tuple(rng.sample(self.HOSTS, rng.choice((1, 2))))
            made[self.make_orphan(hosts)] = None
        server = rng.choice(self.live)
        before = resources(self.allocations(server["id"]))
        own = self.host_of(server)
        self.make_leftover(server, rng.choice(
            [h for h in self.HOSTS if h != own]))
        made[server["id"]] = before
        return made

    def snapshot(self, skip: set[str]) -> dict[str, bytes]:
        """Every live server's allocations but ``skip``, as bytes."""
        return {s["id"]: view(self.allocations(s["id"])) for s in self.live
                if s["id"] not in skip}

    def assert_cleared(self, made: dict[str, Any], where: str) -> None:
        """Every orphan gone, each leftover's server back to what it had."""
        for consumer, before in made.items():
            after = resources(self.allocations(consumer))
            self.assertEqual(before or {}, after, f"{where}: {consumer}")
        nova, client = self.clients()
        self.assertEqual([], orphans.gather(nova, client), where)


def resources(body: dict[str, Any]) -> dict[str, Any]:
    """{provider: resources} of a ``GET /allocations/{consumer}`` body."""
    return {rp: a["resources"] for rp, a in body["allocations"].items()}


def view(body: dict[str, Any]) -> bytes:
    """What a consumer's allocations are, byte for byte: resources per
    provider, its generation (any write bumps it), project, user, type.
    The providers' own generations, which any allocation on the provider
    bumps, are left out."""
    keep = ("consumer_generation", "project_id", "user_id", "consumer_type")
    return json.dumps({"allocations": resources(body),
                       **{k: body.get(k) for k in keep}},
                      sort_keys=True).encode()
