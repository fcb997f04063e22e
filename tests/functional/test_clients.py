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

"""Our clients' typed errors and microversion check against the real services.

Ironic 39 and placement 16 answer the version documents, request IDs and
error statuses the clients map; a unit test with requests_mock can only
repeat what we believe they send.
"""
import uuid

import testtools

from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from nova_drain_filters.clients import placement
from tests.functional import product_clients
from tests.functional.services import ironic_server
from tests.functional.services import placement_server

TRAIT = "CUSTOM_DRAIN_TEST"


class IronicClientTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        fixture = self.useFixture(ironic_server.IronicServerFixture())
        self.url, self.ironic = fixture.url, fixture.client
        self.client = product_clients.ironic_client(self.url)

    def test_version_check_and_trait_removal(self) -> None:
        node = self.ironic.create_node(name="n1")["uuid"]
        self.client.add_trait(node, TRAIT)
        # The check read Ironic's root once: 1.1 up to at least our pin.
        self.assertEqual(2, self.client.requests)
        assert self.client.supported is not None
        self.assertEqual((1, 1), self.client.supported[0])
        self.assertGreaterEqual(self.client.supported[1], (1, 61))

        self.client.remove_trait(node, TRAIT)
        self.assertEqual([], self.ironic.get_traits(node))
        # Gone already: Ironic's NodeTraitNotFound 404, then the node's
        # traits show it is not there, which is what was wanted.
        self.client.remove_trait(node, TRAIT)
        self.assertEqual(2 + 1 + 2, self.client.requests)

        self.ironic.delete_node(node)
        exc = self.assertRaises(http.NotFound, self.client.remove_trait,
                                node, TRAIT)
        self.assertIn(f"Node {node} could not be found", str(exc))
        self.assertRegex(str(exc), r"\(request-id req-[0-9a-f-]+\)$")

    def test_too_old_for_the_pin(self) -> None:
        # Ironic's own version document, against a pin no Ironic has yet.
        client = product_clients.ironic_client(self.url)
        client.microversion = "1.999"
        exc = self.assertRaises(http.MicroversionUnsupported,
                                client.list_nodes, 10)
        self.assertIn("the service supports microversions 1.1 to 1.",
                      exc.message)
        self.assertIn("this client needs 1.999", exc.message)
        self.assertEqual(1, client.requests)  # nothing after the check
        self.assertIsNone(client.supported)
        self.assertEqual(ironic.IRONIC_VERSION,
                         ironic.IronicClient.microversion)


class PlacementClientTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        fixture = self.useFixture(placement_server.PlacementServerFixture())
        self.url, self.placement = fixture.url, fixture.client
        self.client = product_clients.placement_client(self.url)

    def test_version_check_and_typed_errors(self) -> None:
        self.assertIs(True, self.client.ensure_trait(TRAIT))
        self.assertEqual(2, self.client.requests)
        assert self.client.supported is not None
        self.assertGreaterEqual(self.client.supported[1], (1, 38))

        missing = str(uuid.uuid4())
        exc = self.assertRaises(http.NotFound, self.client.provider_traits,
                                missing)
        self.assertEqual(404, exc.status)
        self.assertRegex(str(exc), r"\(request-id req-[0-9a-f-]+\)$")

        rp = self.placement.create_resource_provider("rp1")["uuid"]
        body = {"traits": [TRAIT], "resource_provider_generation": 99}
        exc = self.assertRaises(
            http.Conflict, self.client.request, "PUT",
            f"/resource_providers/{rp}/traits",
            microversion=placement.TRAITS_VERSION, json_body=body)
        self.assertEqual(409, exc.status)
        # One version check, then three calls: checked once per client.
        self.assertEqual(1 + 3, self.client.requests)
