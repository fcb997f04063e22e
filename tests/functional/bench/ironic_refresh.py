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

"""How many requests and how long one Ironic view refresh takes, on a real Ironic.

Starts an all-in-one Ironic on loopback (``tests.functional.services.
ironic_server.IronicServer``, fake hardware, SQLite), enrolls ``--nodes``
nodes, then for each page size times ``IronicView.refresh()`` (which is
``IronicClient.list_nodes(page_size)``; median of ``--repeat`` refreshes,
interleaved across page sizes) and counts its requests. For
comparison it times the naive way, one ``GET /v1/nodes/{uuid}`` per node, on
a sample and extrapolates it to every node. The server is stopped by its PID
at the end, also on an error or Ctrl-C.

Run from the repository root::

    tools/bench.sh ironic_refresh --nodes 2000

This prints figures; it asserts nothing about time. It exits 1 if a refresh
failed or returned the wrong number of nodes.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import signal
import statistics
import sys
import threading
import time
import types
from types import FrameType
from typing import Any
from typing import NoReturn

import requests
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters import ironic_view
from nova_drain_filters.clients import http
from nova_drain_filters.clients import ironic
from tests.functional.services import ironic_client as ironic_test_client
from tests.functional.services import ironic_server
from tests.functional.services import process

CONF = cfg.CONF
#: Run outside Nova's harness, on native threads as nova-scheduler runs (Nova
#: 34's nova/cmd/scheduler.py patches with backend='threading'): tools/bench.sh
#: sets OS_NOVA_DISABLE_EVENTLET_PATCHING=true for a module that says this, so
#: that importing tests.functional does not monkey-patch eventlet.
EVENTLET = False

#: Ironic's ``[api] max_limit`` default; the test server does not change it.
IRONIC_MAX_LIMIT = 1000
#: The ``limit`` asked for once to see what Ironic caps it to.
PROBE_LIMIT = 5000
#: Per-request timeout (keystoneauth and the enrolment client), seconds.
REQUEST_TIMEOUT = 30.0
#: Retries of one node creation on a 5xx or a connection error (SQLite may
#: be busy under concurrent writes).
CREATE_RETRIES = 3


def load_ironic_server() -> Any:
    """The test Ironic server, its test client and the process errors."""
    return types.SimpleNamespace(
        IronicServer=ironic_server.IronicServer,
        IronicTestClient=ironic_test_client.IronicTestClient,
        ServiceAPIError=process.ServiceAPIError,
        ServiceStartError=process.ServiceStartError)


def ironic_client(url: str) -> ironic.IronicClient:
    """Our real client, as the scheduler builds it, without auth or proxies."""
    no_proxy = requests.Session()
    no_proxy.trust_env = False
    session = ks_session.Session(session=no_proxy, timeout=REQUEST_TIMEOUT)
    return ironic.IronicClient(ks_adapter.Adapter(
        session, endpoint_override=url, service_type="baremetal"))


# enrolment -----------------------------------------------------------------


def _create_chunk(
    srv: Any, url: str, names: list[str], deadline: float,
    out: list[str], errors: list[str], lock: threading.Lock,
) -> None:
    client: ironic_test_client.IronicTestClient = srv.IronicTestClient(
        url, timeout=REQUEST_TIMEOUT)
    try:
        for name in names:
            if errors:
                return
            for attempt in range(CREATE_RETRIES + 1):
                if time.monotonic() > deadline:
                    with lock:
                        errors.append("enrolment deadline passed")
                    return
                try:
                    uuid = client.create_node(name=name)["uuid"]
                    break
                except (srv.ServiceAPIError, requests.RequestException) as exc:
                    status = getattr(exc, "status", 500)
                    if status < 500 or attempt == CREATE_RETRIES:
                        with lock:
                            errors.append(f"{name}: {exc}")
                        return
                    time.sleep(0.2 * (attempt + 1))
            with lock:
                out.append(uuid)
    finally:
        client.close()


def enroll(
    srv: Any, url: str, count: int, workers: int, timeout: float
) -> list[str]:
    """Create ``count`` fake-hardware nodes on ``workers`` threads (bounded)."""
    names = [f"bench-{i:06d}" for i in range(count)]
    chunks = [names[i::workers] for i in range(workers)]
    deadline = time.monotonic() + timeout
    out: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    threads = [
        threading.Thread(target=_create_chunk, daemon=True,
                         args=(srv, url, chunk, deadline, out, errors, lock))
        for chunk in chunks if chunk
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        # Each request is bounded by REQUEST_TIMEOUT and each worker checks
        # the deadline between requests.
        thread.join(max(0.0, deadline - time.monotonic()) + REQUEST_TIMEOUT * 2)
    if any(t.is_alive() for t in threads):
        errors.append(f"enrolment did not finish in {timeout:.0f} s")
    if errors:
        raise RuntimeError(f"enrolment failed ({len(errors)} errors), first: "
                           f"{errors[0]}")
    return out


# measurements --------------------------------------------------------------


@dataclasses.dataclass
class Paged:
    page_size: int
    requests: int
    nodes: int
    #: One per refresh measured.
    runs: list[float]

    @property
    def seconds(self) -> float:
        return statistics.median(self.runs)


@dataclasses.dataclass
class Naive:
    sample: int
    seconds: float

    @property
    def per_node(self) -> float:
        return self.seconds / self.sample


def expected_requests(nodes: int, page_size: int, max_limit: int) -> int:
    """Ironic links ``next`` only after a full page, so an exact multiple of
    the page costs one extra, empty page."""
    return nodes // min(page_size, max_limit) + 1


def measure_refresh(client: ironic.IronicClient, page_size: int) -> Paged:
    """One ``IronicView.refresh()`` with ``baremetal_page_size`` = page_size."""
    CONF.set_override("baremetal_page_size", page_size, group="drain_filters")
    view = ironic_view.IronicView(client_factory=lambda: client)
    before = client.requests
    started = time.perf_counter()
    ok = view.refresh()
    seconds = time.perf_counter() - started
    snap = view.trusted()
    if not ok or snap is None:
        raise RuntimeError(f"refresh with page size {page_size} failed: "
                           f"{view.last_error}")
    if snap.requests != client.requests - before:
        raise RuntimeError("snapshot and client disagree on the request count")
    return Paged(page_size, snap.requests, len(snap.nodes), [seconds])


def measure_refreshes(
    client: ironic.IronicClient, page_sizes: list[int], repeat: int
) -> list[Paged]:
    """``repeat`` rounds over the page sizes, interleaved so that a slow
    moment of the machine does not land on one page size only."""
    results: dict[int, Paged] = {}
    for _round in range(repeat):
        for size in page_sizes:
            run = measure_refresh(client, size)
            if size not in results:
                results[size] = run
                continue
            if (run.requests, run.nodes) != (results[size].requests,
                                              results[size].nodes):
                raise RuntimeError(f"page size {size}: refreshes disagree")
            results[size].runs += run.runs
    return [results[size] for size in page_sizes]


def measure_naive(client: ironic.IronicClient, uuids: list[str]) -> Naive:
    """One ``GET /v1/nodes/{uuid}`` (same fields) per sampled node."""
    fields = ",".join(ironic.NODE_FIELDS)
    started = time.perf_counter()
    for uuid in uuids:
        client.get(f"/v1/nodes/{uuid}?fields={fields}",
                   microversion=ironic.IRONIC_VERSION)
    return Naive(len(uuids), time.perf_counter() - started)


def page_length(client: ironic.IronicClient, limit: int) -> int:
    """How many nodes Ironic puts in one page when asked for ``limit``."""
    body = client.get(f"/v1/nodes?fields=uuid&limit={limit}",
                      microversion=ironic.IRONIC_VERSION)
    return len(body["nodes"])


# report --------------------------------------------------------------------


def spread(paged: list[Paged]) -> str:
    return ", ".join(f"{p.page_size}: {min(p.runs):.3f}-{max(p.runs):.3f} s"
                     for p in paged)


def report(nodes: int, paged: list[Paged], naive: Naive, max_page: int) -> None:
    # A page shorter than both the limit asked and the node count was cut by
    # Ironic's max_limit; otherwise the cap is not visible with this many
    # nodes and Ironic's default is assumed.
    cap = max_page if max_page < min(PROBE_LIMIT, nodes) else IRONIC_MAX_LIMIT
    naive_total = naive.per_node * nodes
    print()
    if max_page < min(PROBE_LIMIT, nodes):
        print(f"Ironic [api] max_limit: asked for {PROBE_LIMIT} nodes per page, "
              f"got {max_page}")
    else:
        print(f"Ironic [api] max_limit: not visible with {nodes} nodes "
              f"(a page of {PROBE_LIMIT} held all {max_page}); assuming "
              f"{IRONIC_MAX_LIMIT}")
    print()
    header = (f"{'page_size':>9}  {'effective':>9}  {'requests':>8}  "
              f"{'expected':>8}  {'req/node':>8}  {'nodes':>6}  "
              f"{'seconds':>8}  {'naive/paged':>11}")
    print(header)
    print("-" * len(header))
    for p in paged:
        print(f"{p.page_size:>9}  {min(p.page_size, cap):>9}  "
              f"{p.requests:>8}  {expected_requests(nodes, p.page_size, cap):>8}  "
              f"{p.requests / nodes:>8.4f}  {p.nodes:>6}  {p.seconds:>8.3f}  "
              f"{naive_total / p.seconds:>10.1f}x")
    print(f"{'naive':>9}  {'-':>9}  {nodes:>8}  {nodes:>8}  {1:>8.4f}  "
          f"{nodes:>6}  {naive_total:>8.3f}  {'1.0x':>11}")
    print()
    print(f"requests and nodes: per refresh; seconds: median of "
          f"{len(paged[0].runs)} refreshes (range {spread(paged)})")
    print(f"naive: one GET /v1/nodes/{{uuid}} per node; {naive.sample} sampled, "
          f"{naive.per_node * 1000:.2f} ms each (mean of a run before and one "
          f"after the refreshes), extrapolated to {nodes} nodes")
    print("expected = nodes // min(page_size, max_limit) + 1: Ironic links a "
          "'next' page after every full page, so an exact multiple costs one "
          "empty page more")
    over = [p for p in paged if p.page_size > cap]
    at_cap = [p for p in paged if p.page_size == cap]
    if over and at_cap and max_page == cap:
        print(f"page size {over[0].page_size}: {over[0].requests} requests, "
              f"the same as {at_cap[0].page_size} ({at_cap[0].requests}): "
              f"max_limit caps the page")


# main ----------------------------------------------------------------------


def _terminate(signum: int, _frame: FrameType | None) -> NoReturn:
    raise SystemExit(128 + signum)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2000,
                        help="nodes to enroll (default 2000)")
    parser.add_argument("--page-sizes", default="100,1000,5000",
                        help="comma-separated page sizes (default "
                             "100,1000,5000; 5000 shows the max_limit cap)")
    parser.add_argument("--sample", type=int, default=200,
                        help="nodes fetched one by one for the naive figure")
    parser.add_argument("--repeat", type=int, default=3,
                        help="refreshes measured per page size; the table "
                             "shows the median (default 3)")
    parser.add_argument("--workers", type=int, default=4,
                        help="threads enrolling nodes (1-16, default 4)")
    parser.add_argument("--enroll-timeout", type=float, default=900.0,
                        help="seconds allowed for enrolment (default 900)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.page_sizes.split(",") if s]
        args.page_sizes = list(dict.fromkeys(sizes))
    except ValueError:
        parser.error("--page-sizes takes integers, e.g. 100,1000")
    if args.nodes < 1 or not args.page_sizes or min(args.page_sizes) < 1:
        parser.error("--nodes and every page size must be at least 1")
    if not 1 <= args.repeat <= 20:
        parser.error("--repeat must be between 1 and 20")
    if not 1 <= args.workers <= 16:
        parser.error("--workers must be between 1 and 16")
    args.sample = max(1, min(args.sample, args.nodes))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    drain_conf.register_opts(CONF)
    srv = load_ironic_server()
    server = srv.IronicServer(ready_timeout=90.0)
    try:
        server.start()
        print(f"Ironic at {server.url}, pid {server.pid}, started in "
              f"{server.startup_seconds:.1f} s", flush=True)
        started = time.monotonic()
        uuids = enroll(srv, server.url, args.nodes, args.workers,
                       args.enroll_timeout)
        print(f"enrolled {len(uuids)} nodes in {time.monotonic() - started:.1f}"
              f" s on {args.workers} threads", flush=True)

        client = ironic_client(server.url)
        client.get("/v1/nodes?limit=1&fields=uuid",  # connect, warm caches
                   microversion=ironic.IRONIC_VERSION)
        print(f"warm-up: {client.requests} requests (the client's one "
              f"microversion check, then one node)", flush=True)
        max_page = page_length(client, PROBE_LIMIT)
        sample = random.Random(42).sample(uuids, args.sample)
        naive = measure_naive(client, sample)
        paged = measure_refreshes(client, args.page_sizes, args.repeat)
        # Naive again after the paged runs: the ratio uses the mean of both.
        again = measure_naive(client, sample)
        naive = Naive(args.sample, statistics.mean([naive.seconds, again.seconds]))
        report(args.nodes, paged, naive, max_page)
        wrong = [p for p in paged if p.nodes != args.nodes]
        for p in wrong:
            print(f"ERROR: page size {p.page_size} returned {p.nodes} nodes, "
                  f"not {args.nodes}", file=sys.stderr)
        return 1 if wrong else 0
    except (RuntimeError, http.ApiError, srv.ServiceStartError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    finally:
        pid = server.pid
        server.stop()
        if pid is not None:
            print(f"Ironic (pid {pid}) stopped", flush=True)
        CONF.clear_override("baremetal_page_size", group="drain_filters")


if __name__ == "__main__":
    sys.exit(main())
