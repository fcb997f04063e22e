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

"""The fork server itself, run by another venv's Python as a script.

``python forkserver_main.py MODULE FUNCTION`` imports MODULE once, then
reads one JSON request a line on stdin and answers one JSON line on stdout:

* ``{"spawn": [argv...], "cwd": DIR, "log": FILE}``: fork; the child starts
  a session of its own (its PID is its process group), sends stdout and
  stderr to FILE, sets ``sys.argv`` and exits with ``FUNCTION()``'s
  result. Answers ``{"pid": PID}``.
* ``{"status": PID}``: ``{"exited": CODE}`` once the child has exited
  (reaped here, at once, so no zombie outlives it), else ``{"exited": null}``.

It exits when stdin closes. It imports nothing of this project, only the
Python standard library and MODULE, and must not start a thread before it
forks (it checks).
"""

import importlib
import json
import os
import signal
import sys
import threading

EXITED: dict[int, int] = {}


def _reap(*_: object) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        EXITED[pid] = os.waitstatus_to_exitcode(status)


def _child(entry: object, argv: list[str], cwd: str, log: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.setsid()
        os.chdir(cwd)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.argv = list(argv)
        code = entry()  # type: ignore[operator]
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def main() -> int:
    module, function = sys.argv[1], sys.argv[2]
    entry = getattr(importlib.import_module(module), function)
    if threading.active_count() != 1:
        print(json.dumps({"error": f"importing {module} started a thread"}),
              flush=True)
        return 1
    signal.signal(signal.SIGCHLD, _reap)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "spawn" in request:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(entry, request["spawn"], request["cwd"], request["log"])
            answer: dict[str, object] = {"pid": pid}
        else:
            _reap()
            answer = {"exited": EXITED.get(int(request["status"]))}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
