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

"""A scheduler-like process that forks a worker the way oslo.service does.

Run by ``test_fork_backends`` as ``python -m tests.unit.fork_worker
BACKEND``, in a process of its own, because a concurrency backend is
chosen once per process:

* ``eventlet``: Nova's monkey patching, then a fork as oslo.service's
  eventlet backend makes it (``os.fork()``, then ``eventlet.hubs.use_hub()``
  in the child: ``oslo_service/backend/_eventlet/service.py``
  ``ProcessLauncher._child_process``);
* ``threading``: native threads, as ``nova/cmd/scheduler.py`` starts on
  Nova 34 (``monkey_patch.patch(backend='threading')``), and a worker made
  by ``multiprocessing``'s fork context, which cotyledon uses for
  oslo.service's threading backend
  (``oslo_service/backend/_threading/service.py``).

The view is started as Nova's filter loading starts it, and another
thread holds the snapshot's lock as the process forks; the fork hooks do
the rest. Prints one JSON line: what the parent and the worker saw.
"""
import os
import sys

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "threading"
os.environ["OS_NOVA_DISABLE_EVENTLET_PATCHING"] = (
    "false" if BACKEND == "eventlet" else "true")
# nova/monkey_patch.py: Nova 33 and later choose with patch(backend=...),
# Nova 32 with patch() and the variable alone; Nova 31 patches on import
# unless the variable disables it.
import inspect  # noqa: E402

from nova import monkey_patch  # noqa: E402

if hasattr(monkey_patch, "patch"):
    if "backend" in inspect.signature(monkey_patch.patch).parameters:
        monkey_patch.patch(backend=BACKEND)
    else:
        monkey_patch.patch()

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from oslo_config import cfg  # noqa: E402

from nova_drain_filters import conf as drain_conf  # noqa: E402
from nova_drain_filters import ironic_view  # noqa: E402
from nova_drain_filters.ironic_view import refresher as ironic_refresher  # noqa: E402,E501
from tests.unit import ironic_fakes  # noqa: E402

OURS = (ironic_refresher.REFRESH_THREAD, ironic_refresher.WATCHDOG_THREAD)


def wait_for(check: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def alive(view: ironic_view.IronicView) -> list[str]:
    """Names of the view's own threads that are alive and beating."""
    return sorted(t.name for t in (view.refresher._thread,
                                   view.refresher._watchdog)
                  if t is not None and t.is_alive())


class Die(BaseException):
    """Kills the refresher thread: no ``except Exception`` stops it."""


def in_worker(view: ironic_view.IronicView, parent: list[Any],
              client: ironic_fakes.FakeIronicClient) -> dict:
    """What a forked worker sees: its own threads and its own listing."""
    # The worker's first request (BaremetalAvailabilityFilter's call).
    view.wait_until_ready()
    listed = wait_for(lambda: view.refreshes >= 2)
    mine = [t for t in (view.refresher._thread, view.refresher._watchdog)
            if t is not None and t.is_alive()]
    # The watchdog restarts a refresher that died, here as in any process.
    restarted = False
    if listed:
        before = view.refreshes

        def die_once() -> None:
            client.hook = None
            raise Die()

        threading.excepthook = lambda args: None
        client.hook = die_once
        # A dead green thread may still say is_alive(): the watchdog then
        # goes by its heartbeat (ironic_refresher.STALE_BEAT).
        restarted = wait_for(lambda: view.refresher.restarts >= 1
                             and view.refreshes > before,
                             ironic_refresher.STALE_BEAT + 20)
    return {"listed": listed, "restarted": restarted,
            "threads": sorted(t.name for t in mine if t not in parent),
            "pid": view.refresher._pid == os.getpid(),
            "green": ironic_refresher.green_hub() is not None}


def main() -> int:
    drain_conf.register_opts(cfg.CONF)
    cfg.CONF([], project="nova")
    cfg.CONF.set_override("baremetal_refresh_interval", 1, "drain_filters")
    client = ironic_fakes.FakeIronicClient([ironic_fakes.ironic_node("n1")])
    view = ironic_view.IronicView(lambda: client)  # type: ignore
    ironic_view.set_view(view)
    view.start()
    report: dict[str, Any] = {"backend": BACKEND,
                              "first": wait_for(lambda: view.refreshes >= 1)}
    parent = [view.refresher._thread, view.refresher._watchdog]
    # Another thread holds the snapshot's lock as the process forks (a
    # listing or an event being applied): the worker's copy stays locked.
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with view.patches._event_lock:
            held.set()
            release.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    report["lock_held_at_fork"] = held.wait(5)
    read_end, write_end = os.pipe()
    if BACKEND == "eventlet":
        pid = os.fork()
        if pid == 0:
            import eventlet.hubs
            eventlet.hubs.use_hub()
            _report_and_exit(write_end, in_worker, view, parent, client)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
    else:
        import multiprocessing
        worker = multiprocessing.get_context("fork").Process(
            target=_report_and_exit, args=(write_end, in_worker, view, parent, client))
        worker.start()
        os.close(write_end)
        worker.join(30)
        status = worker.exitcode
    release.set()
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    report["worker"] = json.loads(text) if text else None
    report["worker_status"] = status
    refreshes = view.refreshes
    report["parent_parked"] = wait_for(lambda: not alive(view))
    # The parent serves no request; one that comes restarts its threads.
    report["parent_refreshes_while_parked"] = view.refreshes - refreshes
    view.ensure_running()
    report["parent_after_request"] = alive(view)
    report["eventlet_patched"] = _eventlet_patched()
    print(json.dumps(report, sort_keys=True))
    view.stop(timeout=5)
    return 0


def _report_and_exit(fd: int, work: Any, *args: Any) -> None:
    status = 1
    try:
        os.write(fd, json.dumps(work(*args)).encode())
        status = 0
    finally:
        os._exit(status)


def _eventlet_patched() -> bool:
    if "eventlet" not in sys.modules:
        return False
    import eventlet.patcher
    return bool(eventlet.patcher.is_monkey_patched("thread"))


if __name__ == "__main__":
    threading.current_thread().name = "fork-worker-main"
    sys.exit(main())
