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

from nova_drain_filters import stamps

#: 2026-12-05 00:00:00 UTC.
MIDNIGHT = 1796428800.0


class TestEpoch(testtools.TestCase):
    def test_naive_is_utc(self) -> None:
        # Nova's API and oslo.messaging's notifier, with and without
        # microseconds.
        for text, want in (("2026-12-05T00:00:00.000000", MIDNIGHT),
                           ("2026-12-05T00:00:00", MIDNIGHT),
                           ("2026-12-05 00:00:00.250000", MIDNIGHT + 0.25),
                           ("2026-12-05 00:00:00", MIDNIGHT)):
            self.assertEqual(want, stamps.epoch(text), text)

    def test_a_zone_is_kept(self) -> None:
        self.assertEqual(MIDNIGHT, stamps.epoch("2026-12-05T01:00:00+01:00"))
        self.assertEqual(MIDNIGHT, stamps.epoch("2026-12-05T00:00:00Z"))

    def test_none_or_garbage_is_none(self) -> None:
        for text in (None, 5, "", "yesterday", "2026-13-05T00:00:00"):
            self.assertIsNone(stamps.epoch(text), repr(text))
