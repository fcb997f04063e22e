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

"""The test process runs on the concurrency backend its pass asked for.

``tools/run-tests.sh`` runs the scheduler-side tests twice on a release
whose nova-scheduler defaults to native threads: once as Nova's harness
starts by default (eventlet), once with
``OS_NOVA_DISABLE_EVENTLET_PATCHING=true``. Nova's functional package makes
the choice when imported (``nova/tests/functional/__init__.py`` or, on Nova
32, ``nova/test.py``, which ``integrated_helpers`` loads, as every
functional test does here), and ``tests/functional/__init__.py`` imports
it before any module of this package. This test fails if the second pass ran
on eventlet after all, or the first on native threads, or if Nova 33's
harness ran on threads without Nova 34's changes to it
(``tests/functional/nova33_harness.py``) or with them anywhere else.
"""
import os
import sys
import threading
from importlib import metadata

import testtools
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers  # noqa: F401
from oslo_service import backend

from nova_drain_filters.ironic_view import refresher as ironic_refresher
from tests.functional import nova33_harness


def native_requested() -> bool:
    flag = os.environ.get("OS_NOVA_DISABLE_EVENTLET_PATCHING", "")
    return flag.lower() in ("1", "true", "yes")


class ConcurrencyModeTest(testtools.TestCase):
    def test_backend_is_the_one_asked_for(self) -> None:
        patcher = sys.modules.get("eventlet.patcher")
        patched = patcher is not None and bool(
            patcher.is_monkey_patched("thread"))  # type: ignore[attr-defined]
        native = native_requested()
        self.assertEqual(not native, patched)
        get_backend_type = getattr(backend, "get_backend_type", None)
        if get_backend_type is None:
            # The oslo.service of Nova 31's constraints has no backend
            # choice yet: eventlet is all it runs on.
            self.assertFalse(native)
            return
        expected = (backend.BackendType.THREADING if native
                    else backend.BackendType.EVENTLET)
        self.assertEqual(expected, get_backend_type())

    def test_our_threads_are_what_the_backend_makes(self) -> None:
        seen: list[int] = []
        worker = threading.Thread(
            target=lambda: seen.append(threading.get_native_id()))
        worker.start()
        worker.join(10)
        same_os_thread = seen == [threading.get_native_id()]
        # Green threads all run on the process's one OS thread.
        self.assertEqual(not native_requested(), same_os_thread)
        self.assertEqual(native_requested(),
                         ironic_refresher.green_hub() is None)

    def test_nova33_harness_changes_only_on_nova33_threads(self) -> None:
        nova33_threads = (metadata.version("nova").startswith("33.")
                          and native_requested())
        self.assertEqual(nova33_threads, nova33_harness.needed())
        self.assertEqual(
            nova33_threads,
            nova_fixtures.CellDatabases is nova33_harness.CellDatabases)
        self.assertEqual(
            nova33_threads,
            nova_fixtures.Database is nova33_harness.Database)

    def test_request_state_is_per_greenthread_under_eventlet(self) -> None:
        # oslo.db keeps a RequestContext's open transaction in a thread-local
        # made when enginefacade is imported (_TransactionContextTLocal), and
        # oslo.context its current context in one (_request_store). Imported
        # before eventlet patches, both stay native: every greenthread of
        # the harness shares them, and two using one context fail with
        # "Can't upgrade a READER transaction to a WRITER" (Nova 32, where
        # only nova/test.py patches; tests/functional/__init__.py).
        from oslo_context import context as oslo_context
        from oslo_db.sqlalchemy import enginefacade

        patcher = sys.modules.get("eventlet.patcher")
        if native_requested() or patcher is None:
            green: tuple[type, ...] = ()
        else:
            from eventlet import corolocal
            green = (corolocal.local,)
        for what, local in (
                ("oslo.db's transaction state",
                 enginefacade._TransactionContextTLocal),
                ("oslo.context's request store",
                 type(oslo_context._request_store))):
            self.assertEqual(
                bool(green), issubclass(local, green), f"{what}: {local.__mro__}")
