"""A misbehaving HTTP peer on loopback: what a sick Ironic or a proxy sends.

It answers every request the way ``mode`` says: ``500`` (an HTML error page
as a proxy sends it), ``slow`` (answers after ``delay`` seconds, past the
client's timeout), ``garbage`` (200 with a body that is not JSON),
``badjson`` (200 JSON of the wrong shape) or ``loop`` (a full page whose
``next`` link never advances). Served from a thread; stopped by the fixture.
"""
import json
import threading
import time
from http import server
from typing import Any

import fixtures

MODES = ("500", "slow", "garbage", "badjson", "loop")


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
        self.server.hits += 1  # type: ignore[attr-defined]
        if self.mode == "500":
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


class BrokenServerFixture(fixtures.Fixture):
    """Serve ``mode`` on 127.0.0.1; ``.url`` and ``.hits`` for the test."""

    def __init__(self, mode: str, delay: float = 5.0) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        self.delay = delay

    def _setUp(self) -> None:
        handler = type("Handler", (_Handler,),
                       {"mode": self.mode, "delay": self.delay})
        self.httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.hits = 0  # type: ignore[attr-defined]
        self.httpd.daemon_threads = True
        thread = threading.Thread(target=self.httpd.serve_forever,
                                  kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)
        host, port = self.httpd.server_address[:2]
        self.url = f"http://{host}:{port}"

    @property
    def hits(self) -> int:
        return int(self.httpd.hits)  # type: ignore[attr-defined]
