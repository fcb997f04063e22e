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

"""Trait names this project owns, and the one rule for what a valid one is.

Placement accepts a custom trait only when it matches ``CUSTOM_[A-Z0-9_]+``
(at most 255 characters); ``os_traits.is_custom`` checks only the prefix.
"""
import re
from collections.abc import Iterable

import os_traits

#: Set by the trait sync on a provider whose compute node is no longer
#: backed by a live reporter (duplicate after a rebalance, node gone from
#: Ironic, or, when enabled, too old).
STALE_NODE = "CUSTOM_DRAIN_STALE_NODE"

#: Set by the trait sync on an Ironic node's provider (and on the Ironic node
#: itself) while Ironic says the node cannot take an instance.
BAREMETAL_UNAVAILABLE = "CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE"

#: Set by an operator to drain a host by hand; the sync never touches it.
#: On an Ironic node set it on the node (``baremetal node add trait``): Nova's
#: Ironic driver overwrites the provider's traits with the node's.
DRAIN_HOST = "CUSTOM_DRAIN_HOST"

#: What the placement pre-filter forbids unless configured otherwise.
DEFAULT_FORBIDDEN = (STALE_NODE, BAREMETAL_UNAVAILABLE, DRAIN_HOST)

#: The traits the sync engine owns: it sets and removes these and no other.
MANAGED = (STALE_NODE, BAREMETAL_UNAVAILABLE)

_CUSTOM_TRAIT = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
CUSTOM_TRAIT_PATTERN = _CUSTOM_TRAIT.pattern


def unhonoured(prefilter: bool, forbidden: Iterable[str]) -> tuple[str, ...]:
    """The traits of ``DEFAULT_FORBIDDEN`` this configuration leaves on offer.

    Only the pre-filter keeps a marked provider out of placement's answer:
    a node drained with ``openstack drain node start`` carries the mark and
    nothing else. With the pre-filter off, every mark is left on offer;
    with a trait left out of ``forbidden_traits`` (a typo, say), that one.
    """
    if not prefilter:
        return DEFAULT_FORBIDDEN
    wanted = set(forbidden)
    return tuple(name for name in DEFAULT_FORBIDDEN if name not in wanted)


def is_valid_custom_trait(name: str) -> bool:
    """Return True if placement would accept ``name`` as a custom trait."""
    return (
        os_traits.is_custom(name)
        and len(name) <= 255
        and _CUSTOM_TRAIT.fullmatch(name) is not None
    )
