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

"""CPU time per migration of ``drain host migrate``'s bench, by part.

``tools/bench.sh drain_migrate --profile`` runs yappi with its CPU clock
and its greenlet backend (the harness's services are eventlet greenthreads
in one process, so wall clocks there count the other helpers' load and
every other greenthread). The command runs in the test's own greenlet and
the Nova API and placement answer its requests in that greenlet too
(wsgi-intercept), so "our command" is the shell's CPU minus the API's
answers to it. Every probe is inclusive CPU (yappi's ``ttot``) summed over
all greenlets, divided by the servers moved; probes overlap (the
scheduler's filters are inside the scheduler). A profiling tool, not a
product instrument: it slows the run, so its wall figures are not used.
"""
import time
from typing import Any

#: (file path suffix, yappi function name) -> what it is.
PROBES = (
    ("tests/functional/cli_harness.py",
     "run_cli",
     "our command + its API answers (shell)"),
    ("wsgi_intercept/__init__.py",
     "wsgi_fake_socket.makefile",
     "API/placement answers, all callers"),
    ("nova/conductor/manager.py",
     "ComputeTaskManager._live_migrate",
     "conductor live migrate (incl. scheduler call wait)"),
    ("nova/scheduler/manager.py",
     "SchedulerManager.select_destinations",
     "scheduler select_destinations"),
    ("nova/filters.py",
     "BaseFilterHandler.get_filtered_objects",
     "scheduler filters"),
    ("nova/compute/manager.py",
     "ComputeManager.check_can_live_migrate_destination",
     "compute check_can_live_migrate_destination"),
    ("nova/compute/manager.py",
     "ComputeManager.check_can_live_migrate_source",
     "compute check_can_live_migrate_source"),
    ("nova/compute/manager.py",
     "ComputeManager.pre_live_migration",
     "compute pre_live_migration (dest)"),
    ("nova/compute/manager.py",
     "ComputeManager._do_live_migration",
     "compute _do_live_migration (source, incl. hold)"),
    ("tests/functional/migration_fakes.py",
     "HeldLiveMigrationDriver.live_migration",
     "fake driver live_migration (hold + post)"),
    ("nova/compute/manager.py",
     "ComputeManager._post_live_migration",
     "compute _post_live_migration (source)"),
    ("nova/compute/manager.py",
     "ComputeManager.post_live_migration_at_destination",
     "compute post_live_migration_at_destination"),
    ("oslo_service/periodic_task.py",
     "PeriodicTasks.run_periodic_tasks",
     "computes' periodic tasks"),
    ("oslo_messaging/_drivers/impl_fake.py",
     "FakeListener.poll",
     "fake RPC listeners' 50 ms poll loops"),
    ("logging/__init__.py",
     "Logger._log",
     "logging (records made, all levels)"),
    ("logging/__init__.py", "Handler.format", "logging: formatting records"),
    ("nova/tests/fixtures/nova.py",
     "NullHandler.handle",
     "StandardLogging's DEBUG NullHandler (formats)"),
    ("nova/tests/fixtures/notifications.py",
     "FakeNotifier._notify",
     "fake legacy notifier"),
    ("nova/tests/fixtures/notifications.py",
     "FakeVersionedNotifier._notify",
     "fake versioned notifier"),
    ("nova/rpc.py",
     "LegacyValidatingNotifier._notify",
     "legacy notifications validated"),
    ("sqlalchemy/engine/base.py",
     "Connection._execute_context",
     "SQL statements (all)"),
)


class Profile:
    """Start/stop yappi around one run; ``figures`` per server."""

    def __init__(self) -> None:
        import yappi
        self.yappi = yappi
        yappi.set_clock_type("cpu")
        yappi.set_context_backend("greenlet")

    def start(self) -> None:
        self.yappi.clear_stats()
        self.cpu = time.process_time()
        self.yappi.start(builtins=False, profile_threads=True)

    def stop(self, servers: int) -> dict[str, Any]:
        self.yappi.stop()
        cpu = time.process_time() - self.cpu
        stats = self.yappi.get_func_stats()
        found: dict[str, float] = {}
        for path, name, label in PROBES:
            found[label] = sum(s.ttot for s in stats
                               if s.name == name and s.module.endswith(path))
        # The shell's greenlet (the test's): its answers are ours.
        shell = answers = 0.0
        for ctx in {s.ctx_id for s in stats if s.name == "run_cli"}:
            main = self.yappi.get_func_stats(filter={"ctx_id": ctx})
            shell += sum(s.ttot for s in main if s.name == "run_cli")
            answers += sum(s.ttot for s in main
                           if s.name == "wsgi_fake_socket.makefile")
        top = sorted(stats, key=lambda s: s.tsub, reverse=True)[:25]
        return {
            "servers": servers, "process_cpu": cpu,
            "command_own": shell - answers, "command_api": answers,
            "probes": found,
            "top": [(s.tsub, s.ncall,
                     s.module.rsplit("site-packages/", 1)[-1] + ":" + s.name)
                    for s in top]}


def report(profiles: list[dict[str, Any]]) -> None:
    """CPU seconds per server moved, for each run profiled."""
    for p in profiles:
        n = p["servers"]
        print(f"profile, T {p['seconds']:g} s, concurrency "
              f"{p['concurrency']}: CPU seconds per server moved")
        print(f"  {p['process_cpu'] / n:8.3f}  the whole process "
              "(harness + command)")
        print(f"  {p['command_own'] / n:8.3f}  our command's own code "
              "(shell, osc, runner, HTTP client)")
        print(f"  {p['command_api'] / n:8.3f}  Nova API / placement "
              "answering our command")
        for label, value in p["probes"].items():
            print(f"  {value / n:8.3f}  {label}")
        print("  top functions by own CPU (s per server, calls per server):")
        for tsub, ncall, name in p["top"]:
            print(f"  {tsub / n:8.4f} {ncall / n:9.1f}  {name}")
