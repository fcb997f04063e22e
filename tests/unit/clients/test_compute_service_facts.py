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

"""compute.Service.facts: the one service-facts constructor."""
import datetime

import testtools

from nova_drain_filters import decisions
from nova_drain_filters import drain
from nova_drain_filters.clients import compute


def service(state: str = "up", status: str = "enabled",
            forced_down: bool = False, reason: str | None = None,
            updated_at: str | None = "2024-05-01T11:00:00.000000"
            ) -> compute.Service:
    return compute.Service("svc-1", "c1", state, status, forced_down, reason,
                           updated_at)


class TestServiceFacts(testtools.TestCase):
    def test_fields(self) -> None:
        self.assertEqual(decisions.ServiceFacts(
            host="c1", disabled=True, forced_down=False, is_up=True,
            disabled_reason="drain: retire",
            last_seen_up=datetime.datetime(2024, 5, 1, 11, 0,
                                           tzinfo=datetime.timezone.utc),
            uuid="svc-1"), service(status="disabled",
                                   reason="drain: retire").facts)
        self.assertIsNone(service(updated_at=None).facts.last_seen_up)

    def test_up_as_nova_counts_it(self) -> None:
        # Up, and not forced down (nova/servicegroup/api.py service_is_up).
        for state, forced, up in (("up", False, True), ("up", True, False),
                                  ("down", False, False),
                                  ("down", True, False)):
            self.assertIs(up, service(state, forced_down=forced).facts.is_up,
                          (state, forced))

    def test_one_fact_for_the_decisions_and_a_drain(self) -> None:
        now = datetime.datetime(2024, 5, 1, 11, 5,
                                tzinfo=datetime.timezone.utc)
        down = service("down", status="disabled", reason="drain: x").facts
        self.assertTrue(drain.ours(down))
        self.assertEqual(
            [decisions.ReasonCode.SERVICE_DISABLED,
             decisions.ReasonCode.SERVICE_DOWN],
            [r.code for r in decisions.service_reasons(down, now)])
