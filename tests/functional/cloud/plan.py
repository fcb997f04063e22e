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

"""Steps that wait only for what they need, each in its own thread.

Bringing a cloud up on two cores is mostly waiting: for a schema, for an
API to load, for Ironic to move a node. Run one step after another and a
core sits idle through each wait; start each step as soon as the steps it
needs are done and the waits overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

from tests.functional.services.process import ServiceStartError


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[], None]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timing:
    name: str
    began: float  # seconds after the plan began
    took: float


def check(steps: Sequence[Step]) -> None:
    """Refuse a plan that names an unknown step or loops."""
    names = {s.name for s in steps}
    if len(names) != len(steps):
        raise ValueError("two steps have one name")
    for step in steps:
        unknown = set(step.needs) - names
        if unknown:
            raise ValueError(f"{step.name} needs unknown {sorted(unknown)}")
    done: set[str] = set()
    left = list(steps)
    while left:
        ready = [s for s in left if set(s.needs) <= done]
        if not ready:
            raise ValueError(f"a loop among {sorted(s.name for s in left)}")
        done.update(s.name for s in ready)
        left = [s for s in left if s.name not in done]


def run(steps: Sequence[Step],
        report: Callable[[Timing], None] = lambda t: None) -> list[Timing]:
    """Run every step once its needs are done; their timings, in the order
    they finished. The first failure stops new steps from starting, waits
    for the running ones and is raised as a :class:`ServiceStartError`
    that names its step."""
    check(steps)
    began = time.monotonic()
    cond = threading.Condition()
    done: set[str] = set()
    started: set[str] = set()
    timings: list[Timing] = []
    failures: list[tuple[str, BaseException]] = []
    running = 0

    def body(step: Step) -> None:
        nonlocal running
        t0 = time.monotonic()
        try:
            step.run()
        except BaseException as exc:  # noqa: B036 - reported below
            with cond:
                failures.append((step.name, exc))
        else:
            timing = Timing(step.name, t0 - began, time.monotonic() - t0)
            report(timing)
            with cond:
                timings.append(timing)
                done.add(step.name)
        finally:
            with cond:
                running -= 1
                cond.notify_all()

    with cond:
        while True:
            if not failures:
                for step in steps:
                    if step.name not in started and set(step.needs) <= done:
                        started.add(step.name)
                        running += 1
                        threading.Thread(target=body, args=(step,),
                                         name=f"cloud-{step.name}",
                                         daemon=True).start()
            if running == 0:
                break
            cond.wait()
    if failures:
        name, exc = failures[0]
        if isinstance(exc, ServiceStartError):
            raise exc
        raise ServiceStartError(f"{name}: {type(exc).__name__}: {exc}") from exc
    return timings
