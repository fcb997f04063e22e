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

"""The ``orphans`` benchmark's breakdown: each read ``orphan list`` could
make through the compute API, and placement's, timed alone on one client.

Placement's provider list and allocation reads are the floor: the audit
makes the same reads (one per provider, ``nova/cmd/manage.py``
``_check_orphaned_allocations_for_provider``), so no tool that judges every
allocation can be faster than they are.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nova_drain_filters import orphans
from nova_drain_filters.clients import compute

#: The oldest compute API version: what the view of a server costs
#: without 2.16's services and 2.26's tags.
OLDEST = "2.1"
#: Reads of the compute API, by the name the table shows.
HYPERVISORS = "GET /os-hypervisors/detail"
SERVERS = f"GET /servers/detail @{compute.COMPUTE_VERSION}"
SERVERS_OLD = f"GET /servers/detail @{OLDEST}"
INDEX = f"GET /servers @{OLDEST}"
MIGRATIONS = "GET /os-migrations"
#: Placement's reads, which the audit makes too.
PROVIDERS = "GET /resource_providers"
ALLOCATIONS = "provider allocations (8 in flight)"
FLOOR = "placement floor (the two above)"
ORDER = (HYPERVISORS, SERVERS, SERVERS_OLD, INDEX, MIGRATIONS, PROVIDERS,
         ALLOCATIONS, FLOOR)


def _index(nova: compute.ComputeClient) -> list[Any]:
    """Existence only: the index view, no Neutron, no flavor or addresses."""
    return list(nova._pages("/servers", "servers", {"all_tenants": "1"},
                            microversion=OLDEST))


def _servers_at(nova: compute.ComputeClient, version: str) -> list[Any]:
    return list(nova._pages("/servers/detail", "servers",
                            {"all_tenants": "1"}, microversion=version))


def time_reads(client: Any, count: Callable[[], int]
               ) -> dict[str, tuple[float, float, int]]:
    """{read: (wall s, CPU s, requests)} for each read, one after the other.

    The CPU time is this process's: with placement in-process it is all
    the work both services and the client did for the read, whatever
    else loads the machine; with placement served by other processes it
    leaves their share out.

    :param client: an ``osc_plugin.client.DrainClient``.
    :param count: the requests sent so far (the caller's counter).
    """
    nova, placement = client.nova, client.placement
    providers: list[Any] = []

    def provider_list() -> None:
        providers[:] = placement.providers()

    def allocations() -> None:
        # Every provider, as the audit reads them.
        orphans.read_allocations(placement, [p["uuid"] for p in providers])

    reads: dict[str, Callable[[], Any]] = {
        HYPERVISORS: nova.hypervisors,
        SERVERS: lambda: _servers_at(nova, compute.COMPUTE_VERSION),
        SERVERS_OLD: lambda: _servers_at(nova, OLDEST),
        INDEX: lambda: _index(nova),
        MIGRATIONS: nova.migrations_in_progress,
        PROVIDERS: provider_list,
        ALLOCATIONS: allocations,
    }
    found = {}
    for name, read in reads.items():
        before = count()
        started, cpu = time.monotonic(), time.process_time()
        read()
        found[name] = (time.monotonic() - started,
                       time.process_time() - cpu, count() - before)
    (w1, c1, n1), (w2, c2, n2) = found[PROVIDERS], found[ALLOCATIONS]
    found[FLOOR] = (w1 + w2, c1 + c2, n1 + n2)
    return found
