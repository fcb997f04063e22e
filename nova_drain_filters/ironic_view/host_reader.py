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

"""One event reader for every scheduler process of a host.

With ``[drain_filters] baremetal_notifications_host_reader``, the
processes of a host share one reader (``reader.py``) instead of running
one each: a host with eight workers otherwise reads and parses every
event eight times, and on a small host those readers take the CPU the
requests wait for (issue 22, ``select_burst`` at W = 8).

* **Election.** The process that holds the host's lock file (``Election``,
  ``flock`` in the lock directory of ``pools.py``) starts the reader, as
  a process does without sharing, and passes the lock to it: the lock is
  free only once both are gone, so a new reader cannot start beside an
  old one that still consumes.
* **Followers.** Every other process connects to the reader's Unix socket
  beside the lock (``connect``) and speaks the wire its parent speaks
  (``wire.py``): its settings first, then ``("applied", seq)``. Each end
  checks the other's user (``SO_PEERCRED``): the wire carries pickles.
  The reader refuses a follower whose settings are not its own (another
  wire version, pool, broker, exchange or topic) with
  ``("refused", why)``; that follower then reads on its own.
* **Acks.** The reader acks a batch once its parent and every follower
  that was there when it was sent have applied it (``Followers``). One
  that joined later never saw it; one that left, or fell
  ``FOLLOWER_PATIENCE`` seconds behind, no longer counts (a late one is
  dropped and connects again, and lists Ironic as after any outage). A
  parent that far behind is acked without, as said in its log.
* **Failover.** A follower whose reader ends (its leader exited, was
  killed or stopped) elects again: the first to take the lock starts the
  next reader, the rest connect to it. Unacked events come again from
  the broker.
* **Alone on the queue.** Two consumers of the host's queue would each
  get part of the events (issue 41). A process starts the host's reader
  only while it holds the lock, and passes it on (``pools.try_lock``
  keeps it off descriptors 0 to 2, which the reader's standard streams
  take); a new reader does not take the socket of one that listens
  (``serving``); and the reader counts the queue's consumers before it
  reads and every ``CONSUMER_CHECK`` seconds (``reader_child``): with
  another there, it logs an error and exits ``ANOTHER_READER``, and its
  parent reads a queue of its own.
"""
import os
import socket
import struct
import threading
import time
from typing import IO
from typing import Any

from oslo_log import log as logging

from nova_drain_filters.ironic_view import pools
from nova_drain_filters.ironic_view import wire

LOG = logging.getLogger(__name__)

#: The pool of a host's shared reader (``pools.pool_name``).
POOL_SLOT = "shared"
#: How long the reader waits for a new follower's settings.
HELLO_TIMEOUT = 5.0
#: How long a send to a follower may block before it is dropped.
SEND_TIMEOUT = 5.0
#: How long a follower may stay behind a batch before it is dropped: the
#: reader reads no further ahead of the slowest one (``MAX_UNACKED``).
FOLLOWER_PATIENCE = 30.0
#: Seconds a dropped follower's thread gets to leave its read.
LISTENER_EXIT = 2.0
#: Settings that must be the same for a follower to share the reader;
#: and the options that name the broker when ``url`` is unset
#: (``listening.notification_transport``), by (group, option).
SAME = ("wire", "pool", "url", "exchange", "topic")
BROKER_OPTIONS = ((None, "transport_url"),
                  ("oslo_messaging_notifications", "transport_url"))
#: sockaddr_un's sun_path holds 108 bytes with the closing NUL.
MAX_PATH = 107


#: The exit status of a reader that found another reader of the host's
#: queue (``reader_child``): its parent then reads a queue of its own.
ANOTHER_READER = 4
#: How often the host's reader counts the consumers of the host's queue
#: (each count opens a broker connection: not too often), and how many
#: counts in a row with another consumer make it stop.
CONSUMER_CHECK = 30.0
CONSUMER_STRIKES = 2
#: The first counts after a reader starts, before every CONSUMER_CHECK:
#: two readers that started together each saw no other before reading.
CONSUMER_FIRST_CHECKS = (2.0, 2.0)
#: How long a new reader waits for another consumer of the host's queue
#: to go (a reader killed a moment ago) before it stops.
CONSUMER_GRACE = 10.0


class Refused(RuntimeError):
    """The host's reader will not serve this process (``SAME``), or this
    process's reader found another reader of the host's queue."""


class LockLost(RuntimeError):
    """The host's reader lock was let go before the reader started."""


def paths(directory: str, host: str) -> tuple[str, str]:
    """The host's lock file and the reader's socket beside it."""
    stem = os.path.join(
        directory, f"{pools.POOL_PREFIX}-reader.{pools.safe(host)}")
    return stem + ".lock", stem + ".sock"


def peer_uid(sock: socket.socket) -> int:
    """The user of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                            struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class Election:
    """The host's reader lock: who starts the reader.

    Like ``pools.Slot``: the lock goes with the processes holding the
    file, and a forked child closes (never unlocks) the copy it inherited
    before it tries for one of its own.
    """

    def __init__(self, directory: str, host: str) -> None:
        self.directory = directory
        self.lock_path, self.socket_path = paths(directory, host)
        self._file: IO[bytes] | None = None
        self._pid: int | None = None

    @property
    def usable(self) -> bool:
        """False if the socket's path is too long for a Unix socket."""
        return len(os.fsencode(self.socket_path)) <= MAX_PATH

    def lead(self) -> bool:
        """Hold the lock, or take it if it is free; True if held."""
        if self._file is not None and self._pid == os.getpid():
            return True
        self.forget()
        os.makedirs(self.directory, exist_ok=True)
        handle = pools.try_lock(self.lock_path)
        if handle is None:
            return False
        self._file, self._pid = handle, os.getpid()
        return True

    @property
    def fileno(self) -> int | None:
        """The lock's descriptor, for the reader to inherit; None unheld."""
        handle = self._file
        return None if handle is None or handle.closed else handle.fileno()

    def forget(self) -> None:
        """Close this process's copy: the lock is free once no process
        (the reader included) holds one."""
        if self._file is not None:
            self._file.close()
        self._file = self._pid = None


def serving(path: str) -> bool:
    """Whether a process listens on the host's reader socket at ``path``:
    another reader, which a new one must not take the path from."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:  # none there, or a dead reader's socket
        return False
    finally:
        sock.close()
    return True


def connect(path: str) -> socket.socket:
    """A follower's connection to the host's reader.

    Raises OSError while no reader listens there (none yet, or a dead
    one's socket), and Refused if it runs as another user.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        uid = peer_uid(sock)
        if uid != os.getuid():
            raise Refused(f"the reader at {path} runs as user {uid}, this "
                          f"process as {os.getuid()}")
    except BaseException:
        sock.close()
        raise
    return sock


def differences(hello: Any, own: dict[str, Any]) -> list[str]:
    """What in a follower's settings is not the reader's (names only:
    the URLs hold passwords)."""
    if not isinstance(hello, dict):
        return ["all"]
    different = [key for key in SAME if hello.get(key) != own.get(key)]
    if own.get("url"):
        return different  # the broker: the same url, nothing else counts
    theirs, ours = hello.get("options") or {}, own.get("options") or {}
    for group, name in BROKER_OPTIONS:
        if (theirs.get(group) or {}).get(name) != (
                ours.get(group) or {}).get(name):
            different.append(f"[{group or 'DEFAULT'}] {name}")
    return different


class _Member:
    """One follower, as the reader sees it."""

    def __init__(self, channel: wire.Channel, joined: int) -> None:
        self.channel = channel
        #: The first batch it was sent; it owes no earlier one.
        self.joined = joined
        self.applied = joined - 1
        #: When it was first seen behind a batch due; None when not.
        self.behind_since: float | None = None
        #: What takes in its messages (``Followers._listen``).
        self.listener: threading.Thread | None = None


class Followers:
    """The reader's side: its socket, its followers, what they applied."""

    def __init__(self, path: str, settings: dict[str, Any],
                 clock: Any = time.monotonic) -> None:
        self.path = path
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._members: list[_Member] = []
        #: The last batch sent, and the connection's last state.
        self._seq = 0
        self._state: bool | None = None
        self._listener: socket.socket | None = None
        #: When the parent was first seen behind a batch due, and whether
        #: batches are acked without it now.
        self._parent_behind_since: float | None = None
        self._parent_late = False

    def serve(self) -> None:
        """Listen on the socket (the caller holds the lock) and accept.

        Raises Refused if another reader listens there: the lock should
        have made that impossible, and taking its path would hide it from
        the processes that look for the host's reader while it consumes.
        """
        if serving(self.path):
            raise Refused(f"another reader of this host listens at "
                          f"{self.path}")
        try:
            os.unlink(self.path)  # a dead reader's, as the lock says
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the owner's alone, from the start
        try:
            listener.bind(self.path)
        finally:
            os.umask(old)
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="reader-followers",
                         daemon=True).start()

    def count(self) -> int:
        with self._lock:
            return len(self._members)

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # closed: the reader ends
            try:
                self._admit(sock)
            except Exception as exc:  # one follower's trouble, not ours
                LOG.warning("Refused a follower of the host's Ironic event "
                            "reader: %s", exc)
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        uid = peer_uid(sock)
        if uid != os.getuid():
            raise Refused(f"it runs as user {uid}, the reader as "
                          f"{os.getuid()}")
        channel = wire.Channel(sock)
        hello = channel.receive(HELLO_TIMEOUT)
        different = differences(hello, self._settings)
        if different:
            channel.send(("refused", "its settings differ from the "
                          f"reader's: {', '.join(different)}"))
            raise Refused(f"its settings differ: {', '.join(different)}")
        # Sends block at most SEND_TIMEOUT; its receiving thread waits on
        # the socket without a timeout (wire.Channel sets that), and the
        # kernel's send timeout applies to blocking sends all the same.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", int(SEND_TIMEOUT), 0))
        with self._lock:
            member = _Member(channel, self._seq + 1)
            if self._state is not None:
                channel.send(("state", self._state))
            self._members.append(member)
        LOG.debug("A scheduler process follows the host's reader (%d now)",
                  self.count())
        member.listener = threading.Thread(
            target=self._listen, args=(member,), name="reader-follower",
            daemon=True)
        member.listener.start()

    def _listen(self, member: _Member) -> None:
        """Take in what one follower has applied, until it leaves."""
        try:
            while True:
                message = member.channel.receive(None)
                if message[0] == "applied":
                    member.applied = max(member.applied, int(message[1]))
        except Exception:  # it left, or spoke nonsense: it is dropped
            pass
        self._drop(member, None)

    def _drop(self, member: _Member, why: str | None) -> None:
        with self._lock:
            if member not in self._members:
                return
            self._members.remove(member)
        if why:
            LOG.warning("Dropped a follower of the host's Ironic event "
                        "reader: %s; it connects again and lists Ironic",
                        why)
        try:
            member.channel.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        # Its thread ends on the shutdown: let it leave its read before the
        # socket is closed. Under eventlet a green read still waiting on a
        # closed descriptor stays in the hub, and the next socket or pipe
        # given that number is refused ("Second simultaneous read").
        listener = member.listener
        if listener is not None and listener is not threading.current_thread():
            try:
                listener.join(LISTENER_EXIT)
            except RuntimeError:
                pass  # not started yet: it finds its socket closed
        member.channel.close()

    def send(self, seq: int, frame: bytes) -> None:
        """Send batch ``seq`` (one frame, pickled once) to every follower."""
        failed = []
        with self._lock:
            self._seq = seq
            for member in self._members:
                try:
                    member.channel.send_frame(frame)
                except OSError:
                    failed.append(member)
        for member in failed:
            self._drop(member, "it did not take a batch within "
                       f"{SEND_TIMEOUT:.0f} s")

    def state(self, up: bool) -> None:
        """Tell every follower the connection's state, and later ones."""
        frame = wire.frame(("state", up))
        with self._lock:
            self._state = up
            members = list(self._members)
        for member in members:
            try:
                member.channel.send_frame(frame)
            except OSError:
                self._drop(member, None)

    def applied(self, seq: int, by_parent: int) -> bool:
        """Whether the parent (``by_parent``: the last batch it applied)
        and every follower that owes batch ``seq`` applied it.

        A follower behind it for over ``FOLLOWER_PATIENCE`` seconds is
        dropped. The parent cannot be: the batch is acked without it then
        (said once), so that one slow process does not hold the host's
        events back. Nothing is lost by that but its own lag: it has the
        batch already, and a process that restarts lists Ironic.
        """
        now = self._clock()
        done = self._parent_applied(seq, by_parent, now)
        late = []
        with self._lock:
            for member in self._members:
                if member.joined > seq or member.applied >= seq:
                    member.behind_since = None
                    continue
                if member.behind_since is None:
                    member.behind_since = now
                elif now - member.behind_since > FOLLOWER_PATIENCE:
                    late.append(member)
                    continue
                done = False
        for member in late:
            self._drop(member, f"it applied no batch for "
                       f"{FOLLOWER_PATIENCE:.0f} s")
        return done

    def _parent_applied(self, seq: int, by_parent: int, now: float) -> bool:
        if by_parent >= seq:
            if self._parent_late:
                LOG.info("This scheduler process applies Ironic's events "
                         "again; the host's reader acks after it again")
            self._parent_behind_since, self._parent_late = None, False
            return True
        if self._parent_behind_since is None:
            self._parent_behind_since = now
            return False
        if now - self._parent_behind_since <= FOLLOWER_PATIENCE:
            return False
        if not self._parent_late:
            self._parent_late = True
            LOG.warning("This scheduler process applied no batch of "
                        "Ironic's events for %.0f s; the host's reader "
                        "acks them without it, so that the other processes "
                        "go on (is it busy or stuck?)", FOLLOWER_PATIENCE)
        return True

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            members = list(self._members)
        for member in members:
            self._drop(member, None)
