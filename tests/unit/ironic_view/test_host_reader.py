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

"""The host's reader: its election, its admission and its ack rule.

Followers connect over real Unix sockets here; the reader process on a
real broker is in tests/functional/test_host_reader.py.
"""
import os
import socket
import stat
import sys
import tempfile
import time
from typing import Any
from unittest import mock

import testtools
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_drain_filters import conf as drain_conf
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import reader
from nova_drain_filters.ironic_view import wire

SETTINGS = {"wire": wire.VERSION, "pool": "nova-drain-filters.h.shared",
            "url": None, "exchange": "ironic",
            "topic": "ironic_versioned_notifications",
            "options": {None: {"transport_url": "rabbit://x"}}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ElectionTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.dir = tempfile.mkdtemp()

    def test_one_leads_until_it_lets_go(self) -> None:
        first = host_reader.Election(self.dir, "host/1")
        second = host_reader.Election(self.dir, "host/1")
        self.assertTrue(first.lead())
        self.assertTrue(first.lead())  # held: still
        self.assertFalse(second.lead())
        self.assertEqual(first.socket_path, second.socket_path)
        self.assertTrue(first.socket_path.startswith(self.dir))
        self.assertNotIn("host/1", first.socket_path)
        first.forget()
        self.assertTrue(second.lead())

    def test_a_forked_child_does_not_lead_on_its_parents_lock(self) -> None:
        election = host_reader.Election(self.dir, "h")
        self.assertTrue(election.lead())
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit code says
            os.close(read)
            os.write(write, b"1" if election.lead() else b"0")
            os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
        self.assertEqual(b"0", os.read(read, 1))
        os.close(read)
        self.assertTrue(election.lead())  # the parent's lock stands

    def test_a_reader_holds_the_lock_passed_even_from_descriptor_0(
            self) -> None:
        """A worker that multiprocessing forked (cotyledon's, in
        nova-scheduler) closes its standard input as the threads our fork
        hook started run (multiprocessing/util.py _close_stdin), so the
        lock can be opened as descriptor 0, where the reader's
        Popen(stdin=DEVNULL) puts /dev/null. That reader does not hold
        the lock: once its leader lets go of it (stopped, or killed while
        the reader still reads), another process leads and starts a
        second reader of the host's queue (issue 41)."""
        self.useFixture(config_fixture.Config(cfg.CONF))
        drain_conf.register_opts(cfg.CONF)  # the reader's settings
        saved = os.dup(0)
        self.addCleanup(os.close, saved)
        self.addCleanup(os.dup2, saved, 0)  # stdin back, whatever befell
        os.close(0)  # the interleaving: descriptor 0 free as we lead
        leader = host_reader.Election(self.dir, "h")
        try:
            self.assertTrue(leader.lead())
        finally:
            if leader.fileno != 0:
                os.dup2(saved, 0)
        proc = reader.ReaderProcess(
            "nova-drain-filters.h.shared",
            lambda latest, e, n, d: (lambda: True),
            argv=[sys.executable, "-c", "import time; time.sleep(60)"],
            election=leader)
        proc._spawn()  # what starts the host's reader, child and all
        child = proc._proc
        assert child is not None
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        leader.forget()  # the leader lets go; its reader reads on
        other = host_reader.Election(self.dir, "h")
        self.assertFalse(other.lead(), "the reader does not hold the lock")
        child.kill()
        child.wait()
        self.assertTrue(other.lead())

    def test_a_path_too_long_for_a_socket_is_not_usable(self) -> None:
        self.assertTrue(host_reader.Election(self.dir, "h").usable)
        self.assertFalse(host_reader.Election(
            os.path.join(self.dir, "x" * 120), "h").usable)


class FollowersTest(testtools.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.clock = Clock()
        path = os.path.join(tempfile.mkdtemp(), "r.sock")
        self.followers = host_reader.Followers(path, SETTINGS, self.clock)
        self.followers.serve()
        self.addCleanup(self.followers.close)

    def follow(self, **different: Any) -> wire.Channel:
        channel = wire.Channel(host_reader.connect(self.followers.path))
        self.addCleanup(channel.close)
        channel.send({**SETTINGS, **different})
        return channel

    def wait(self, check: Any) -> None:
        deadline = time.monotonic() + 10
        while not check():
            if time.monotonic() > deadline:
                self.fail("not within 10 s")
            time.sleep(0.01)

    def test_a_second_reader_leaves_a_live_readers_socket(self) -> None:
        # The path is unlinked only for a dead reader's socket: taken from
        # a live one, its followers-to-be would find the second reader.
        second = host_reader.Followers(self.followers.path, SETTINGS,
                                       self.clock)
        self.addCleanup(second.close)
        self.assertRaises(host_reader.Refused, second.serve)
        self.follow()
        self.wait(lambda: self.followers.count() == 1)
        self.assertEqual(0, second.count())

    def test_a_dead_readers_socket_is_taken(self) -> None:
        path = os.path.join(tempfile.mkdtemp(), "dead.sock")
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(path)
        dead.close()  # the file stays, nobody listens
        followers = host_reader.Followers(path, SETTINGS, self.clock)
        self.addCleanup(followers.close)
        followers.serve()
        self.assertTrue(host_reader.serving(path))

    def test_the_socket_is_the_owners_alone(self) -> None:
        mode = stat.S_IMODE(os.stat(self.followers.path).st_mode)
        self.assertEqual(0o600, mode & 0o777)

    def test_a_batch_is_applied_once_every_follower_that_owes_it_is(
            self) -> None:
        self.assertTrue(self.followers.applied(1, 1))  # nobody follows
        first = self.follow()
        self.wait(lambda: self.followers.count() == 1)
        self.followers.send(1, wire.frame(("batch", 1)))
        self.assertEqual(("batch", 1), first.receive(5))
        self.assertFalse(self.followers.applied(1, 1))
        late = self.follow()  # joins after batch 1: owes only 2 on
        self.wait(lambda: self.followers.count() == 2)
        first.send(("applied", 1))
        self.wait(lambda: self.followers.applied(1, 1))
        self.followers.send(2, wire.frame(("batch", 2)))
        self.assertEqual(("batch", 2), late.receive(5))
        first.send(("applied", 2))
        time.sleep(0.1)
        self.assertFalse(self.followers.applied(2, 2))
        late.close()  # one that leaves owes nothing
        self.wait(lambda: self.followers.applied(2, 2))

    def test_a_parent_behind_for_too_long_is_acked_without(self) -> None:
        with mock.patch.object(host_reader, "LOG") as log:
            self.assertTrue(self.followers.applied(1, 1))
            self.assertFalse(self.followers.applied(2, 1))
            self.clock.now += host_reader.FOLLOWER_PATIENCE
            self.assertFalse(self.followers.applied(2, 1))
            self.clock.now += 1
            self.assertTrue(self.followers.applied(2, 1))
            self.assertTrue(self.followers.applied(3, 1))  # still late
            log.warning.assert_called_once()
            self.assertIn("acks them without it",
                          log.warning.call_args[0][0])
            self.assertTrue(self.followers.applied(3, 3))
            log.info.assert_called_once()
            self.assertFalse(self.followers.applied(4, 3))  # waits again

    def test_the_state_is_told_at_once_and_to_later_ones(self) -> None:
        first = self.follow()
        self.wait(lambda: self.followers.count() == 1)
        self.followers.state(True)
        self.assertEqual(("state", True), first.receive(5))
        later = self.follow()
        self.assertEqual(("state", True), later.receive(5))

    def test_one_that_applies_nothing_for_too_long_is_dropped(self) -> None:
        slow = self.follow()
        self.wait(lambda: self.followers.count() == 1)
        self.followers.send(1, wire.frame(("batch", 1)))
        with mock.patch.object(host_reader.LOG, "warning") as warning:
            self.assertFalse(self.followers.applied(1, 1))
            self.clock.now += host_reader.FOLLOWER_PATIENCE + 1
            self.assertTrue(self.followers.applied(1, 1))
        self.assertEqual(0, self.followers.count())
        self.assertIn("applied no batch", warning.call_args[0][1])
        self.assertEqual(("batch", 1), slow.receive(5))
        self.assertRaises(wire.ReaderGone, slow.receive, 5)

    def test_other_settings_are_refused_in_one_message(self) -> None:
        for key, value, named in (
                ("wire", wire.VERSION + 1, "wire"),
                ("pool", "nova-drain-filters.h.0", "pool"),
                ("exchange", "other", "exchange"),
                # url unset in both: the broker is Nova's transport_url
                ("options", {None: {"transport_url": "rabbit://secret@y"}},
                 "[DEFAULT] transport_url")):
            channel = self.follow(**{key: value})
            kind, why = channel.receive(5)
            self.assertEqual("refused", kind)
            self.assertIn(named, why)
            self.assertNotIn("secret", why)
            self.assertRaises(wire.ReaderGone, channel.receive, 5)
        self.assertEqual(0, self.followers.count())

    def test_with_a_url_nova_s_own_transport_does_not_count(self) -> None:
        self.followers._settings = {**SETTINGS, "url": "rabbit://ironic"}
        channel = self.follow(url="rabbit://ironic",
                              options={None: {"transport_url": "fake:/"}})
        self.wait(lambda: self.followers.count() == 1)
        self.followers.state(True)
        self.assertEqual(("state", True), channel.receive(5))

    def test_another_user_is_refused_both_ways(self) -> None:
        with mock.patch.object(host_reader.os, "getuid",
                               return_value=os.getuid() + 1):
            self.assertRaises(host_reader.Refused, host_reader.connect,
                              self.followers.path)
            sock = socket.socket(socket.AF_UNIX)
            self.addCleanup(sock.close)
            sock.connect(self.followers.path)
            sock.settimeout(5)
            self.assertEqual(b"", sock.recv(1))  # closed, unheard
        self.assertEqual(0, self.followers.count())
