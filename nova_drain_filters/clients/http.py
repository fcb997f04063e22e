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

"""One typed HTTP layer on keystoneauth1, shared by the scheduler side and CLI.

Every request names its microversion. Errors are mapped here and only here:
whatever a service, a proxy or the network does, callers get an ``ApiError``
with a readable one-line message, never a raw ``requests`` or keystoneauth
exception and never a ``json`` traceback from an HTML error page.
"""
import html
import json
import re
from collections.abc import Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

_TAGS = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
MAX_MESSAGE = 300


class ApiError(Exception):
    """A request failed; ``status`` is None when no HTTP answer came."""

    def __init__(
        self,
        service: str,
        method: str,
        url: str,
        status: int | None,
        message: str,
        request_id: str | None = None,
    ) -> None:
        self.service = service
        self.method = method
        self.url = url
        self.status = status
        self.message = message
        self.request_id = request_id
        where = f"{service} {method} {url}"
        what = f"HTTP {status}: {message}" if status else message
        super().__init__(f"{where}: {what}")


def _first_text(value: Any) -> str | None:
    """Dig the human message out of the error bodies OpenStack services send."""
    if isinstance(value, str):
        # Ironic double-encodes: {"error_message": "{\"faultstring\": ...}"}
        if value.startswith("{"):
            try:
                return _first_text(json.loads(value)) or value
            except ValueError:
                return value
        return value
    if isinstance(value, list):
        for item in value:
            found = _first_text(item)
            if found:
                return found
        return None
    if isinstance(value, Mapping):
        for key in ("detail", "faultstring", "message", "title",
                    "error_message", "errors", "error"):
            if key in value:
                found = _first_text(value[key])
                if found:
                    return found
        # Nova wraps its message: {"itemNotFound": {"message": ..., "code": ..}}
        for item in value.values():
            if isinstance(item, Mapping):
                found = _first_text(item)
                if found:
                    return found
    return None


def error_message(body: str, content_type: str = "") -> str:
    """A one-line message from an error body: JSON, HTML or plain text."""
    text = body or ""
    if "json" in content_type or text.lstrip().startswith(("{", "[")):
        try:
            found = _first_text(json.loads(text))
        except ValueError:
            found = None
        if found:
            text = found
    text = html.unescape(_TAGS.sub(" ", text))
    # Placement puts the title before the detail; keep the message short.
    text = _SPACE.sub(" ", text).strip()
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return text or "(empty response body)"


class ServiceClient:
    """A keystoneauth1 Adapter for one service, with typed JSON helpers."""

    #: Name used in error messages, e.g. ``placement``.
    service = "service"

    def __init__(self, adapter: ks_adapter.Adapter) -> None:
        self.adapter = adapter
        #: Requests sent so far, for request-count figures.
        self.requests = 0

    def request(
        self,
        method: str,
        url: str,
        *,
        microversion: str,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200, 201, 202, 204),
    ) -> tuple[int, Any]:
        """Send one request; return (status, decoded JSON or None).

        Raises ApiError for a status outside ``ok``, a connection failure, a
        timeout, or a 2xx body that is not JSON.
        """
        kwargs: dict[str, Any] = {
            "microversion": microversion,
            "raise_exc": False,
            "headers": dict(headers or {}),
        }
        if json_body is not None:
            kwargs["json"] = json_body
        self.requests += 1
        try:
            resp = self.adapter.request(url, method, **kwargs)
        except ks_exc.ClientException as exc:
            # ConnectFailure, ConnectTimeout, EndpointNotFound, auth errors...
            raise ApiError(self.service, method, url, None,
                           f"{type(exc).__name__}: {exc}") from None
        request_id = resp.headers.get(
            "x-openstack-request-id"
        ) or resp.headers.get("x-compute-request-id")
        if resp.status_code not in ok:
            raise ApiError(
                self.service, method, url, resp.status_code,
                error_message(resp.text, resp.headers.get("content-type", "")),
                request_id,
            )
        if not resp.content:
            return resp.status_code, None
        try:
            return resp.status_code, resp.json()
        except ValueError:
            raise ApiError(
                self.service, method, url, resp.status_code,
                "response is not JSON: " + error_message(resp.text),
                request_id,
            ) from None

    def get(self, url: str, *, microversion: str) -> Any:
        """GET and return the decoded JSON body."""
        return self.request("GET", url, microversion=microversion)[1]


def adapter_from_conf(
    conf: cfg.ConfigOpts, group: str, service_type: str
) -> ks_adapter.Adapter:
    """Build an Adapter from a conf section Nova already has.

    ``[placement]`` and ``[ironic]`` carry keystoneauth's session, auth and
    adapter options (registered by ``nova/conf/placement.py`` and
    ``nova/conf/ironic.py``), so the operator configures nothing twice. This
    mirrors ``nova.utils.get_ksa_adapter`` without importing Nova.
    """
    session = ks_loading.load_session_from_conf_options(conf, group)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    adapter = ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, raise_exc=False
    )
    if not adapter.service_type:
        adapter.service_type = service_type
    return adapter
