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

"""Where one event's CPU goes in one listener process, from its profile.

Reads the cProfile stats that ``ironic_storm --profile PREFIX`` leaves
per process (``PREFIX.<pid>.txt.prof``: every thread, CPU time, summed;
run it with ``--listener own`` or ``oslo``, since a reader process's
part is not profiled)
and splits the process's CPU into parts, each the cumulative time of the
function where that part starts:

* envelope: ``RabbitMessage.__init__`` (oslo_messaging/_drivers/
  impl_rabbit.py): kombu's decode of the AMQP body, then
  ``deserialize_msg``'s of the ``oslo.message`` string, both JSON;
* payload: ``notifications.parse_event``, ours (the NodePayload's fields);
* ack: ``NotificationAMQPIncomingMessage.acknowledge`` (amqpdriver.py:
  hands the ack to the polling thread, per message) and
  ``RabbitMessage.acknowledge`` (one ``basic.ack`` per message);
* locks: the own time of lock acquire and release, read on each
  thread's CPU clock. A blocked acquire should cost nothing on it, yet
  this is where a thread that waited for a lock, or for the GIL after
  one, shows its hand-over cost; read it as that, not as contention of
  ours (the listener holds its one condition for a dict update);
* apply: ``EventListener.apply_batch`` with the snapshot's patches and
  copies (the bench's lag stamp rides along in it);
* dispatch: ``BatchNotificationDispatcher.dispatch`` (oslo_messaging/
  notify/dispatcher.py) less our ``Endpoint.info`` inside it;
* the rest: what oslo.messaging, kombu, py-amqp and the executor spend
  reading frames and handing messages over (the whole minus the above and
  minus the bench's own threads).

Run from the repository root::

    tools/bench.sh event_costs PREFIX.<pid>.txt.prof --events 10000

It prints milliseconds per event and shares; it checks nothing.
"""
from __future__ import annotations

import argparse
import pstats
import sys
from typing import Any

from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import impl_rabbit
from oslo_messaging.notify import dispatcher

from nova_drain_filters.ironic_view import events
from nova_drain_filters.ironic_view import listening
from nova_drain_filters.ironic_view import notifications
from tests.functional.bench import storm_process


def _code(func: Any) -> tuple[str, int, str]:
    code = func.__code__
    return code.co_filename, code.co_firstlineno, code.co_name


#: Reads a profile; imports no harness (tools/bench.sh: no eventlet).
EVENTLET = False
#: A built-in's key prefix in pstats: its own time is what it costs.
OWN = ("~", 0)


def entries() -> dict[str, list[Any]]:
    """part -> the functions whose cumulative time is the part."""
    rabbit = impl_rabbit.RabbitMessage
    return {
        "envelope JSON (kombu + deserialize_msg)": [_code(rabbit.__init__)],
        "payload parse (ours)": [_code(notifications.parse_event)],
        "ack (hand-over + basic.ack)": [
            _code(amqpdriver.NotificationAMQPIncomingMessage.acknowledge),
            _code(rabbit.acknowledge)],
        "locks (acquire, waits: thread clock)": [
            OWN + ("<method 'acquire' of '_thread.lock' objects>",),
            OWN + ("<method 'release' of '_thread.lock' objects>",),
            OWN + ("<method '__enter__' of '_thread.lock' objects>",),
            OWN + ("<method '__exit__' of '_thread.lock' objects>",)],
        "apply (ours, snapshot)": [_code(events.EventListener.apply_batch)],
    }


#: The bench's own threads (the filters' runs, the stdin loop): not the
#: listener's cost.
def bench_entries() -> list[tuple[str, int, str]]:
    return [_code(storm_process.schedule), _code(storm_process.child)]


def _time(stats: dict[Any, Any], key: tuple[Any, ...]) -> float:
    """Cumulative CPU time of ``key`` (0 if it never ran)."""
    found = stats.get(key)
    return 0.0 if found is None else float(found[3])


def split(path: str) -> tuple[float, dict[str, float]]:
    """The process's CPU seconds in the listener, and each part's."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    whole = sum(tt for (_cc, _nc, tt, _ct, _c) in stats.values())
    bench = sum(_time(stats, key) for key in bench_entries())
    parts = {part: sum(_time(stats, key) for key in keys)
             for part, keys in entries().items()}
    # oslo.messaging's dispatch around our endpoint: grouping, screening,
    # the callback wrapper (our Endpoint.info is parse and hand-over).
    dispatch = _time(stats, _code(dispatcher.BatchNotificationDispatcher
                                  .dispatch))
    ours = _time(stats, _code(listening.Endpoint.info))
    parts["dispatch (oslo.messaging, around ours)"] = max(0.0,
                                                          dispatch - ours)
    listener = whole - bench
    parts["reading frames, executor, rest (oslo/kombu/amqp)"] = (
        listener - sum(parts.values()))
    return listener, parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("profile")
    parser.add_argument("--events", type=int, required=True,
                        help="events the process applied while profiled")
    args = parser.parse_args(argv)
    try:
        listener, parts = split(args.profile)
    except (OSError, TypeError, ValueError) as exc:
        parser.error(f"cannot read {args.profile}: {exc}")
    print(f"{'part':<50} {'ms/event':>9} {'share':>6}")
    for part, seconds in parts.items():
        print(f"{part:<50} {seconds / args.events * 1000:>9.3f} "
              f"{seconds / listener:>6.0%}")
    print(f"{'listener total':<50} {listener / args.events * 1000:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
