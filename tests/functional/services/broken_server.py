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

"""A misbehaving HTTP peer on loopback: what a sick Ironic or a proxy sends.

It answers every request the way ``mode`` says: ``500`` (an HTML error page
as a proxy sends it), ``slow`` (answers after ``delay`` seconds, past the
client's timeout), ``garbage`` (200 with a body that is not JSON),
``badjson`` (200 JSON of the wrong shape) or ``loop`` (a full page whose
``next`` link never advances). In the last two modes the version document
(``GET /``) is a sound one, so a client gets past its microversion check to
the node list that misbehaves. It runs as its own process (threads would
turn green under Nova's eventlet patching in the same test worker), is
waited for with a bound, and is stopped by its PID.
"""
import json
import os
import socket
import sys
import tempfile
import time
from http import server
from pathlib import Path
from typing import Any

import fixtures

from tests.functional.services import process

MODES = ("500", "slow", "garbage", "badjson", "loop")

#: What Ironic's root answers (ironic/api/controllers/root.py), cut down.
VERSION_DOCUMENT = {"default_version": {
    "id": "v1", "status": "CURRENT", "min_version": "1.1", "version": "1.99",
}}


class _Handler(server.BaseHTTPRequestHandler):
    mode = "500"
    delay = 5.0

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with open(os.environ["NDF_HITS_FILE"], "a") as hits:
            hits.write("x")
        if self.path == "/" and self.mode in ("badjson", "loop"):
            self._send(200, json.dumps(VERSION_DOCUMENT).encode(),
                       "application/json")
        elif self.mode == "500":
            self._send(500, b"<html><body><h1>500 Internal Server Error"
                            b"</h1>upstream failed</body></html>", "text/html")
        elif self.mode == "slow":
            time.sleep(self.delay)
            self._send(200, b'{"nodes": []}', "application/json")
        elif self.mode == "garbage":
            self._send(200, b"\x00\xffnot json at all", "application/json")
        elif self.mode == "badjson":
            self._send(200, b'{"nodes": [{"name": "no uuid"}]}',
                       "application/json")
        else:  # loop
            node = {"uuid": "11111111-2222-3333-4444-555555555555",
                    "provision_state": "available"}
            body = {"nodes": [node], "next": "http://x/v1/nodes?marker=same"}
            self._send(200, json.dumps(body).encode(), "application/json")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class BrokenServerFixture(fixtures.Fixture):
    """Serve ``mode`` on 127.0.0.1; ``.url`` and ``.hits`` for the test."""

    def __init__(self, mode: str, delay: float = 5.0) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        self.delay = delay

    def _setUp(self) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="ndf-broken-"))
        self.addCleanup(process.remove_service_dir, workdir)
        self.hits_file = workdir / "hits"
        self.hits_file.touch()
        port = process.free_port()
        env = process.child_env({"NDF_HITS_FILE": str(self.hits_file)})
        self.process = process.ServiceProcess(
            "broken", [sys.executable, "-m", __name__, self.mode,
                       str(self.delay), str(port)],
            workdir / "broken.log", env=env, cwd=Path.cwd())
        self.process.start()
        self.addCleanup(self.process.stop)
        self.process.wait_ready(lambda: _accepts(port), timeout=30)
        self.url = f"http://127.0.0.1:{port}"

    @property
    def hits(self) -> int:
        return len(self.hits_file.read_text())


def serve(mode: str, delay: float, port: int) -> None:
    """Serve ``mode`` on 127.0.0.1:port until killed."""
    handler = type("Handler", (_Handler,), {"mode": mode, "delay": delay})
    httpd = server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    httpd.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
