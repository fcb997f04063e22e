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

"""Placement through the client nova-scheduler itself uses.

Inside nova-scheduler the pre-filter talks to placement through Nova's
report client, ``report_client_singleton()`` in
``nova/scheduler/client/report.py``: the same ``[placement]`` credentials,
the same connection pool, and the client Nova's functional harness patches.
Its public ``get(url, version, global_request_id)`` and
``put(url, data, version, global_request_id)`` return the response whatever
its status (``SchedulerReportClient._create_client``'s adapter does not
raise on one), so errors are mapped here.

Importing this module imports Nova: where Nova is not installed the caller
falls back to its own adapter (``clients/placement.py``).
"""
import threading
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from keystoneauth1 import exceptions as ks_exc
from nova.scheduler.client import report
from oslo_log import log as logging

from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement

LOG = logging.getLogger(__name__)

#: Attribute of the wrapper on a watched report client: its state.
_WATCH_MARK = "_nova_drain_filters_watch"
#: Held while wrapping, so two first requests do not wrap twice.
_watch_lock = threading.Lock()


class CandidateRepair(Protocol):
    """What watches Nova's allocation candidate queries for trait trouble."""

    #: Goes up each time a forbidden trait placement had lost is re-created.
    repairs: int

    def repair(self, global_request_id: str | None) -> None:
        """A query failed: re-create any forbidden trait placement lost."""


def _check(resp: Any, method: str, url: str, ok: tuple[int, ...]) -> None:
    """Raise the typed error our own clients raise for the same answer."""
    if resp.status_code in ok:
        return
    message = http.error_message(resp.text,
                                 resp.headers.get("content-type", ""))
    raise http.error_type(resp.status_code)(
        "placement", method, url, resp.status_code, message,
        http.request_id_of(resp))


class NovaPlacementTraits:
    """Makes sure custom traits exist, through Nova's report client."""

    def __init__(
        self, get_client: Callable[[], Any] = report.report_client_singleton,
    ) -> None:
        # Looked up on every use: Nova keeps one client per process
        # (report.PLACEMENTCLIENT), and its tests reset it between tests.
        self._get_client = get_client

    def existing_traits(
        self, names: Sequence[str], global_request_id: str | None = None,
    ) -> set[str]:
        """Return which of ``names`` placement knows, in one request."""
        wanted = sorted(set(names))
        if not wanted:
            return set()
        url = "/traits?name=in:" + ",".join(wanted)
        resp = self._send("get", url, (200,), global_request_id)
        return set(resp.json().get("traits", [])) & set(wanted)

    def create_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> None:
        """Create a custom trait; idempotent (201 created, 204 existed).

        The request Nova's own ``_ensure_traits`` sends.
        """
        self._send("put", f"/traits/{name}", (201, 204), global_request_id)

    def roots_with_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> list[str]:
        """Names of the root providers carrying ``name``, in one request."""
        url = f"/resource_providers?required={name}"
        resp = self._send("get", url, (200,), global_request_id,
                          placement.REQUIRED_TRAITS_VERSION)
        return placement.root_names(resp.json().get("resource_providers", []))

    def _send(self, method: str, url: str, ok: tuple[int, ...],
              global_request_id: str | None,
              version: str = placement.TRAITS_VERSION) -> Any:
        client = self._get_client()
        kwargs = {"version": version,
                  "global_request_id": global_request_id}
        try:
            if method == "put":
                resp = client.put(url, None, **kwargs)
            else:
                resp = client.get(url, **kwargs)
        except ks_exc.ClientException as exc:
            raise http.ApiError("placement", method.upper(), url, None,
                                f"{type(exc).__name__}: {exc}") from None
        _check(resp, method.upper(), url, ok)
        return resp

    def watch(self, handler: CandidateRepair) -> None:
        """Retry Nova's candidate query once when ``handler`` repaired.

        Nova turns a placement error into no candidates:
        ``SchedulerReportClient.get_allocation_candidates`` returns
        ``(None, None, None)`` for any status but 200 (a 400 ``No such
        trait(s)`` among them; ``safe_connect`` returns None when placement
        cannot be reached), and ``SchedulerManager.select_destinations``
        (``nova/scheduler/manager.py``) raises ``NoValidHost`` on it. So
        this wraps that method on the process's client, once: on a failed
        query it lets ``handler`` check that the forbidden traits still
        exist, re-creating any that was deleted, and if one was re-created
        (here or by a concurrent request) sends the query again. A healthy
        query costs one function call; no response text is parsed.
        """
        client = self._get_client()
        if not self._rewatch(client, handler):
            with _watch_lock:
                if not self._rewatch(client, handler):
                    _wrap(client, handler)

    @staticmethod
    def _rewatch(client: Any, handler: CandidateRepair) -> bool:
        """If ``client`` is watched already, point it at ``handler``."""
        current = vars(client).get("get_allocation_candidates")
        state = getattr(current, _WATCH_MARK, None)
        if state is None:
            return False
        state["handler"] = handler  # the latest guard (tests reset it)
        return True


def _wrap(client: Any, handler: CandidateRepair) -> None:
    original = client.get_allocation_candidates
    state = {"handler": handler}

    def get_allocation_candidates(context: Any, resources: Any) -> Any:
        guard = state["handler"]
        before = guard.repairs
        result = original(context, resources)
        if result is None or result[0] is not None:
            return result
        try:
            guard.repair(getattr(context, "global_id", None))
        except Exception:  # never raise into the scheduler
            LOG.exception("Could not check the forbidden traits after a "
                          "failed allocation candidate query")
            return result
        if guard.repairs != before:
            result = original(context, resources)
        return result

    setattr(get_allocation_candidates, _WATCH_MARK, state)
    client.get_allocation_candidates = get_allocation_candidates
