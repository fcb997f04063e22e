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

"""A private MariaDB server: Debian's ``mariadb-server``, our datadir.

``mariadb-install-db`` makes the data directory once; ``mariadbd`` runs
with ``--no-defaults`` (no system ``my.cnf`` leaks in) on a loopback port
and a socket of its own. Root logs in without a password from loopback,
as the cloud's services do: nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.functional.services.process import ServiceProcess
from tests.functional.services.process import ServiceStartError
from tests.functional.services.process import child_env

DATABASES = ("keystone", "placement", "glance", "nova_api", "nova",
             "nova_cell0", "ironic")
INSTALL_HINT = ("install Debian's mariadb-server package (apt-get install "
                "mariadb-server, as root; tools/cloud.sh does it when it can)")


def _user_args() -> list[str]:
    return ["--user=root"] if os.geteuid() == 0 else []


def _server_args(base: Path, port: int) -> list[str]:
    return ["--no-defaults", f"--datadir={base / 'data'}",
            f"--socket={base / 'mysql.sock'}", f"--port={port}",
            "--bind-address=127.0.0.1", f"--pid-file={base / 'mariadb.pid'}",
            "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
            "--max-connections=500", "--performance-schema=OFF",
            # A throw-away cloud: no fsync per commit, no doublewrite, one
            # tablespace. The schemas (hundreds of CREATE TABLE) load
            # several times faster; a crash may lose the last second.
            "--innodb-flush-log-at-trx-commit=0", "--skip-innodb-doublewrite",
            "--skip-innodb-file-per-table", "--sync-binlog=0",
            *_user_args()]


def start(base: Path, port: int, timeout: float = 60.0) -> ServiceProcess:
    """Initialise the datadir if needed, start mariadbd, wait until it
    answers, and create the databases."""
    server = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    if not Path(server).exists() or shutil.which("mariadb-install-db") is None:
        raise ServiceStartError(f"mariadbd not found; {INSTALL_HINT}")
    base.mkdir(parents=True, exist_ok=True)
    log = base / "mariadb.log"
    if not (base / "data" / "mysql").exists():
        result = subprocess.run(
            ["mariadb-install-db", "--no-defaults",
             f"--datadir={base / 'data'}", "--auth-root-authentication-method=normal",
             "--skip-test-db", *_user_args()],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=child_env(), timeout=timeout)
        if result.returncode != 0:
            raise ServiceStartError(
                "mariadb-install-db failed:\n"
                + result.stdout.decode("utf-8", "replace")[-4000:])
    process = ServiceProcess("mariadb", [server, *_server_args(base, port)],
                             log, env=child_env(), cwd=base)
    process.start()
    process.wait_ready(lambda: sql(base, "SELECT 1", check=False) == 0,
                       timeout, interval=0.3)
    create_databases(base)
    return process


def create_databases(base: Path) -> None:
    """Create every database that is missing (idempotent)."""
    sql(base, "".join(f"CREATE DATABASE IF NOT EXISTS {name} "
                      "CHARACTER SET utf8mb3; " for name in DATABASES))


def sql(base: Path, statement: str, check: bool = True) -> int:
    """Run SQL as root through the private socket; return the exit code."""
    result = subprocess.run(
        ["mariadb", "--no-defaults", f"--socket={base / 'mysql.sock'}",
         "-uroot", "-e", statement],
        stdin=subprocess.DEVNULL, capture_output=True, env=child_env(),
        timeout=30)
    if check and result.returncode != 0:
        raise ServiceStartError(f"mariadb: {statement[:80]}: "
                                f"{result.stderr.decode()[-2000:]}")
    return result.returncode
