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

"""Standard modules as Python ships them, even in a patched test process.

Importing Nova's test modules monkey-patches the unit test process with
eventlet (``nova/monkey_patch.py``). A child forked from it shares the
parent's hub and its epoll set: a green ``os.write`` there can spin for
ever and keep the test runner's output open. A test that forks uses these
in the child, and to wait for it.
"""
import importlib
import sys
from types import ModuleType


def module(name: str) -> ModuleType:
    """``name`` unpatched: eventlet's copy of the original if eventlet
    patched this process, else the module itself."""
    patcher = sys.modules.get("eventlet.patcher")
    if patcher is not None and patcher.is_monkey_patched(name):
        return patcher.original(name)  # type: ignore[no-any-return]
    return importlib.import_module(name)
