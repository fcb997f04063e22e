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

"""Event mode between processes: a real broker and a real publishing Ironic.

Each listener runs in a process of its own, as scheduler workers do
(``event_listener_child``). Every process must hear every event, both with
the default (a queue per process) and with
``baremetal_notifications_host_reader = true`` (one reader for the host,
on the host's queue). Without the host's reader a restarted process must
take its predecessor's queue, not add one, and the broker policy the docs
give must remove a queue nobody listens on.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fixtures
import testtools

from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import pools
from tests.functional.services import ironic_server
from tests.functional.services import process
from tests.functional.services import rabbitmq_server

CHILD = "tests.event_listener_child"
#: What Ironic sends for a node created, managed, put in and out of
#: maintenance and deleted, less the .start of an announced action, which
#: is parsed away (notifications.ANNOUNCED) wherever it is read.
SENT = ["baremetal.node.create.end",
        "baremetal.node.provision_set.start",
        "baremetal.node.maintenance_set.end",
        "baremetal.node.maintenance_set.end",
        "baremetal.node.delete.end"]


class ListenerProcess:
    """One child process with a view in event mode."""

    def __init__(self, test: "TwoProcessesTest", name: str,
                 host_reader: bool | None = None) -> None:
        """``host_reader`` None leaves the option at its default."""
        self.out = Path(test.tmp) / f"{name}.jsonl"
        self.log = Path(test.tmp) / f"{name}.log"
        self.log_text = ""
        mode = [] if host_reader is None else [str(host_reader).lower()]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", CHILD, test.broker.transport_url,
                 test.ironic_url, test.tmp, str(self.out), *mode],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                cwd=process.REPO_ROOT, start_new_session=True)
        test.addCleanup(self.stop)
        test.addDetail(f"{name}-log", process.log_detail(
            lambda: self.log_text[-6000:]))

    def lines(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in
                self.out.read_text().splitlines() if line.strip()]

    def pool(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if "pool" in line:
                    return str(line["pool"])
            if self.proc.poll() is not None:
                raise AssertionError(f"listener exited {self.proc.returncode}")
            time.sleep(0.05)
        raise AssertionError("listener did not start listening")

    def events(self) -> list[tuple[str, str]]:
        return [(e["event"], e["node"]) for e in self.lines() if "event" in e]

    def applied(self) -> list[tuple[str, bool, bool]]:
        """(node, deleted, unusable) of each node handed to the view."""
        return [(a["applied"], a["deleted"], a["unusable"])
                for a in self.lines() if "applied" in a]

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        self._stop()
        self.log_text = self.log.read_text("utf-8", "replace")

    def _stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class TwoProcessesTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.broker = self.useFixture(
            rabbitmq_server.RabbitMQServerFixture()).server
        server = self.useFixture(ironic_server.IronicServerFixture(
            extra_config=rabbitmq_server.ironic_notification_config(
                self.broker.transport_url)))
        self.ironic_url = server.url
        self.ironic = ironic_server.IronicTestClient(server.url)
        self.addCleanup(self.ironic.close)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def wait_for(self, what: str, check: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout}s")
            time.sleep(0.05)

    def test_every_process_hears_every_event(self) -> None:
        # nova.conf without baremetal_notifications_host_reader: a queue
        # and a reader for each process (issue 41).
        one = ListenerProcess(self, "one")
        two = ListenerProcess(self, "two")
        pools = {one.pool(), two.pool()}
        self.assertEqual(2, len(pools), pools)  # a pool each, not shared

        node = self.ironic.create_node(name="heard")["uuid"]
        self.ironic.manage(node)
        self.ironic.set_maintenance(node, True, reason="fan")
        self.ironic.set_maintenance(node, False)
        self.ironic.delete_node(node)
        heard = []
        for proc in (one, two):
            self.wait_for("delete.end", lambda p=proc: (  # type: ignore[misc]
                "baremetal.node.delete.end", node) in p.events())
            heard.append([e for e, n in proc.events() if n == node])
        # In order; a verify that finishes in time also sends
        # provision_set.end, which Ironic does not always get to.
        rest = iter(heard[0])
        self.assertTrue(all(e in rest for e in SENT), (SENT, heard[0]))
        self.assertEqual(heard[0], heard[1])

    def test_the_host_reader_reads_once_and_both_hear_every_event(
            self) -> None:
        # baremetal_notifications_host_reader = true: one reader for the
        # host, one queue, one consumer on it.
        one = ListenerProcess(self, "one", host_reader=True)
        two = ListenerProcess(self, "two", host_reader=True)
        shared = pools.pool_name(pools.host_name(), host_reader.POOL_SLOT)
        self.assertEqual({shared}, {one.pool(), two.pool()})
        self.wait_for("one consumer on the host's queue", lambda: (
            self.broker.queues().get(shared) or {}).get("consumers") == 1)
        ours = [q for q in self.broker.queues()
                if q.startswith(pools.POOL_PREFIX)]
        self.assertEqual([shared], ours)  # no queue of a process's own

        node = self.ironic.create_node(name="heard")["uuid"]
        self.ironic.manage(node)
        self.ironic.set_maintenance(node, True, reason="fan")
        for proc in (one, two):
            self.wait_for("the node in maintenance", lambda p=proc: any(
                a == (node, False, True) for a in p.applied()))
        self.ironic.set_maintenance(node, False)
        self.ironic.delete_node(node)
        for proc in (one, two):
            self.wait_for("the delete", lambda p=proc: (
                node, True, False) in p.applied())
        # Parsed once, by the host's reader, for both processes.
        parsed = [[e for e, n in p.events() if n == node] for p in (one, two)]
        self.assertEqual(1, sum(1 for events in parsed if events), parsed)
        rest = iter(parsed[0] or parsed[1])
        self.assertTrue(all(e in rest for e in SENT), parsed)

    def test_the_host_reader_turned_on_removes_the_queues_left(
            self) -> None:
        # Turned on (by hand, or by an upgrade to where it is the default):
        # the per-process queue read before stays bound to Ironic's
        # exchange, and would fill for good.
        old = ListenerProcess(self, "old", host_reader=False)
        left = old.pool()
        old.kill()
        self.ironic.create_node(name="unread")
        self.wait_for("an event in the queue left", lambda: (
            self.broker.queues().get(left) or {}).get("messages", 0) >= 1)
        one = ListenerProcess(self, "one", host_reader=True)
        two = ListenerProcess(self, "two", host_reader=True)
        shared = pools.pool_name(pools.host_name(), host_reader.POOL_SLOT)
        self.assertEqual({shared}, {one.pool(), two.pool()})
        self.wait_for("the queue left removed",
                      lambda: left not in self.broker.queues())
        ours = [q for q in self.broker.queues()
                if q.startswith(pools.POOL_PREFIX)]
        self.assertEqual([shared], ours)
        said = [line for proc in (one, two)
                for line in proc.log.read_text("utf-8", "replace"
                                               ).splitlines()
                if "Removed the queue" in line]
        self.assertEqual(1, len(said), said)  # by the host's reader alone
        self.assertRegex(said[0], rf"Removed the queue {re.escape(left)} "
                                  r"\(unread events in it: [1-9]")

    def test_the_host_reader_turned_off_removes_the_hosts_queue(
            self) -> None:
        leader = ListenerProcess(self, "leader", host_reader=True)
        shared = leader.pool()
        self.assertIn(shared, self.broker.queues())
        leader.kill()
        alone = ListenerProcess(self, "alone", host_reader=False)
        self.assertEqual(pools.pool_name(pools.host_name(), 0), alone.pool())
        self.wait_for("the host's queue removed",
                      lambda: shared not in self.broker.queues())

    def test_restarted_process_takes_its_predecessors_queue(self) -> None:
        first = ListenerProcess(self, "first", host_reader=False)
        pool = first.pool()
        self.assertEqual(pools.pool_name(pools.host_name(), 0), pool)
        self.assertIn(pool, self.broker.queues())
        first.kill()  # no clean shutdown: the kernel frees the slot
        second = ListenerProcess(self, "second", host_reader=False)
        self.assertEqual(pool, second.pool())
        ours = [q for q in self.broker.queues()
                if q.startswith(pools.POOL_PREFIX)]
        self.assertEqual([pool], ours)

    def test_documented_policy_removes_an_abandoned_queue(self) -> None:
        # doc/source/baremetal.rst gives this policy with an hour; a second
        # here, so the test need not wait long.
        self.broker.set_policy("nova-drain-filters-expiry",
                               r"^nova-drain-filters\.", {"expires": 1000})
        proc = ListenerProcess(self, "gone", host_reader=False)
        pool = proc.pool()
        self.assertIn(pool, self.broker.queues())
        proc.kill()
        self.wait_for("queue expiry",
                      lambda: pool not in self.broker.queues())
