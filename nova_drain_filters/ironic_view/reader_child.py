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

"""The event reader process itself (``reader.py`` is its parent's side).

Run as ``python -m nova_drain_filters.event_reader --fd N`` by a scheduler
process, on the socket pair it passed: it takes its settings from the
socket, consumes the pool's queue (``consumer.QueueConsumer`` with the
parent's oslo.messaging options), parses each batch and sends it in
columns (``wire.encode_batch``), acks a batch once the parent says it is
applied, sends its log records to the parent's log, and ends when the
parent's end of the socket closes.
"""
import itertools
import logging as std_logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import oslo_messaging
from oslo_config import cfg
from oslo_log import log as logging
from oslo_messaging import opts as messaging_opts

from nova_drain_filters.ironic_view import consumer
from nova_drain_filters.ironic_view import host_reader
from nova_drain_filters.ironic_view import notifications
from nova_drain_filters.ironic_view import priority
from nova_drain_filters.ironic_view import wire

LOG = logging.getLogger(__name__)

#: How often the reader looks whether its connection went up or down.
STATE_POLL = 0.25


class _ToParent(std_logging.Handler):
    """Send the reader's log records to the parent's log."""

    def __init__(self, channel: wire.Channel) -> None:
        super().__init__()
        self.setFormatter(std_logging.Formatter("%(name)s: %(message)s"))
        self._channel = channel
        self._sending = threading.local()

    def emit(self, record: std_logging.LogRecord) -> None:
        if getattr(self._sending, "busy", False):
            return  # a record about sending one: dropped, not looped
        self._sending.busy = True
        try:
            self._channel.send(("log", record.levelno, self.format(record)))
        except Exception:  # the parent is gone: the reader ends soon
            pass
        finally:
            self._sending.busy = False


def messaging_conf(values: dict[str | None, dict[str, Any]]) -> Any:
    """A configuration holding the parent's oslo.messaging options."""
    conf = cfg.ConfigOpts()
    conf([], project="nova", default_config_files=[], default_config_dirs=[])
    for group, opts in messaging_opts.list_opts():
        conf.register_opts(opts, group=group)
        for opt in opts:
            if opt.dest in values.get(group, {}):
                conf.set_override(opt.dest, values[group][opt.dest],
                                  group=group)
    return conf


class Reader:
    """The child: consume the pool, send each batch parsed, ack what the
    parent applied."""

    def __init__(self, channel: wire.Channel) -> None:
        self.channel = channel
        self._seq = 0
        self._applied = 0
        #: The other processes of the host, when this is the host's reader.
        self.followers: host_reader.Followers | None = None

    def on_batch(self, messages: list[consumer.Message]
                 ) -> Callable[[], bool]:
        events: list[notifications.NodeEvent] = []
        received = dropped = 0
        for event_type, payload in messages:
            try:
                event = notifications.parse_event(event_type, payload)
            except notifications.MalformedEvent as exc:
                dropped += 1
                LOG.warning("Dropped a malformed Ironic notification: %s",
                            exc)
                continue
            except Exception:
                dropped += 1
                LOG.exception("Dropped an Ironic notification")
                continue
            received += 1
            if event is not None:
                events.append(event)
        self._seq += 1
        seq = self._seq
        frame = wire.frame(("batch", seq, len(events), received, dropped,
                            wire.encode_batch(events)))
        self.channel.send_frame(frame)
        followers = self.followers
        if followers is None:
            return lambda: self._applied >= seq
        followers.send(seq, frame)
        return lambda: followers.applied(seq, self._applied)

    def run(self) -> None:
        setup = self.channel.receive(None)
        if setup["nice"]:
            priority.lower_below_parent(setup["nice"])
        root = std_logging.getLogger()
        root.handlers[:] = [_ToParent(self.channel)]
        root.setLevel(std_logging.DEBUG if setup["debug"]
                      else std_logging.INFO)
        if setup.get("wire") != wire.VERSION:
            # A parent that loaded another nova-drain-filters than the one
            # installed now (an upgrade under a running scheduler; before
            # version 2 it sent none). Its log still reads ours.
            raise wire.VersionMismatch(
                f"this scheduler process loaded a nova-drain-filters whose "
                f"event wire is version {setup.get('wire', 1)}, and the "
                f"installed one's is {wire.VERSION}: restart nova-scheduler "
                "so that both are the same")
        if setup.get("share"):
            # The host's reader: the parent holds its lock, and so does
            # this process (inherited), until both are gone.
            self.followers = host_reader.Followers(setup["share"], setup)
            try:
                self.followers.serve()
            except host_reader.Refused as exc:
                self.another_reader(str(exc))
        transport = oslo_messaging.get_notification_transport(
            messaging_conf(setup["options"]), url=setup["url"])
        queue = consumer.QueueConsumer(
            transport, setup["exchange"], setup["topic"], setup["pool"],
            self.on_batch)
        # Connecting blocks while the broker is unreachable: in a thread,
        # so that this one sees its parent's end at once even then.
        threading.Thread(target=self._consume,
                         args=(queue, transport, setup.get("unread") or [],
                               setup["pool"]),
                         name="reader-consume", daemon=True).start()
        while True:
            message = self.channel.receive(None)
            if message[0] == "applied":
                self._applied = max(self._applied, message[1])

    def _consume(self, queue: consumer.QueueConsumer, transport: Any,
                 unread: list[str], pool: str) -> None:
        try:
            # Whatever the mode: a queue has one reader, or each gets part
            # of the events (the host's queue and a process's own alike;
            # issue 41 saw two processes of one host on one slot's queue).
            self._alone_on(transport, pool, before=True)
            queue.start()  # returns once connected
        except Exception:
            LOG.exception("The Ironic event reader cannot consume")
            os._exit(1)
        threading.Thread(target=self._watch_consumers,
                         args=(transport, pool),
                         name="reader-consumers", daemon=True).start()
        if unread:
            threading.Thread(target=sweep, args=(transport, unread),
                             name="reader-sweep", daemon=True).start()
        self._report(queue)

    def _alone_on(self, transport: Any, pool: str, before: bool) -> None:
        """Stop (``another_reader``) if the queue has a consumer besides
        this reader: RabbitMQ gives each message to one consumer, so two
        readers would each hand their processes part of the events. The
        locks (the host's, a slot's) make that impossible; this says so if
        it happens all the same."""
        mine = 0 if before else 1
        found = consumer.consumers(transport, pool)
        deadline = time.monotonic() + host_reader.CONSUMER_GRACE
        while found > mine and time.monotonic() < deadline:
            # A reader killed a moment ago may still count at the broker
            # until its connection's end reaches it.
            time.sleep(STATE_POLL)
            found = consumer.consumers(transport, pool)
        if found > mine:
            self.another_reader(
                f"the queue {pool} has {found - mine} consumer(s) besides "
                "this reader")

    def _watch_consumers(self, transport: Any, pool: str) -> None:
        """Count the queue's consumers soon after the start (two readers
        that started together both saw none before), then every
        ``host_reader.CONSUMER_CHECK`` seconds; stop after
        ``CONSUMER_STRIKES`` counts in a row with another."""
        strikes = 0
        waits = itertools.chain(host_reader.CONSUMER_FIRST_CHECKS,
                                itertools.repeat(host_reader.CONSUMER_CHECK))
        for wait in waits:
            time.sleep(wait)
            try:
                found = consumer.consumers(transport, pool)
            except Exception as exc:  # the broker's trouble: next time
                LOG.debug("Could not count the consumers of %s: %s",
                          pool, exc)
                continue
            strikes = strikes + 1 if found > 1 else 0
            if strikes >= host_reader.CONSUMER_STRIKES:
                self.another_reader(
                    f"the queue {pool} has {found - 1} consumer(s) besides "
                    "this reader")

    def another_reader(self, why: str) -> None:
        """Another reader reads this reader's queue: say so, tell the
        parent (which reads a queue of its own then) and end, never to
        share the queue with it."""
        LOG.error("Another Ironic event reader reads this reader's queue "
                  "(%s): two readers of one queue each get part of the "
                  "events, so this one stops reading it and its scheduler "
                  "process reads a queue of its own", why)
        try:
            self.channel.send(("refused", f"another reader of its queue: "
                               f"{why}"))
        except OSError:
            pass
        os._exit(host_reader.ANOTHER_READER)

    def _report(self, queue: consumer.QueueConsumer) -> None:
        up = None
        while True:
            now = queue.connected()
            if now != up:
                up = now
                try:
                    self.channel.send(("state", up))
                except OSError:
                    return  # the parent is gone: the reader ends
                if self.followers is not None:
                    self.followers.state(up)
            time.sleep(STATE_POLL)


def sweep(transport: Any, unread: list[str]) -> None:
    """Delete the host's queues of the other reading mode that nobody
    reads (``consumer.delete_unused``); a failure only leaves them."""
    try:
        deleted = consumer.delete_unused(transport, unread)
    except Exception as exc:
        LOG.warning("Could not remove this host's unread Ironic event "
                    "queues (%s); a broker policy can (the baremetal "
                    "guide, Queues)", exc)
        return
    for name, messages in deleted:
        LOG.info("Removed the queue %(name)s (unread events in it: "
                 "%(n)d): this host's scheduler processes no longer read it "
                 "([drain_filters] baremetal_notifications_host_reader)",
                 {"name": name, "n": messages})


def main(argv: list[str]) -> int:
    """The reader, on the socket ``--fd N`` its parent passed it."""
    try:
        channel = wire.Channel(socket.socket(fileno=int(
            argv[argv.index("--fd") + 1])))
    except (ValueError, IndexError, OSError) as exc:
        print(f"event_reader: error: no parent's socket in {argv} ({exc}); "
              "a scheduler process starts this, not a person",
              file=sys.stderr)
        return 2
    try:
        Reader(channel).run()
    except (wire.ReaderGone, OSError):
        pass  # the parent closed its end, or died: unacked is redelivered
    except wire.VersionMismatch as exc:
        LOG.error("%s", exc)
        os._exit(3)
    except Exception:
        LOG.exception("The Ironic event reader failed")
        os._exit(1)
    # Not a clean exit: the consumer's threads and connection go with the
    # process, and the broker sends what was not acked again.
    os._exit(0)

