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


"""The agent's failure drills: a killed agent, a stopped broker, a lock."""
import os
import signal
import threading
import time

from tests.functional import agent_base
from tests.functional import product_clients


class KilledAgentTest(agent_base.AgentTestBase):
    NODES = 6

    def test_kill_9_one_of_two_agents_mid_burst(self) -> None:
        # Agent one holds each batch 10 s before handling it, so it is
        # killed with events taken and not acknowledged; the reconcile
        # interval (600 s) cannot be what repairs them.
        one = self.agent("one", batch_timeout=10)
        two = self.agent("two")
        self.wait_for("both agents on the queue",
                      lambda: self.consumers() == 2)
        for node in self.nodes:
            self.ironic.set_maintenance(node, True, reason="drill")
        time.sleep(2.5)  # two would have handled a batch (1 s) by now
        # Taken by one and not acknowledged (measured: all 12 messages
        # of the six changes, .start and .end each).
        held = self.queued()
        self.addDetail("fig-held-by-killed-agent", agent_base.text(str(held)))
        self.assertGreater(held, 0)
        assert one.pid is not None
        os.killpg(one.pid, signal.SIGKILL)
        killed = time.monotonic()
        for node in self.nodes[3:]:
            self.ironic.set_maintenance(node, False)
        for i, node in enumerate(self.nodes):
            if i < 3:
                self.wait_for(f"node {i} marked", lambda n=node: (  # type: ignore[misc]
                    self.marked(n)), timeout=60)
            else:
                self.wait_for(f"node {i} cleared", lambda n=node: (  # type: ignore[misc]
                    self.cleared(n)), timeout=60)
        self.addDetail("all-applied-after-kill-seconds", agent_base.text(
            f"{time.monotonic() - killed:.2f}"))
        self.assertEqual(1, self.consumers())
        # Acknowledged once handled: just after its last write.
        self.wait_for("every message acknowledged",
                      lambda: self.queued() == 0, timeout=10)
        self.assertIsNone(two.returncode())


class BrokerStoppedTest(agent_base.AgentTestBase):
    NODES = 4
    INTERVAL = 20
    OUTAGE = 30.0

    def test_changes_while_the_broker_is_away_land_within_an_interval(
            self) -> None:
        self.agent()
        self.wait_for("the agent on its queue", lambda: self.consumers() == 1)
        self.broker.stop()
        stopped = time.monotonic()
        # Ironic drops what it cannot send (retry = 1): these events are
        # lost for good.
        for node in self.nodes[:2]:
            self.ironic.set_maintenance(node, True, reason="away")
        time.sleep(max(0.0, self.OUTAGE - (time.monotonic() - stopped)))
        self.broker.start()
        back = time.monotonic()
        for node in self.nodes[:2]:
            self.wait_for("the change made while away", lambda n=node: (  # type: ignore[misc]
                self.marked(n)), timeout=self.INTERVAL + 10)
        self.addDetail("repaired-after-return-seconds", agent_base.text(
            f"{time.monotonic() - back:.2f}"))
        # And events flow again once the agent is back on the broker.
        self.wait_for("the agent back on its queue",
                      lambda: self.consumers() == 1, timeout=60)
        self.ironic.set_maintenance(self.nodes[3], True, reason="back")
        took = self.wait_for("an event after the return", lambda: (
            self.marked(self.nodes[3])), timeout=self.INTERVAL + 10)
        self.addDetail("event-after-return-seconds",
                       agent_base.text(f"{took:.2f}"))
        for node in self.nodes[2:3]:
            self.assertTrue(self.cleared(node))


class NodeLockedTest(agent_base.AgentTestBase):
    NODES = 1
    INTERVAL = 5

    def test_a_locked_node_is_written_once_the_lock_clears(self) -> None:
        node = self.nodes[0]
        self.ironic.set_maintenance(node, True, reason="locked")
        self.hold_lock(node, "drill-conductor")
        self.agent()
        log = self.tmp / "agent.log"
        self.wait_for("the write given up for this reconcile", lambda: (
            "failed, tried again" in log.read_text("utf-8", "replace")))
        # Ironic refused; placement keeps the node out meanwhile.
        self.assertIn(agent_base.BM,
                      self.placement.get_provider_traits(node))
        self.assertNotIn(agent_base.BM, self.ironic.get_traits(node))
        self.hold_lock(node, None)
        took = self.wait_for("the trait after the lock",
                             lambda: self.marked(node),
                             timeout=2 * self.INTERVAL + 10)
        self.addDetail("mark-after-lock-seconds",
                       agent_base.text(f"{took:.2f}"))
        text = log.read_text("utf-8", "replace")
        self.assertEqual(1, text.count("failed, tried again"))
        self.assertIn("written after failures", text)


class ConcurrentWritersTest(agent_base.AgentTestBase):
    NODES = 1

    def test_no_trait_is_lost_to_a_concurrent_writer(self) -> None:
        # Another writer (as nova-compute's report client) adds traits to
        # the same provider, generation-safe, while the agent writes the
        # drain trait on and off.
        self.agent()
        self.wait_for("the agent on its queue", lambda: self.consumers() == 1)
        node = self.nodes[0]
        other = product_clients.placement_client(self.placement_url)
        names: list[str] = []
        done = threading.Event()

        def write() -> None:
            while not done.is_set():
                name = f"CUSTOM_OTHER_{len(names)}"
                other.ensure_trait(name)
                other.update_provider_traits(node, add={name})
                names.append(name)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            for i in range(7):  # ends in maintenance
                self.ironic.set_maintenance(node, i % 2 == 0, reason="busy")
            self.wait_for("the drain trait", lambda: self.marked(node))
        finally:
            done.set()
            writer.join(60)
        self.assertEqual(set(names) | {agent_base.BM},
                         set(self.placement.get_provider_traits(node)))
        # Three requests a write when nothing conflicts (ensure, GET,
        # PUT); each 409 costs two more.
        conflicts = (other.requests - 3 * len(names)) // 2
        self.addDetail("fig-other-writer", agent_base.text(
            f"{len(names)} writes, {conflicts} conflicts"))


class StoppedAgentTest(agent_base.AgentTestBase):
    NODES = 4

    def test_sigterm_leaves_no_event_behind(self) -> None:
        # Agent one holds its batches 10 s; SIGTERM comes while it holds
        # some. It must exit, and every event must still be applied: by
        # one finishing its batch, or by two after the broker gives the
        # unacknowledged ones back.
        one = self.agent("one", batch_timeout=10)
        self.agent("two")
        self.wait_for("both agents on the queue",
                      lambda: self.consumers() == 2)
        for node in self.nodes:
            self.ironic.set_maintenance(node, True, reason="stop")
        time.sleep(2.5)
        held = self.queued()
        self.addDetail("fig-held-at-sigterm", agent_base.text(str(held)))
        assert one.pid is not None
        os.killpg(one.pid, signal.SIGTERM)
        took = self.wait_for("agent one to exit",
                             lambda: one.returncode() is not None,
                             timeout=60)
        self.addDetail("fig-exit-seconds", agent_base.text(f"{took:.2f}"))
        self.assertEqual(0, one.returncode())
        for node in self.nodes:
            self.wait_for("the node marked", lambda n=node: (  # type: ignore[misc]
                self.marked(n)), timeout=30)
        self.assertEqual(0, self.queued())
        self.assertIn("nova-drain-agent stopped",
                      (self.tmp / "one.log").read_text("utf-8", "replace"))
