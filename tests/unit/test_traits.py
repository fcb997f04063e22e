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

from nova_drain_filters import traits


class TestIsValidCustomTrait(testtools.TestCase):
    def test_project_traits_are_valid(self) -> None:
        for name in traits.DEFAULT_FORBIDDEN + traits.MANAGED:
            self.assertTrue(traits.is_valid_custom_trait(name), name)

    def test_valid_names(self) -> None:
        for name in ("CUSTOM_A", "CUSTOM_DRAIN_2", "CUSTOM__", "CUSTOM_0_X"):
            self.assertTrue(traits.is_valid_custom_trait(name), name)

    def test_lowercase_is_invalid(self) -> None:
        for name in ("CUSTOM_lower", "custom_FOO", "CUSTOM_Mixed"):
            self.assertFalse(traits.is_valid_custom_trait(name), name)

    def test_missing_prefix_is_invalid(self) -> None:
        for name in ("FOO", "COMPUTE_STATUS_DISABLED", "CUSTOM", "CUSTOM_", "",
                     "XCUSTOM_FOO"):
            self.assertFalse(traits.is_valid_custom_trait(name), repr(name))

    def test_punctuation_and_spaces_are_invalid(self) -> None:
        for name in ("CUSTOM_A-B", "CUSTOM_A.B", "CUSTOM_A B", "CUSTOM_A/B",
                     "CUSTOM_A,CUSTOM_B", " CUSTOM_A", "CUSTOM_É"):
            self.assertFalse(traits.is_valid_custom_trait(name), repr(name))

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

    def test_trailing_newline_is_invalid(self) -> None:
        # "$" also matches before a final newline; a name with one is not
        # CUSTOM_[A-Z0-9_]+ and must not be used in a placement URL.
        self.assertFalse(traits.is_valid_custom_trait("CUSTOM_A\n"))
