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

"""Servers and services through the real nova-api, with bounded waits.

Boots ask for a host with the ``host`` field of microversion 2.74
(``nova/api/openstack/compute/servers.py``): unlike ``nova:HOST`` as an
availability zone, a requested host still goes through placement and
every enabled filter, so a boot that asks for a host the filters exclude
ends in ERROR with "No valid host", and one that asks for a healthy host
goes ACTIVE there. That turns "boots avoid host X" into an assertion that
fails when X is not excluded.
"""

from __future__ import annotations

import time
from typing import Any

from tests.functional.cloud import resources

MICROVERSION = "2.74"
BOOT_TIMEOUT = 240.0
SERVICE_TIMEOUT = 120.0
HOST_FIELD = "OS-EXT-SRV-ATTR:host"


def boot(conn: Any, image: str, name: str, host: str | None = None,
         flavor: str = resources.FLAVOR) -> str:
    """POST one server with no network; its ID."""
    flavor_id = conn.compute.find_flavor(flavor, ignore_missing=False).id
    body: dict[str, Any] = {"name": name, "imageRef": image,
                            "flavorRef": flavor_id, "networks": "none"}
    if host is not None:
        body["host"] = host
    resp = conn.compute.post("/servers", json={"server": body},
                             microversion=MICROVERSION)
    resp.raise_for_status()
    return str(resp.json()["server"]["id"])


def boot_many(conn: Any, image: str, name: str, count: int,
              flavor: str = resources.FLAVOR) -> list[str]:
    """POST ``count`` servers in one request (``min_count`` = ``max_count``,
    what ``openstack server create --min N --max N`` sends): all or none;
    their IDs, found by the request's reservation ID."""
    flavor_id = conn.compute.find_flavor(flavor, ignore_missing=False).id
    body = {"name": name, "imageRef": image, "flavorRef": flavor_id,
            "networks": "none", "min_count": count, "max_count": count,
            "return_reservation_id": True}
    resp = conn.compute.post("/servers", json={"server": body},
                             microversion=MICROVERSION)
    resp.raise_for_status()
    reservation = resp.json()["reservation_id"]
    listed = conn.compute.get("/servers", params={
        "reservation_id": reservation}, microversion=MICROVERSION)
    listed.raise_for_status()
    return [str(s["id"]) for s in listed.json()["servers"]]


def show(conn: Any, server: str) -> dict[str, Any]:
    resp = conn.compute.get(f"/servers/{server}", microversion=MICROVERSION)
    resp.raise_for_status()
    return dict(resp.json()["server"])


def wait_settled(conn: Any, server: str,
                 timeout: float = BOOT_TIMEOUT) -> dict[str, Any]:
    """Wait (bounded) until the server is ACTIVE or ERROR with no task."""
    deadline = time.monotonic() + timeout
    while True:
        got = show(conn, server)
        if (got["status"] in ("ACTIVE", "ERROR", "SHUTOFF")
                and not got.get("OS-EXT-STS:task_state")):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"server {server} still {got['status']} "
                                 f"({got.get('OS-EXT-STS:task_state')}) "
                                 f"after {timeout:.0f} s")
        time.sleep(1)


def fault(server: dict[str, Any]) -> str:
    return str((server.get("fault") or {}).get("message", ""))


def delete(conn: Any, server: str, timeout: float = BOOT_TIMEOUT) -> None:
    """DELETE and wait (bounded) until Nova no longer shows it."""
    conn.compute.delete(f"/servers/{server}", microversion=MICROVERSION)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = conn.compute.get(f"/servers/{server}",
                                microversion=MICROVERSION)
        if resp.status_code == 404:
            return
        time.sleep(1)
    raise AssertionError(f"server {server} not gone after {timeout:.0f} s")


def compute_service(conn: Any, host: str) -> dict[str, Any] | None:
    """The nova-compute service of ``host`` as the API shows it, or None."""
    resp = conn.compute.get("/os-services", params={"binary": "nova-compute",
                                                    "host": host},
                            microversion="2.53")
    resp.raise_for_status()
    found = resp.json()["services"]
    return dict(found[0]) if found else None


def wait_service(conn: Any, host: str, state: str,
                 timeout: float = SERVICE_TIMEOUT) -> dict[str, Any]:
    """Wait (bounded) until the API says ``host``'s compute is ``state``
    (``up`` or ``down``: the servicegroup's verdict after
    ``service_down_time``)."""
    deadline = time.monotonic() + timeout
    while True:
        service = compute_service(conn, host)
        if service is not None and service["state"] == state:
            return service
        if time.monotonic() > deadline:
            raise AssertionError(f"nova-compute on {host} is not {state} "
                                 f"after {timeout:.0f} s: {service}")
        time.sleep(2)
