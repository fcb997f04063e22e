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

import ddt
import testtools

from nova_drain_filters import traits


@ddt.ddt
class TestIsValidCustomTrait(testtools.TestCase):
    @ddt.data(*traits.DEFAULT_FORBIDDEN, *traits.MANAGED,
              "CUSTOM_A", "CUSTOM_DRAIN_2", "CUSTOM__", "CUSTOM_0_X")
    def test_valid(self, name: str) -> None:
        self.assertTrue(traits.is_valid_custom_trait(name))

    @ddt.data(
        # lower case
        "CUSTOM_lower", "custom_FOO", "CUSTOM_Mixed",
        # no CUSTOM_ prefix, or nothing after it
        "FOO", "COMPUTE_STATUS_DISABLED", "CUSTOM", "CUSTOM_", "",
        "XCUSTOM_FOO",
        # punctuation and spaces
        "CUSTOM_A-B", "CUSTOM_A.B", "CUSTOM_A B", "CUSTOM_A/B",
        "CUSTOM_A,CUSTOM_B", " CUSTOM_A", "CUSTOM_\u00c9",
        # "$" also matches before a final newline; a name with one is not
        # CUSTOM_[A-Z0-9_]+ and must not be used in a placement URL.
        "CUSTOM_A\n",
    )
    def test_invalid(self, name: str) -> None:
        self.assertFalse(traits.is_valid_custom_trait(name))

    def test_length_limit(self) -> None:
        at_limit = "CUSTOM_" + "A" * (255 - len("CUSTOM_"))
        self.assertEqual(255, len(at_limit))
        self.assertTrue(traits.is_valid_custom_trait(at_limit))
        self.assertFalse(traits.is_valid_custom_trait(at_limit + "A"))

    def test_pattern_is_anchored(self) -> None:
        self.assertTrue(traits.CUSTOM_TRAIT_PATTERN.startswith("^"))
        self.assertTrue(traits.CUSTOM_TRAIT_PATTERN.endswith("$"))

    def test_managed_traits_are_forbidden_by_default(self) -> None:
        self.assertTrue(set(traits.MANAGED) <= set(traits.DEFAULT_FORBIDDEN))
        self.assertNotIn(traits.DRAIN_HOST, traits.MANAGED)


class TestUnhonoured(testtools.TestCase):
    def test_defaults_leave_none(self) -> None:
        self.assertEqual((), traits.unhonoured(True, traits.DEFAULT_FORBIDDEN))

    def test_more_traits_leave_none(self) -> None:
        self.assertEqual((), traits.unhonoured(
            True, [*traits.DEFAULT_FORBIDDEN, "CUSTOM_OURS"]))

    def test_a_typo_leaves_that_one(self) -> None:
        self.assertEqual((traits.DRAIN_HOST,), traits.unhonoured(
            True, [traits.STALE_NODE, traits.BAREMETAL_UNAVAILABLE,
                   "CUSTOM_DRAN_HOST"]))

    def test_empty_leaves_all(self) -> None:
        self.assertEqual(traits.DEFAULT_FORBIDDEN, traits.unhonoured(True, []))

    def test_prefilter_off_leaves_all(self) -> None:
        self.assertEqual(traits.DEFAULT_FORBIDDEN, traits.unhonoured(
            False, traits.DEFAULT_FORBIDDEN))
