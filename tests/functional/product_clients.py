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

"""Our own service clients, pointed at the test services without auth.

Shared by the functional tests that drive the product clients directly
(the Ironic view, the trait sync) rather than through Nova or the CLI.
"""
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session

from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement


def ironic_client(url: str, timeout: float = 10.0) -> ironic.IronicClient:
    """An IronicClient for a test Ironic (``auth_strategy = noauth``)."""
    session = ks_session.Session(timeout=timeout)
    return ironic.IronicClient(ks_adapter.Adapter(
        session, endpoint_override=url, service_type="baremetal"))


def placement_client(url: str) -> placement.PlacementClient:
    """A PlacementClient for a test placement (noauth2 wants a token)."""
    adapter = ks_adapter.Adapter(
        ks_session.Session(), endpoint_override=url, service_type="placement",
        additional_headers={"X-Auth-Token": "admin"})
    return placement.PlacementClient(adapter)
