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

"""Where the pre-filter's traits live: Nova's report client, or our own.

Inside nova-scheduler the pre-filter and the hidden-node count reach
placement through Nova's own report client (``clients/nova_report.py``,
``report_client_singleton()``, which the harness patches too); only a
process without Nova builds an adapter from ``[placement]``.
"""
import importlib
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from oslo_config import cfg

from nova_drain_filters.clients import http
from nova_drain_filters.clients import placement

CONF = cfg.CONF


class TraitStore(Protocol):
    """Where the traits live: Nova's report client, or our own adapter."""

    def existing_traits(
        self, names: Sequence[str], global_request_id: str | None = None,
    ) -> set[str]:
        """Return which of ``names`` placement knows."""

    def create_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> None:
        """Create a custom trait (idempotent)."""

    def watch(self, handler: Any) -> None:
        """Let ``handler`` repair failed allocation candidate queries."""

    def roots_with_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> list[str]:
        """Names of the root providers carrying trait ``name``."""


class OwnPlacementTraits:
    """Our own ``[placement]`` adapter, for a process without Nova."""

    def __init__(self, client: placement.PlacementClient) -> None:
        self.client = client

    def existing_traits(
        self, names: Sequence[str], global_request_id: str | None = None,
    ) -> set[str]:
        return self.client.existing_traits(names)

    def create_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> None:
        self.client.ensure_trait(name)

    def watch(self, handler: Any) -> None:
        """No Nova here, so no candidate query to watch."""

    def roots_with_trait(
        self, name: str, global_request_id: str | None = None,
    ) -> list[str]:
        return placement.root_names(self.client.providers(required=name))


def default_store() -> TraitStore:
    """Nova's report client inside Nova; our own adapter where no Nova is."""
    try:
        nova_report = importlib.import_module(
            "nova_drain_filters.clients.nova_report")
    except ImportError:
        return OwnPlacementTraits(placement.PlacementClient(
            http.adapter_from_conf(CONF, "placement", "placement")))
    store: TraitStore = nova_report.NovaPlacementTraits()
    return store
