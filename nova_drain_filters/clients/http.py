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

Every request names its microversion, and each client checks once, before
its first request, that the service supports the newest microversion it
pins. Errors are mapped here and only here: whatever a service, a proxy or
the network does, callers get an ``ApiError`` (or one of its subclasses for
the cases callers branch on) with a readable one-line message that carries
the request ID, never a raw ``requests`` or keystoneauth exception and
never a ``json`` traceback from an HTML error page.
"""
import html
import json
import re
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import TypeVar
from urllib import parse

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import discover
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

_TAGS = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
MAX_MESSAGE = 300
#: A broken server that keeps linking a next page must not loop us forever.
MAX_PAGES = 100_000

T = TypeVar("T")


class ApiError(Exception):
    """A request failed; ``status`` is None when no HTTP answer came.

    The message ends with the service's request ID when it sent one, the
    string an operator pastes into a bug report.
    """

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
        text = f"{where}: {what}"
        if request_id:
            text += f" (request-id {request_id})"
        super().__init__(text)


class NotFound(ApiError):
    """HTTP 404: the resource (or, for Ironic, a node's trait) is not there."""


class Conflict(ApiError):
    """HTTP 409: a generation changed, a node is locked, a resource is in use."""


class Forbidden(ApiError):
    """HTTP 403: a policy refused the caller; the message names the policy."""


class NoEndpoint(ApiError):
    """The catalog (or the endpoint override) has no endpoint for the service."""


class MicroversionUnsupported(ApiError):
    """The service does not support the microversion a client pins."""


#: The statuses callers branch on, and the type each is raised as.
_BY_STATUS: dict[int, type[ApiError]] = {403: Forbidden, 404: NotFound,
                                          409: Conflict}


def error_type(status: int | None) -> type[ApiError]:
    """The ApiError subclass a failed request with ``status`` is raised as."""
    return _BY_STATUS.get(status or 0, ApiError)


Version = tuple[int, int]


def parse_version(text: Any) -> Version:
    """``"1.61"`` as ``(1, 61)``; TypeError or ValueError if it is not one."""
    found = discover.normalize_version_number(text)
    if len(found) < 2:
        raise ValueError(f"not a microversion: {text!r}")
    return int(found[0]), int(found[1])


def microversion_range(
    body: Any, major: int
) -> tuple[Version, Version] | None:
    """(lowest, highest) microversion of API ``major`` in a version document.

    Reads the three shapes OpenStack services answer: placement's root
    (``versions[].min_version``/``max_version``, placement/handlers/root.py),
    Ironic's root (``versions[]`` and ``default_version`` with
    ``min_version``/``version``, ironic/api/controllers/root.py) and Nova's
    versioned root (``version`` with ``min_version``/``version``,
    nova/api/openstack/compute/versionsV21.py). None when it shows none.
    """
    entries: list[Mapping[str, Any]] = []
    if isinstance(body, Mapping):
        for key in ("version", "default_version"):
            if isinstance(body.get(key), Mapping):
                entries.append(body[key])
        if isinstance(body.get("versions"), list):
            entries += [v for v in body["versions"] if isinstance(v, Mapping)]
    best: tuple[Version, Version] | None = None
    for entry in entries:
        try:
            low = parse_version(entry.get("min_version"))
            high = parse_version(entry.get("max_version")
                                 or entry.get("version"))
        except (TypeError, ValueError, OverflowError):
            continue  # Nova's v2.0 entry: version "" (no microversions)
        if high[0] == major and (best is None or high > best[1]):
            best = (low, high)
    return best


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
    #: The newest microversion the client sends; None: no check.
    microversion: str | None = None
    #: The version document, relative to the endpoint the client uses.
    version_path = "/"

    def __init__(self, adapter: ks_adapter.Adapter) -> None:
        self.adapter = adapter
        #: Requests sent so far, for request-count figures (the version
        #: check included).
        self.requests = 0
        #: (lowest, highest) microversion, once the check has passed.
        self.supported: tuple[Version, Version] | None = None

    def check_microversion(self) -> None:
        """Make sure the service supports ``microversion``; once per client.

        One GET of the version document before the first request. A
        service too old (or too new) for the pinned microversion raises
        MicroversionUnsupported here, with both ranges in the message,
        instead of a 406 on some later call. Only a passed check is kept:
        after a failure (an unreachable or too old service), the next
        request checks again, so an upgrade is seen without a restart.
        """
        if self.microversion is None or self.supported is not None:
            return
        resp = self._send("GET", self.version_path, {"headers": {}})
        if resp.status_code != 200:
            raise self._error(resp, "GET", self.version_path)
        body = self._json(resp, "GET", self.version_path)
        wanted = parse_version(self.microversion)
        found = microversion_range(body, wanted[0])
        where = resp.url or self.version_path
        if found is None:
            raise MicroversionUnsupported(
                self.service, "GET", where, None,
                f"the version document shows no {wanted[0]}.x microversions; "
                f"this client needs {self.microversion} (does the endpoint "
                f"point at the {self.service} API?)", request_id_of(resp))
        low, high = found
        if not low <= wanted <= high:
            raise MicroversionUnsupported(
                self.service, "GET", where, None,
                f"the service supports microversions "
                f"{discover.version_to_string(low)} to "
                f"{discover.version_to_string(high)}; this client needs "
                f"{self.microversion}", request_id_of(resp))
        self.supported = found

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

        Raises ApiError (NotFound for 404, Conflict for 409, NoEndpoint
        when there is no endpoint) for a status outside ``ok``, a
        connection failure, a timeout, or a 2xx body that is not JSON; and
        MicroversionUnsupported before the first request to a service that
        does not support ``self.microversion``.
        """
        self.check_microversion()
        kwargs: dict[str, Any] = {
            "microversion": microversion,
            "headers": dict(headers or {}),
        }
        if json_body is not None:
            kwargs["json"] = json_body
        resp = self._send(method, url, kwargs)
        if resp.status_code not in ok:
            raise self._error(resp, method, url)
        if not resp.content:
            return resp.status_code, None
        return resp.status_code, self._json(resp, method, url)

    def _send(self, method: str, url: str, kwargs: dict[str, Any]) -> Any:
        self.requests += 1
        try:
            return self.adapter.request(url, method, raise_exc=False, **kwargs)
        except ks_exc.CatalogException as exc:
            # EndpointNotFound, EmptyCatalog: nothing to send the request to.
            raise NoEndpoint(self.service, method, url, None,
                             f"{type(exc).__name__}: {exc}") from None
        except ks_exc.ClientException as exc:
            # ConnectFailure, ConnectTimeout, auth errors...
            raise ApiError(self.service, method, url, None,
                           f"{type(exc).__name__}: {exc}") from None

    def _error(self, resp: Any, method: str, url: str) -> ApiError:
        return error_type(resp.status_code)(
            self.service, method, url, resp.status_code,
            error_message(resp.text, resp.headers.get("content-type", "")),
            request_id_of(resp))

    def _json(self, resp: Any, method: str, url: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise ApiError(
                self.service, method, url, resp.status_code,
                "response is not JSON: " + error_message(resp.text),
                request_id_of(resp),
            ) from None

    def get(self, url: str, *, microversion: str) -> Any:
        """GET and return the decoded JSON body."""
        return self.request("GET", url, microversion=microversion)[1]

    def pages(
        self,
        path: str,
        params: Mapping[str, str],
        *,
        microversion: str,
        items: Callable[[Any, str], list[T]],
        next_marker: Callable[[Any, list[T]], str | None],
        cursor: str = "marker",
        start: str | None = None,
    ) -> Iterator[list[T]]:
        """GET a ``limit``/``marker`` (or offset) paged list, page by page.

        ``items(body, url)`` turns one page's body into its items (raising
        ApiError on a malformed one); ``next_marker(body, items)`` is the
        marker of the next page, None when the service links none. An
        empty page ends the list whatever it links. A marker that does not
        advance, or more than ``MAX_PAGES`` pages, is an ApiError: a
        broken server must not loop us forever. A list paged by offset
        (Nova's server groups) names its ``cursor`` (``offset``) and the
        first page's ``start`` (``0``); its ``next_marker`` gives the next
        page's offset.
        """
        marker = start
        for _page in range(MAX_PAGES):
            query = dict(params, **({cursor: marker} if marker else {}))
            url = f"{path}?{parse.urlencode(query)}"
            body = self.get(url, microversion=microversion)
            found = items(body, url)
            yield found
            new_marker = next_marker(body, found) if found else None
            if new_marker is None:
                return
            if new_marker == marker:
                raise ApiError(self.service, "GET", url, 200,
                               "pagination marker did not advance")
            marker = new_marker
        raise ApiError(self.service, "GET", path, 200,
                       f"too many pages (more than {MAX_PAGES})")


def request_id_of(resp: Any) -> str | None:
    """The request ID a service sent (Nova sends it twice; either will do)."""
    headers = getattr(resp, "headers", None) or {}
    found = (headers.get("x-openstack-request-id")
             or headers.get("openstack-request-id")
             or headers.get("x-compute-request-id"))
    return str(found) if found else None


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
