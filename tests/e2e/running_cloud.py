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

"""The cloud the tier runs on: started (or reused), read, and stopped.

:meth:`RunningCloud.start` reuses a cloud that already runs in this
checkout (``tools/cloud.sh status`` exits 0) and leaves it running at the
end; otherwise it runs ``tools/cloud.sh up`` with a bound, and
:meth:`RunningCloud.stop` runs ``tools/cloud.sh down``, which stops every
process by the PID recorded in ``cloud.json``
(``tests/functional/cloud/state.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.functional.cloud import identity
from tests.functional.cloud import memory
from tests.functional.cloud.configs import Layout
from tests.functional.cloud.state import CloudState
from tests.functional.cloud.state import cloud_dir
from tests.functional.services.process import REPO_ROOT

CLOUD_SH = REPO_ROOT / "tools" / "cloud.sh"
#: ``up`` from nothing, .venv-cloud included: 979 s measured under load
#: (doc/source/cloud.rst); the bound leaves room for a slower machine.
UP_TIMEOUT = float(os.environ.get("NDF_E2E_UP_TIMEOUT", "2400"))
DOWN_TIMEOUT = 180.0
CLI_TIMEOUT = 300.0
OPENSTACK = REPO_ROOT / ".venv" / "bin" / "openstack"


def _cloud_sh(*args: str, timeout: float, log: Path) -> int:
    """Run ``tools/cloud.sh ARGS`` in its own process group, output to
    ``log``; on timeout kill that group and raise."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(CLOUD_SH), *args], cwd=REPO_ROOT,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"tools/cloud.sh {' '.join(args)} did not end "
                               f"in {timeout:.0f} s; see {log}") from None


class RunningCloud:
    """The cloud of this checkout's state directory, as the tier uses it."""

    def __init__(self) -> None:
        self.base = cloud_dir()
        self.base.mkdir(parents=True, exist_ok=True)
        self.log = self.base / "e2e.log"
        self.started_here = False
        self.began = time.monotonic()
        self.state = CloudState()

    def note(self, message: str) -> None:
        """One line in ``.cloud/e2e.log``: the tier's timings and steps."""
        with open(self.log, "a") as out:
            out.write(f"{time.monotonic() - self.began:7.1f} s  {message}\n")

    def reload(self) -> None:
        """Read ``cloud.json`` again: a test (or a COMMAND of a rolling
        run) that restarts a service through ``tools/cloud.sh`` gives it
        a new PID there, and the one read at the start is stale."""
        self.state = CloudState.load(self.base)

    def memory_usage(self) -> memory.Usage:
        """Every recorded process that runs, with its children."""
        self.reload()
        return memory.usage(p.pid for p in self.state.procs.values()
                            if p.alive())

    def note_memory(self, when: str) -> None:
        self.note(f"memory {when}: {self.memory_usage().text()}")

    def start(self) -> None:
        status = _cloud_sh("status", timeout=60, log=self.log)
        if status == 0:
            self.note("reusing the cloud that runs in this checkout")
        else:
            # 1 (some processes run) is someone's cloud, half up: `up`
            # starts the rest, and it is left running like a whole one.
            self.started_here = status == 3
            self.note("tools/cloud.sh up")
            rc = _cloud_sh("up", timeout=UP_TIMEOUT, log=self.log)
            if rc != 0:
                raise RuntimeError(f"tools/cloud.sh up exited {rc}; see "
                                   f"{self.log} and {self.base}/logs")
            self.note("up")
        self.state = CloudState.load(self.base)
        self.layout = Layout(self.base, self.state.ports)

    def up_again(self) -> float:
        """``tools/cloud.sh up`` on this cloud: it starts what does not run
        (a process whose recorded PID is gone). Returns the seconds taken."""
        t0 = time.monotonic()
        rc = _cloud_sh("up", timeout=UP_TIMEOUT, log=self.log)
        if rc != 0:
            raise RuntimeError(f"tools/cloud.sh up exited {rc}; see "
                               f"{self.log} and {self.base}/logs")
        self.reload()
        return time.monotonic() - t0

    def stop(self) -> None:
        if self.started_here:
            self.note("tools/cloud.sh down")
            _cloud_sh("down", timeout=DOWN_TIMEOUT, log=self.log)
            self.note("down")

    def connect(self, cloud: str = identity.DEFAULT_CLOUD) -> Any:
        """openstacksdk as one of clouds.yaml's entries (a real token)."""
        return identity.connect(self.layout, cloud)

    def openstack(self, cloud: str, *args: str,
                  timeout: float = CLI_TIMEOUT
                  ) -> subprocess.CompletedProcess[str]:
        """``openstack --os-cloud CLOUD ARGS`` with the cloud's clouds.yaml,
        as an operator runs it."""
        return subprocess.run([str(OPENSTACK), "--os-cloud", cloud, *args],
                              env=self._cli_env(), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout)

    def openstack_started(self, cloud: str, *args: str, out: Path,
                          err: Path) -> subprocess.Popen[bytes]:
        """The same command, started and not waited for (a test kills it):
        a session of its own, its output in ``out`` and ``err``."""
        with open(out, "ab") as stdout, open(err, "ab") as stderr:
            return subprocess.Popen(
                [str(OPENSTACK), "--os-cloud", cloud, *args],
                env=self._cli_env(), stdin=subprocess.DEVNULL,
                stdout=stdout, stderr=stderr, start_new_session=True)

    def _cli_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["OS_CLIENT_CONFIG_FILE"] = str(self.state.facts["clouds_yaml"])
        return env

    def nova_manage(self, *args: str) -> str:
        """``nova-manage`` of .venv-cloud with the cloud's nova.conf."""
        conf = self.base / "etc" / "nova" / "nova.conf"
        result = subprocess.run(
            [str(REPO_ROOT / ".venv-cloud" / "bin" / "nova-manage"),
             "--config-file", str(conf), *args], capture_output=True,
            text=True, stdin=subprocess.DEVNULL, timeout=CLI_TIMEOUT,
            env={k: v for k, v in os.environ.items()
                 if not k.startswith("OS_")})
        if result.returncode != 0:
            raise RuntimeError(f"nova-manage {' '.join(args)}: "
                               f"{result.stderr.strip()[-500:]}")
        return result.stdout

    def stop_process(self, name: str) -> None:
        """``tools/cloud.sh stop NAME``: SIGTERM by its recorded PID (what
        an operator's service manager sends), SIGKILL after a grace."""
        self.reload()
        rc = _cloud_sh("stop", name, timeout=60, log=self.log)
        if rc != 0:
            raise RuntimeError(f"tools/cloud.sh stop {name} exited {rc}; "
                               f"see {self.log}")
        if self.state.procs[name].alive():  # the PID cloud.sh stopped
            raise RuntimeError(f"{name} still runs after cloud.sh stop")

    def kill(self, name: str) -> None:
        """SIGKILL one process of the cloud (its group), by the PID
        ``cloud.json`` records now (read at use: it may have restarted)."""
        self.reload()
        proc = self.state.procs[name]
        if not proc.signal(signal.SIGKILL):
            raise RuntimeError(f"{name} (PID {proc.pid}) does not run")
        deadline = time.monotonic() + 30
        while proc.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
