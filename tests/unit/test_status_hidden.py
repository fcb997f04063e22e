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

"""What Nova's own COMPUTE_STATUS_DISABLED hid, on Nova's request spec."""
import testtools
from nova import objects

from nova_drain_filters import status_hidden
from nova_drain_filters.clients import http

TRAIT = status_hidden.TRAIT


class Roots:
    """Placement's providers carrying the trait; counts the reads."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.reads = 0
        self.error: Exception | None = None

    def roots_with_trait(self, name: str,
                         global_request_id: str | None = None) -> list[str]:
        assert name == TRAIT
        self.reads += 1
        if self.error is not None:
            raise self.error
        return list(self.names)


class TestForbiddenBy(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        objects.register_all()

    def test_where_the_trait_is_forbidden(self) -> None:
        spec = objects.RequestSpec()
        self.assertIsNone(status_hidden.forbidden_by(spec))
        spec.root_forbidden.add(TRAIT)  # nova's compute_status_filter
        self.assertEqual("compute_status_filter",
                         status_hidden.forbidden_by(spec))
        flavor = objects.RequestSpec(requested_resources=[
            objects.RequestGroup(forbidden_traits={TRAIT})])
        self.assertEqual("flavor", status_hidden.forbidden_by(flavor))


class TestHiddenNodes(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        objects.register_all()
        self.now = [0.0]
        self.roots = Roots(["c4", "c2", "c3", "c1"])
        self.nodes = status_hidden.HiddenNodes(lambda: self.roots,
                                               clock=lambda: self.now[0])
        self.spec = objects.RequestSpec()
        self.spec.root_forbidden.add(TRAIT)

    def test_one_read_per_interval_not_per_request(self) -> None:
        for _ in range(50):
            hidden = self.nodes.hidden(self.spec)
        self.assertEqual(1, self.roots.reads)
        self.assertEqual(
            "Nova's compute_status_filter forbade COMPUTE_STATUS_DISABLED, "
            "hiding 4 disabled compute node(s): c1, c2, c3 (+1 more) "
            "(placement read 0s ago)", str(hidden))
        self.now[0] = 12.4
        self.assertEqual(12.4, self.nodes.hidden(self.spec).age)
        self.roots.names = ["c9"]
        self.now[0] = status_hidden.REFRESH_SECONDS
        self.assertEqual(("c9",), self.nodes.hidden(self.spec).names)
        self.assertEqual(2, self.roots.reads)

    def test_nothing_to_say(self) -> None:
        self.assertIsNone(self.nodes.hidden(objects.RequestSpec()))
        self.assertEqual(0, self.roots.reads)  # not forbidden: no read
        self.roots.names = []
        self.assertIsNone(self.nodes.hidden(self.spec))

    def test_a_failed_read_keeps_what_was_known_and_never_raises(self) -> None:
        self.roots.error = http.ApiError("placement", "GET", "/x", 503, "down")
        self.assertIsNone(self.nodes.hidden(self.spec))
        self.roots.error = None
        self.now[0] = status_hidden.REFRESH_SECONDS
        self.assertEqual(4, len(self.nodes.hidden(self.spec).names))
        self.roots.error = RuntimeError("bug")
        self.now[0] = 2 * status_hidden.REFRESH_SECONDS
        self.assertEqual(4, len(self.nodes.hidden(self.spec).names))
        self.assertEqual(3, self.roots.reads)
