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

"""Typed Nova calls that move servers: live and cold migrations, their records.

A client of its own, on the same compute endpoint as
:class:`~nova_drain_filters.clients.compute.ComputeClient`, because it pins
a newer microversion (checked once, before its first request) that only
``drain host migrate`` needs; the other drain commands keep working at 2.59.
"""
import dataclasses
from typing import Any
from urllib import parse

from nova_drain_filters import stamps
from nova_drain_filters.clients import compute
from nova_drain_filters.clients import http

#: 2.65: abort a queued or preparing live migration; 2.68: no ``force``;
#: 2.84: instance action
#: events carry ``details``. Nova 31 (the oldest supported) goes to 2.100.
MOVE_VERSION = "2.84"


@dataclasses.dataclass(frozen=True)
class ServerState:
    """A server as a move cares about it."""

    uuid: str
    name: str
    status: str
    task_state: str | None
    host: str | None
    node: str | None


@dataclasses.dataclass(frozen=True)
class MigrationRecord:
    """One row of ``GET /os-migrations``: Nova's record of one move."""

    id: int
    uuid: str
    instance_uuid: str
    status: str
    migration_type: str
    source_compute: str | None
    dest_compute: str | None
    #: Nova's stamps, seconds since the epoch on Nova's clock; whole
    #: seconds (oslo.versionedobjects' ``isotime`` drops the fraction).
    created_at: float | None = None
    updated_at: float | None = None


@dataclasses.dataclass(frozen=True)
class ServerGroup:
    uuid: str
    name: str
    policy: str
    members: tuple[str, ...]
    #: The ``max_server_per_host`` rule (2.64) of an anti-affinity group.
    max_per_host: int = 1


def _state(body: dict[str, Any]) -> ServerState:
    return ServerState(
        uuid=body["id"], name=body.get("name") or "",
        status=body.get("status", ""),
        task_state=body.get("OS-EXT-STS:task_state"),
        host=body.get("OS-EXT-SRV-ATTR:host"),
        node=body.get("OS-EXT-SRV-ATTR:hypervisor_hostname"))


def _record(body: dict[str, Any]) -> MigrationRecord:
    return MigrationRecord(
        id=int(body["id"]), uuid=str(body.get("uuid")),
        instance_uuid=body["instance_uuid"], status=body.get("status", ""),
        migration_type=body.get("migration_type", ""),
        source_compute=body.get("source_compute"),
        dest_compute=body.get("dest_compute"),
        created_at=stamps.epoch(body.get("created_at")),
        updated_at=stamps.epoch(body.get("updated_at")))


def _group(body: dict[str, Any]) -> ServerGroup:
    return ServerGroup(
        uuid=body["id"], name=body.get("name") or "",
        policy=body.get("policy") or "",
        members=tuple(body.get("members") or ()),
        max_per_host=_max_per_host(body))


def _max_per_host(group: dict[str, Any]) -> int:
    """An anti-affinity group's ``max_server_per_host`` rule, else 1
    (``nova/scheduler/filters/affinity_filter.py``
    ``ServerGroupAntiAffinityFilter``)."""
    try:
        return max(1, int((group.get("rules") or {}).get(
            "max_server_per_host", 1)))
    except (TypeError, ValueError):
        return 1


class MoveClient(compute.ComputeClient):
    """Live and cold migrations, their records, aborts and faults."""

    microversion = MOVE_VERSION

    def servers_on(self, host: str) -> list[ServerState]:
        """Every server Nova places on ``host``, of every project."""
        params = {"all_tenants": "1", "host": host}
        return [_state(s) for s in self._pages(
            "/servers/detail", "servers", params, MOVE_VERSION)]

    def server_state(self, uuid: str) -> ServerState | None:
        try:
            body = self.get(f"/servers/{uuid}", microversion=MOVE_VERSION)
        except http.NotFound:
            return None
        return _state(body["server"])

    def migration_records(self, host: str | None = None,
                          changes_since: str | None = None
                          ) -> list[MigrationRecord]:
        """Migrations from or to ``host`` (every host if None), or only
        those Nova updated at or after ``changes_since`` (ISO 8601;
        ``nova/db/main/api.py`` compares ``updated_at``)."""
        params = {}
        if host:
            params["host"] = host
        if changes_since:
            params["changes-since"] = changes_since
        return [_record(m) for m in self._pages(
            "/os-migrations", "migrations", params, MOVE_VERSION)]

    def _action(self, uuid: str, body: dict[str, Any]) -> None:
        self.request("POST", f"/servers/{uuid}/action",
                     microversion=MOVE_VERSION, json_body=body)

    def live_migrate(self, uuid: str) -> None:
        """Ask the scheduler for a destination; never a forced host.

        The 202 means only that the conductor was cast to
        (``nova/api/openstack/compute/migrate_server.py`` ``_migrate_live``
        is async from 2.34): a failed pre-check shows later as a migration
        in ``error``.
        """
        self._action(uuid, {"os-migrateLive": {
            "host": None, "block_migration": "auto"}})

    def cold_migrate(self, uuid: str) -> None:
        """A cold migration (a resize to the same flavor), scheduled."""
        self._action(uuid, {"migrate": None})

    def confirm_resize(self, uuid: str) -> None:
        """Confirm a finished cold migration: Nova frees the source."""
        self._action(uuid, {"confirmResize": None})

    def server_migration(self, uuid: str, migration_id: int
                         ) -> dict[str, Any] | None:
        """An in-progress live migration with its memory and disk counts;
        None once it is over (``server_migrations.py`` shows only those)."""
        try:
            body = self.get(f"/servers/{uuid}/migrations/{migration_id}",
                            microversion=MOVE_VERSION)
        except http.NotFound:
            return None
        found: dict[str, Any] = body["migration"]
        return found

    def abort_live_migration(self, uuid: str, migration_id: int) -> None:
        """Abort a queued, preparing or running live migration (2.65);
        the compute rolls it back to ``cancelled``
        (``nova/compute/manager.py`` ``live_migration_abort``)."""
        self.request("DELETE", f"/servers/{uuid}/migrations/{migration_id}",
                     microversion=MOVE_VERSION)

    def server_groups(self) -> list[ServerGroup]:
        """Every server group of every project, with its members
        (``server_groups.py`` ``index`` pages by limit and offset; the
        server detail list never shows a server's groups)."""
        seen = 0

        def groups(body: Any, url: str) -> list[ServerGroup]:
            return [_group(g) for g in body["server_groups"]]

        def next_offset(body: Any, page: list[ServerGroup]) -> str | None:
            nonlocal seen
            seen += len(page)  # a short page is the last
            return str(seen) if len(page) >= compute.PAGE_SIZE else None

        return [g for page in self.pages(
            "/os-server-groups", {"all_projects": "True",
                                  "limit": str(compute.PAGE_SIZE)},
            microversion=MOVE_VERSION, items=groups, next_marker=next_offset,
            cursor="offset", start="0") for g in page]

    def action_faults(self, uuid: str, actions: tuple[str, ...]
                      ) -> list[str]:
        """The details of the failed events of the newest of ``actions``
        on a server, compute events first (they carry the pre-check's own
        words; the conductor's says only NoValidHost)."""
        quoted = parse.quote(uuid, safe="")
        listed = self.get(f"/servers/{quoted}/os-instance-actions",
                          microversion=MOVE_VERSION)["instanceActions"]
        newest = [a for a in listed if a.get("action") in actions]
        if not newest:
            return []
        request_id = newest[0]["request_id"]  # Nova lists newest first
        body = self.get(f"/servers/{quoted}/os-instance-actions/{request_id}",
                        microversion=MOVE_VERSION)["instanceAction"]
        failed = [e for e in body.get("events") or ()
                  if e.get("result") == "Error"]
        failed.sort(key=lambda e: not str(e.get("event")).startswith(
            "compute_"))
        return [f"{e.get('event')}: {e.get('details') or 'no details'}"
                for e in failed]
