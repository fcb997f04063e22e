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

"""Nova 34's native-threads changes to Nova's test harness, on Nova 33.

Nova 33's nova-scheduler starts on native threads
(``nova/cmd/scheduler.py``), but its functional harness was written for
eventlet; Nova 34 changed its harness so that it runs on threads too.
:func:`install` makes the same changes to Nova 33's harness, in the test
process only, and does nothing on another release or on eventlet. Each
part names the Nova 34 change it mirrors:

1. The fake notifier's sender check. Nova 33's
   ``FakeVersionedNotifier._get_sender_test_case_id``
   (``nova/tests/fixtures/notifications.py``) walks
   ``eventlet.getcurrent()``'s parents, which on a native thread ends in
   ``None.parent``: every notification sent from a service thread fails.
   Nova 34's ``_notify`` skips the check on threads.
2. Databases in files. Nova 33 keeps each database in memory, one SQLite
   connection (oslo.db's ``StaticPool`` for ``sqlite://``,
   ``oslo_db/sqlalchemy/engines.py``) shared by the API, conductor,
   scheduler and compute threads, whose transactions then interleave on it
   ("cannot start a transaction within a transaction"). Nova 34
   (``nova/tests/fixtures/nova.py`` ``_use_file_backed_sqlite_with_wal``,
   used by ``Database.setUp`` and ``CellDatabases.add_cell_database`` on
   threads) puts each in a temporary file in WAL mode, where oslo.db opens
   a connection per session (``NullPool``) and readers do not wait.
3. One writer at a time per database: Nova 34's ``DatabaseWriteLock``
   fixture, installed by both fixtures on threads, because SQLite takes a
   single writer per file.
4. A quicker idle thread: Nova 34's ``nova/test.py`` ``TestCase.setUp``
   sets futurist's ``ThreadWorker.MAX_IDLE_FOR`` to 0.01 s (futurist bug
   2160159), so an executor's shutdown does not wait a second per worker.

oslo.db (``enginefacade``, ``engines``) is the same code in both releases'
constraints; the changes are Nova's harness only. Nothing here touches the
product, and nothing is done on eventlet, which Nova 33's harness runs as
it is.
"""
import collections
import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import fixtures
from futurist import _thread as futurist_thread
from nova import utils
from nova.db import migration
from nova.db.api import api as api_db_api
from nova.db.main import api as main_db_api
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import notifications
from oslo_db.sqlalchemy import enginefacade

RELEASE = 33


def needed() -> bool:
    """Whether this is Nova 33's harness on native threads."""
    major = int(metadata.version("nova").split(".")[0])
    return major == RELEASE and utils.concurrency_mode_threading()


def wal_sqlite(directory: str, name: str) -> str:
    """A new SQLite file in WAL mode under ``directory``; its URL."""
    fd, path = tempfile.mkstemp(
        prefix=name.replace("/", "_").replace(":", "_") + "-",
        suffix=".sqlite", dir=directory)
    os.close(fd)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    return f"sqlite:///{path}"


class WriterLock(fixtures.Fixture):
    """One writer transaction at a time per database, across threads.

    Mirrors Nova 34's ``DatabaseWriteLock`` (nova/tests/fixtures/nova.py):
    oslo.db's ``_TransactionContextManager._transaction_scope`` takes a
    re-entrant lock per database URL around every writer transaction (a
    thread may nest writers on one database); readers and writers of other
    databases (cell0, cell1, the API database) go on in parallel.
    """

    def _setUp(self) -> None:
        guard = threading.Lock()
        locks: dict[Any, threading.RLock] = collections.defaultdict(
            threading.RLock)
        manager = enginefacade._TransactionContextManager
        original = manager._transaction_scope

        @contextlib.contextmanager
        def scope(tcm: Any, context: Any) -> Iterator[Any]:
            if tcm._mode is not enginefacade._WRITER:
                with original(tcm, context) as resource:
                    yield resource
                return
            with guard:
                lock = locks[tcm.reader.get_engine().url]
            with lock, original(tcm, context) as resource:
                yield resource

        self.useFixture(fixtures.MonkeyPatch(
            "oslo_db.sqlalchemy.enginefacade._TransactionContextManager."
            "_transaction_scope", scope))


class _WalDirectory:
    """The temporary directory of a fixture's WAL files, removed with it."""

    _directory: str | None = None

    def cleanup(self) -> None:
        super().cleanup()  # type: ignore[misc]
        if self._directory:
            shutil.rmtree(self._directory, ignore_errors=True)


class Database(_WalDirectory, nova_fixtures.Database):
    """Nova 33's ``Database`` fixture, in a WAL file on threads.

    Nova 34's ``Database.setUp`` configures the new engine facade from
    CONF, then points it at a file (``_bind_database_fixture_to_file_wal_
    sqlite``); here Nova 33's own setUp runs with its module's
    ``configure`` doing the same. A fixture given its own connection keeps
    it, as in Nova 34.
    """

    def setUp(self) -> None:
        if self.connection is not None:
            super().setUp()
            return
        self._directory = tempfile.mkdtemp(prefix="nova33-db-")
        url = wal_sqlite(self._directory, self.database)
        module = main_db_api if self.database == "main" else api_db_api
        real_configure = module.configure

        def configure(conf: Any) -> None:
            real_configure(conf)
            module.context_manager.configure(connection=url)

        with fixtures.MonkeyPatch(f"{module.__name__}.configure", configure):
            super().setUp()
        self.useFixture(WriterLock())


class CellDatabases(_WalDirectory, nova_fixtures.CellDatabases):
    """Nova 33's ``CellDatabases``, each cell in a WAL file on threads.

    Mirrors Nova 34's ``CellDatabases.add_cell_database``, which gives each
    cell a file on threads, and its ``setUp``, which adds the writer lock.
    Nova 33's ``add_cell_database`` replays the cached schema into every
    cell, the first one too, after migrating it (harmless in memory, where
    ``engine.dispose()`` drops the migrated database; a file keeps it, so
    the replay would meet its tables). Nova 34 replays into the later cells
    only; here the schema is cached from a scratch in-memory database
    instead, and Nova 33's replay then fills every cell's file alike.
    """

    #: Nova's create_context_manager, which add_cell_database replaces for
    #: the length of its call (and so of _cache_schema's).
    _create = staticmethod(main_db_api.create_context_manager)

    def add_cell_database(self, connection_str: str,
                          default: bool = False) -> None:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="nova33-cells-")
        url = wal_sqlite(self._directory, connection_str)

        def create_context_manager(connection: Any = None) -> Any:
            return self._create(connection=url)

        with fixtures.MonkeyPatch(
                "nova.db.main.api.create_context_manager",
                create_context_manager):
            super().add_cell_database(connection_str, default)

    def _cache_schema(self, connection_str: str) -> None:
        schemas = nova_fixtures.DB_SCHEMA
        if schemas[("main", None)]:
            return
        scratch = self._create(connection="sqlite://")
        engine = scratch.writer.get_engine()
        conn = engine.connect()
        with fixtures.MonkeyPatch("nova.db.main.api.get_context_manager",
                                  lambda context: scratch):
            migration.db_sync(database="main")
        schemas[("main", None)] = "".join(conn.connection.iterdump())
        engine.dispose()

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(WriterLock())


def own_test_case_id(notifier: Any) -> Any:
    """The sender check's answer that always passes, as Nova 34's
    ``FakeVersionedNotifier._notify`` skips the check on threads."""
    return notifier.test_case_id


def install() -> None:
    """Make Nova 33's harness run on native threads; else do nothing."""
    if not needed():
        return
    # nova/test.py TestCase.setUp and _setup_cells build these through the
    # nova.tests.fixtures package, so the package's names are the ones
    # replaced.
    nova_fixtures.Database = Database
    nova_fixtures.CellDatabases = CellDatabases
    notifications.FakeVersionedNotifier._get_sender_test_case_id = (
        own_test_case_id)
    futurist_thread.ThreadWorker.MAX_IDLE_FOR = 0.01
