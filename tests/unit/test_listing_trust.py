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

import testtools

from nova_drain_filters import listing_trust


class ListingVerdictTest(testtools.TestCase):
    """The blast-radius rule: when a listing's missing nodes are believed."""

    def verdict(self, known: int, listed: int,
                fraction: float = 0.1) -> listing_trust.ListingVerdict:
        uuids = [f"n{i}" for i in range(known)]
        return listing_trust.listing_verdict(uuids, uuids[:listed], fraction)

    def test_table(self) -> None:
        cases = [
            # known, listed, fraction, trusted
            (0, 0, 0.1, True),
            (3, 0, 1.0, False),   # empty while Nova knows nodes: never
            (1, 0, 1.0, False),
            (3, 2, 0.1, True),    # one missing is always believed
            (3, 1, 0.1, False),
            (100, 90, 0.1, True),
            (100, 89, 0.1, False),
            (100, 50, 0.5, True),
            (100, 1, 1.0, True),
            (100, 99, 0.0, True),
            (100, 98, 0.0, False),
        ]
        for known, listed, fraction, trusted in cases:
            got = self.verdict(known, listed, fraction)
            self.assertEqual(trusted, got.trusted, (known, listed, fraction))
            self.assertEqual(known - listed, got.missing)

    def test_one_known_node_gone_from_a_listing_of_others(self) -> None:
        # Not an empty listing: one missing node is believed.
        got = listing_trust.listing_verdict(["a"], ["b", "c"], 0.1)
        self.assertEqual((1, 1, 2), (got.missing, got.allowed, got.listed))
        self.assertTrue(got.trusted)

    def test_extra_listed_nodes_do_not_count(self) -> None:
        got = listing_trust.listing_verdict(["a", "b"], ["a", "b", "new"], 0.1)
        self.assertEqual(0, got.missing)
        self.assertTrue(got.trusted)

    def test_message_has_the_counts(self) -> None:
        self.assertEqual(
            "the Ironic listing lacks 3 of the 3 Ironic compute nodes Nova "
            "knows (at most 1 may be missing)", str(self.verdict(3, 0)))

    def test_allowed_count(self) -> None:
        self.assertEqual(1, listing_trust.allowed_count(0, 0.1))
        self.assertEqual(1, listing_trust.allowed_count(19, 0.1))
        self.assertEqual(2, listing_trust.allowed_count(20, 0.1))
        self.assertEqual(50, listing_trust.allowed_count(50, 1.0))
