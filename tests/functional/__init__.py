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

# Eventlet must be patched before anything imports oslo.db or
# oslo.context: nova.context (imported by our base.py) pulls in oslo.db's
# enginefacade, whose per-thread transaction state then stays a native
# thread-local shared by every greenthread. Under load two greenthreads
# using one RequestContext then fail with "Can't upgrade a READER
# transaction to a WRITER mid-transaction" (seen on Nova 31's instance
# claims, and on Nova 32's server deletes). Nova patches at different
# places: Nova 31 when nova/monkey_patch.py is imported, Nova 33 and 34
# in nova/tests/functional/__init__.py, Nova 32 only in nova/test.py, which
# nova.tests.functional.integrated_helpers imports after oslo.db. So here
# the patch is made first on every release, as nova/cmd/__init__.py does
# for a real service; ``patch`` honours OS_NOVA_DISABLE_EVENTLET_PATCHING
# and is a no-op the second time. The demo and the benchmarks
# (tests/functional/demo, bench), run as ``python -m tests.functional...``,
# get it from here too.
#
# Patching logs a deprecation warning (nova/monkey_patch.py patch) before
# anything configures logging, and Python's last-resort handler prints it
# on stderr: on the demo's screen, say. A NullHandler on the root logger
# keeps it off; Nova's fixtures capture logging inside each test anyway.
import logging

logging.getLogger().addHandler(logging.NullHandler())
import nova.tests.functional  # noqa: E402, F401

# isort: off
from importlib import metadata  # noqa: E402
from nova import monkey_patch  # noqa: E402
# isort: on

if hasattr(monkey_patch, "patch"):  # Nova 31 has none: it patched above.
    monkey_patch.patch()

# Nova 33's harness gets Nova 34's changes for native threads
# (tests/functional/nova33_harness.py), on threads only. The test is cheap
# so that the services this package runs as processes (services/) do not
# load Nova's fixtures for nothing.

if metadata.version("nova").startswith("33.") and not monkey_patch.is_patched():
    from tests.functional import nova33_harness

    nova33_harness.install()
