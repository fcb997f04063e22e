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

"""The pool's queue read in a process of its own: the reader.

A scheduler process has one GIL, and its request thread wants all of it.
Reading an event in the process takes the GIL for py-amqp's frames,
kombu's message, two JSON decodes and our parse, and in a burst that
time is taken from ``select_destinations`` (issue 22; the
``select_burst`` benchmark in ``doc/source/testing.rst`` has the
figures). The reader is
a child process that does all of that (``consumer.QueueConsumer`` with the
parent's oslo.messaging options) and hands the parent what
``notifications.parse_event`` made of each batch, in columns on a socket
pair: a few microseconds an event to take in.

The acks stay where the apply is. The parent tells the reader which
batches its view has applied, and only then does the reader ack them; a
crash of either process before that leaves them unacked, and the broker
delivers them again. The reader ends when the parent's end of the socket
closes (the parent exited or was killed), and the parent starts a new
reader if its reader dies. The reader's log records go to the parent's
log, so they land where the scheduler's do.

With ``[drain_filters] baremetal_notifications_host_reader``, one reader
serves every scheduler process of the host (``host_reader.py``): the
process that wins the election starts it as above, and the others follow
it on its socket with the same messages.

The reader's own code is ``reader_child.py``; this module is the
parent's side. The wire (``wire.py``): frames of a length and a pickle.

* parent to reader: the settings, once; then ``("applied", seq)``;
* reader to parent: ``("state", connected)``, ``("log", level, text)``
  and ``("batch", seq, events, received, dropped, columns)``: how many
  node events, how many messages were parsed and dropped, and the events
  in columns (``wire.encode_batch``).
"""
import logging as std_logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging
from oslo_messaging import opts as messaging_opts

from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import wire

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: How long ``ReaderProcess.start`` waits for a new reader to say it is
#: connected before it looks again whether it was stopped meanwhile.
START_POLL = 0.5
#: How long the parent waits before it starts a reader that died; twice
#: as long each time one dies before it connected, up to the maximum.
RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 60.0
#: How long a stopped reader may take to exit before it is killed.
EXIT_GRACE = 5.0
#: How often a process that follows the host's reader (``host_reader``)
#: tries again to connect to it, or to take its place.
FOLLOW_RETRY = 0.2

#: The reader's entry module (what ``ps`` shows).
ENTRY = "nova_drain_filters.event_reader"

#: What the parent does with a batch: each node's latest event
#: (``notifications.Pending``), how many node events that was, how many
#: messages were parsed and how many dropped. Returns whether it is
#: applied yet.
OnParsed = Callable[[dict[str, notifications.Pending], int, int, int],
                    Callable[[], bool]]

def settings(pool: str, share: str | None = None,
             unread: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the reader needs to consume the pool as this process would.

    ``share``: the socket on which the host's reader serves the other
    processes (``host_reader``); None for a reader of this process alone.
    ``unread``: the host's queues of the other reading mode, which the
    reader deletes once connected if nobody reads them
    (``consumer.delete_unused``).
    Every oslo.messaging option this process has (``[DEFAULT]``'s
    transport_url and control_exchange, ``[oslo_messaging_rabbit]``'s TLS,
    heartbeat, quorum and HA settings, ...), as its value here: the
    scheduler's own, however it was configured (files or overrides).
    """
    values: dict[str | None, dict[str, Any]] = {}
    for group, opts in messaging_opts.list_opts():
        section = CONF if group is None else getattr(CONF, group, None)
        if section is None:
            continue
        for opt in opts:
            try:
                values.setdefault(group, {})[opt.dest] = section[opt.dest]
            except (cfg.NoSuchOptError, cfg.NoSuchGroupError, KeyError):
                continue  # not registered here: the reader's default
    group = CONF.drain_filters
    return {"pool": pool,
            "url": group.baremetal_notifications_url,
            "exchange": group.baremetal_notifications_exchange,
            "topic": group.baremetal_notifications_topic,
            "debug": LOG.isEnabledFor(std_logging.DEBUG),
            "nice": priority.READER_NICE,
            "wire": wire.VERSION,
            "share": share,
            "unread": list(unread),
            "options": values}


# the parent's side -----------------------------------------------------------

class ReaderProcess:
    """A reader for one pool, and the parent's thread that takes its
    batches in; the shape of an oslo server (start, stop, wait).

    With an ``election`` (``host_reader``), the pool is the host's: the
    process that wins the election starts the reader and serves the
    others from it, the others follow it, and one the reader refuses
    reads ``own_pool`` with a reader of its own.
    """

    def __init__(self, pool: str, on_parsed: OnParsed,
                 argv: list[str] | None = None,
                 election: host_reader.Election | None = None,
                 own_pool: str | None = None,
                 unread: tuple[str, ...] = (),
                 lock: Callable[[], int | None] | None = None) -> None:
        self._pool = pool
        #: The descriptor of the lock of this process's slot, if it has
        #: one (``pools.Slot``): the reader holds it too, so that the slot
        #: is free only once both are gone. A parent parked while its
        #: reader was still starting let its slot go, and the worker it
        #: had just forked took the slot and read its queue beside that
        #: reader until it ended.
        self._lock = lock
        # Never the same queue: a reader that found another on ``pool``
        # must not read it again.
        self._own_pool = own_pool or f"{pool}.pid-{os.getpid()}"
        self._election = election
        #: The host's queues of the other reading mode (``settings``).
        self._unread = unread
        #: Following the host's reader rather than running one.
        self._following = False
        self._on_parsed = on_parsed
        self._argv = argv or [sys.executable, "-m", ENTRY]
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: wire.Channel | None = None
        self._up = self._up_since_spawn = False
        self._started = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Readers started, the first included, and batches taken in.
        self.starts = self.batches = 0
        #: Times this process connected to the host's reader.
        self.follows = 0
        #: Told to read elsewhere: its reader is ending on purpose.
        self._moving = False

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def pool(self) -> str:
        """The queue read for this process now."""
        return self._pool

    @property
    def following(self) -> bool:
        return self._following

    @property
    def generation(self) -> int:
        """How many readers this process has had, run or followed: a new
        one may have missed events the last one read (a follower that
        joins the next reader after it read them again), so the listener
        lists once when it changes."""
        return self.starts + self.follows

    def start(self) -> None:
        """Start the reader; blocks until it is connected (or stopped).

        Raises RuntimeError if the first reader cannot be started or exits
        before it connects: it cannot start at all, and the listener reads
        in its own process instead.
        """
        try:
            self._spawn()
        except Exception as exc:
            self._reap()
            raise RuntimeError(f"cannot run the event reader: {exc}") from exc
        self._thread = threading.Thread(
            target=self._run, name="drain-ironic-events-reader", daemon=True)
        self._thread.start()
        while not self._started.wait(START_POLL):
            if self._stop.is_set():
                return
            proc = self._proc
            if not self._following and proc is not None and (
                    proc.poll() is not None) and not self._started.is_set(
                    ) and proc.returncode != host_reader.ANOTHER_READER and (
                    not self._moving):
                # (A reader that found another on the host's queue said
                # so: this process reads a queue of its own next, _run.)
                # Not again and again: the listener polls instead.
                self.stop()
                self.wait()
                raise RuntimeError(
                    f"the event reader exited with {proc.returncode} before "
                    "it connected")

    def stop(self) -> None:
        self._stop.set()
        if self._election is not None:
            self._election.forget()  # free once the reader is gone too
        channel = self._channel
        if channel is not None:
            # The reader ends on the end of its socket.
            try:
                channel.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def wait(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
        self._reap()

    def forget_after_fork(self) -> None:
        """In a forked child: let go of the parent's reader.

        Closes this process's copy of the socket, not the socket itself
        (no shutdown): the parent's reader ends when its parent's end
        closes, not when a worker forked with a copy of it lives on.
        """
        self._stop.set()
        channel, self._channel, self._proc = self._channel, None, None
        if channel is not None:
            channel.close()
        if self._election is not None:
            self._election.forget()

    def connected(self) -> bool:
        """True while the reader runs and says it is connected."""
        if self._following:
            return self._up
        proc = self._proc
        return self._up and proc is not None and proc.poll() is None

    def _spawn(self) -> None:
        """Start the reader; or, sharing the host's, follow it if another
        process won the election (blocks until one of the two, or stop)."""
        self._following = False
        election = self._election
        while election is not None and not election.lead():
            try:
                self._follow(election.socket_path)
                return
            except host_reader.Refused as exc:
                self._alone(str(exc))
                break
            except OSError:  # no reader there yet, or a dead one's socket
                if self._stop.wait(FOLLOW_RETRY):
                    return
        share = lock = None
        if self._election is not None:
            share, lock = self._election.socket_path, self._election.fileno
            if lock is None:
                # Let go since lead() (stopped meanwhile): a reader of the
                # host's queue that does not hold the lock lets another
                # start beside it, and each would get part of the events.
                raise host_reader.LockLost(
                    "this process no longer holds the host's reader lock")
        elif self._lock is not None and self._pool != self._own_pool:
            lock = self._lock()  # the slot's queue: None if none was free
        parent, child = socket.socketpair()
        keep = [child.fileno()]
        if lock is not None:
            keep.append(lock)  # the reader holds the lock too
        try:
            self._proc = subprocess.Popen(
                self._argv + ["--fd", str(child.fileno())],
                pass_fds=tuple(keep), stdin=subprocess.DEVNULL,
                close_fds=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.starts += 1
        self._up = False
        self._channel = wire.Channel(parent)
        self._channel.send(settings(self._pool, share, self._unread))

    def _follow(self, path: str) -> None:
        channel = wire.Channel(host_reader.connect(path))
        try:
            channel.send(settings(self._pool))
        except OSError:
            channel.close()
            raise
        self._proc = None
        self._up = False
        self._following = True
        self._channel = channel
        self.follows += 1

    def _alone(self, why: str) -> None:
        """Stop sharing a queue (the host's, or a slot's another process
        reads too): read ``own_pool`` alone."""
        LOG.error("The Ironic event reader of pool %(old)s will not serve "
                  "this process (%(why)s); it reads as pool %(pool)s on its "
                  "own", {"old": self._pool, "why": why,
                          "pool": self._own_pool})
        if self._election is not None:
            self._election.forget()
        self._election = None
        self._following = False
        self._pool = self._own_pool
        self._unread = ()  # the host's queue is read: by its reader

    def _reap(self) -> None:
        proc, channel = self._proc, self._channel
        if channel is not None:
            channel.close()
        if proc is None or self._following:
            return
        try:
            proc.wait(EXIT_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(EXIT_GRACE)

    def _run(self) -> None:
        # Taking batches in is event work: it yields to the requests.
        priority.lower_this_thread()
        delay = RESTART_DELAY
        while not self._stop.is_set():
            self._up_since_spawn = False
            following, refused = self._following, False
            try:
                self._serve()
            except wire.ReaderGone:
                pass
            except host_reader.Refused as exc:
                self._alone(str(exc))
                refused = True
            except wire.VersionMismatch as exc:
                # Not again: the installed reader will not change by itself.
                LOG.error("Ironic event reader (pid %(pid)s): %(error)s",
                          {"pid": self.pid, "error": exc})
                self._up = False
                self.stop()
                self._reap()
                return
            except Exception:  # the thread must outlive any surprise
                LOG.exception("Ironic event reader: the parent's side "
                              "failed; starting a new reader")
            self._up = False
            if self._stop.is_set() or not (
                    self._started.is_set() or following or refused):
                return  # stopped, or the first never connected: start() says
            # One that never came up again waits twice as long each time.
            delay = RESTART_DELAY if self._up_since_spawn else min(
                MAX_RESTART_DELAY, delay * 2)
            proc = self._proc
            self._reap()
            if following and not refused:
                # Its leader exited or stopped: elect again, at once.
                delay = FOLLOW_RETRY
                LOG.info("The host's Ironic event reader ended; this "
                         "process takes its place or follows the next")
            elif not refused:
                LOG.warning("The Ironic event reader (pid %(pid)s) exited "
                            "with %(rc)s; starting a new one in "
                            "%(delay).0f s",
                            {"pid": None if proc is None else proc.pid,
                             "rc": None if proc is None else proc.returncode,
                             "delay": delay})
            while not self._stop.wait(delay):
                try:
                    self._spawn()
                    self._moving = False
                    break
                except Exception:
                    LOG.exception("Cannot start the Ironic event reader")
                    delay = min(MAX_RESTART_DELAY, delay * 2)

    def _serve(self) -> None:
        """Take the reader's messages in and tell it what is applied."""
        channel = self._channel
        assert channel is not None
        in_flight: list[tuple[int, Callable[[], bool]]] = []
        while not self._stop.is_set():
            try:
                message = channel.receive(
                    consumer.ACK_POLL if in_flight else 1.0)
            except TimeoutError:
                message = None
            except OSError as exc:
                raise wire.ReaderGone() from exc
            if message is not None:
                self._take(message, in_flight)
            applied = None
            while in_flight and in_flight[0][1]():
                applied = in_flight.pop(0)[0]
            if applied is not None:
                try:
                    channel.send(("applied", applied))
                except OSError as exc:  # it died meanwhile: replaced, quietly
                    raise wire.ReaderGone() from exc

    def _take(self, message: Any,
              in_flight: list[tuple[int, Callable[[], bool]]]) -> None:
        kind = message[0]
        if kind == "batch":
            if len(message) != wire.BATCH_FIELDS:  # an older reader
                raise wire.VersionMismatch(
                    f"the installed reader sends batches of {len(message)} "
                    f"fields, this scheduler process reads "
                    f"{wire.BATCH_FIELDS}: restart "
                    "nova-scheduler so that both are the same; until then "
                    "it lists Ironic")
            _, seq, events, received, dropped, columns = message
            self.batches += 1
            applied = self._on_parsed(wire.decode_batch(columns), events,
                                      received, dropped)
            in_flight.append((seq, applied))
        elif kind == "state":
            self._up = bool(message[1])
            if self._up:
                self._up_since_spawn = True
                self._started.set()
        elif kind == "refused":
            # Its reader ends next: start() must not take that end (any
            # exit status, as its main thread may see our end first) for
            # a reader that could not start.
            self._moving = True
            raise host_reader.Refused(message[1])
        elif kind == "log":
            _, level, text = message
            LOG.log(level, "Ironic event reader %(pid)s: %(text)s",
                    {"pid": self.pid, "text": text})
