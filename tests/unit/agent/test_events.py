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


"""The batch endpoint: coalescing, re-reads, and never raising."""
from typing import Any

import testtools

from nova_drain_filters import traits
from nova_drain_filters.agent import events
from nova_drain_filters.clients import http
from tests.unit import ironic_fakes
from tests.unit.agent import agent_fakes

BM = traits.BAREMETAL_UNAVAILABLE
N1 = "6f1c0d2e-1111-4a4a-9b9b-000000000001"
N2 = "6f1c0d2e-1111-4a4a-9b9b-000000000002"


def message(uuid: str, event: str = "baremetal.node.maintenance_set.end",
            stamp: str = "2026-12-07 10:00:00.000000", **node: Any
            ) -> dict[str, Any]:
    """One message as oslo.messaging's batch dispatcher hands it over."""
    data = {"uuid": uuid, "provision_state": "available",
            "power_state": "power off", "maintenance": False,
            "maintenance_reason": None, "retired": False,
            "retired_reason": None, "fault": None, "instance_uuid": None,
            "allocation_uuid": None, "name": None, "traits": []}
    data.update(node)
    return {"ctxt": {}, "publisher_id": "ironic-api", "event_type": event,
            "payload": {"ironic_object.data": data},
            "metadata": {"timestamp": stamp, "message_id": "m"}}


class TestCoalesce(testtools.TestCase):
    def test_last_event_of_a_node_wins(self) -> None:
        batch = [message(N1, maintenance=bool(i % 2),
                         stamp=f"2026-12-07 10:00:0{i}") for i in range(5)]
        batch.insert(2, message(N2, fault="power failure"))
        last, stamps = events.coalesce(batch)
        self.assertEqual([N2, N1], list(last))
        facts = last[N1].facts
        assert facts is not None
        self.assertFalse(facts.maintenance)  # the fifth: i = 4
        self.assertEqual(1796637604.0, stamps[N1])

    def test_other_and_malformed_events_are_left_out(self) -> None:
        batch = [{"event_type": "baremetal.port.create.end", "payload": {}},
                 {"event_type": "baremetal.node.update.end", "payload": {}},
                 message(N1, event="baremetal.node.maintenance_set.start")]
        self.assertEqual(({}, {}), events.coalesce(batch))


class TestEndpoint(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.fx = agent_fakes.AgentWriter()
        self.fx.install(ironic_fakes.ironic_node(N1),
                        ironic_fakes.ironic_node(N2))
        self.endpoint = events.NodeEventsEndpoint(self.fx.writer,
                                                  self.fx.metrics)

    def test_a_node_changing_five_times_is_written_once(self) -> None:
        self.fx.ironic.set(ironic_fakes.ironic_node(N1, maintenance=True))
        self.endpoint.info([message(N1, maintenance=i % 2 == 0)
                            for i in range(5)])
        self.assertEqual([("placement.update", N1, {BM}, set()),
                          ("ironic.add_trait", N1, BM)],
                         self.fx.writes())
        self.assertEqual(1, self.fx.log.count(("ironic.get_node", N1)))
        self.assertEqual(5, self.fx.value(
            "nova_drain_agent_events_received_total"))
        self.assertEqual(1, self.fx.value(
            "nova_drain_agent_events_applied_total"))

    def test_an_allocation_event_reads_its_node(self) -> None:
        self.fx.ironic.set(ironic_fakes.ironic_node(N2, fault="power"))
        self.endpoint.info([{
            "event_type": "baremetal.allocation.create.end",
            "payload": {"ironic_object.data": {"node_uuid": N2}},
            "metadata": {}}])
        self.assertEqual(2, len(self.fx.writes()))

    def test_nothing_raises_into_the_listener(self) -> None:
        def fail(uuid: str) -> Any:
            raise http.ApiError("ironic", "GET", "/n", 503, "down")
        self.fx.ironic.get_node = fail  # type: ignore[method-assign]
        self.endpoint.error([message(N2, maintenance=True)])
        self.fx.writer.apply_events = None  # type: ignore[assignment]
        self.endpoint.warn([message(N1, maintenance=True)])
        self.assertEqual([], self.fx.writes())
