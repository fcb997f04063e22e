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

"""nova_db against real, file-backed Nova databases: delete_compute_node,
and NovaRecords (Nova's side of ``orphan list --nova-config``).

``nova.config.parse_args`` changes the process-wide oslo.config CONF, so the
code under test always runs in a child Python, never in this process. The
databases (API, cell0, cell1 on sqlite) are made by the real nova-manage, as
on a controller; the duplicate compute node records (one Ironic node under
two hosts, as a rebalance leaves them) are made through Nova's objects.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from contextlib import closing
from typing import Any

import testtools

from tests.functional.services.placement_server import PlacementServerFixture

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
TIMEOUT = 120

# argv: nova.conf, then host:hypervisor_hostname:uuid for each record to make.
CREATE = """
import sys
from nova import config, context, objects
config.parse_args(["test"], default_config_files=[sys.argv[1]])
objects.register_all()
ctxt = context.get_admin_context()
cell, = [c for c in objects.CellMappingList.get_all(ctxt) if c.name == "cell1"]
with context.target_cell(ctxt, cell) as cctxt:
    for spec in sys.argv[2:]:
        host, node, uuid = spec.split(":")
        objects.ComputeNode(
            cctxt, host=host, hypervisor_hostname=node, uuid=uuid, vcpus=1,
            memory_mb=512, local_gb=10, vcpus_used=0, memory_mb_used=0,
            local_gb_used=0, hypervisor_type="ironic", hypervisor_version=1,
            cpu_info="{}").create()
"""

# argv: nova.conf, then the uuids to delete, all in this one process (as
# 'stale clear --all' does); one JSON line per call.
DELETE = """
import json, sys
from nova_drain_filters.clients import nova_db
for uuid in sys.argv[2:]:
    try:
        print(json.dumps(["ok", nova_db.delete_compute_node(uuid, sys.argv[1])]))
    except nova_db.Unavailable as exc:
        print(json.dumps(["unavailable", str(exc)]))
"""

# argv: nova.conf, host, node: a service and a node on it in cell1, and
# instances and migrations in every state NovaRecords must tell apart; one
# JSON line {name: uuid}.
RECORDS = """
import json, sys, uuid
from nova import config, context, objects
config.parse_args(["test"], default_config_files=[sys.argv[1]])
objects.register_all()
conf, host, node = sys.argv[1:]
ctxt = context.get_admin_context()
cells = {c.name: c for c in objects.CellMappingList.get_all(ctxt)}
made = {}
def instance(cctxt, name, **fields):
    if "node" in fields:
        fields["compute_id"] = made["node-id"]
    inst = objects.Instance(cctxt, uuid=str(uuid.uuid4()), project_id="p-" + name,
                            user_id="u", **fields)
    inst.create()
    made[name] = inst.uuid
    return inst
with context.target_cell(ctxt, cells["cell1"]) as cctxt:
    objects.Service(cctxt, host=host, binary="nova-compute",
                    topic="compute").create()
    cn = objects.ComputeNode(
        cctxt, host=host, hypervisor_hostname=node, uuid=str(uuid.uuid4()),
        vcpus=1, memory_mb=512, local_gb=10, vcpus_used=0, memory_mb_used=0,
        local_gb_used=0, hypervisor_type="ironic", hypervisor_version=1,
        cpu_info="{}")
    cn.create()
    made["node"], made["node-id"] = cn.uuid, cn.id
    instance(cctxt, "active", host=host, node=node, vm_state="active")
    instance(cctxt, "resizing", host=host, node=node, vm_state="active",
             task_state="resize_migrating")
    instance(cctxt, "deleted", host=host, node=node,
             vm_state="deleted").destroy()
    instance(cctxt, "hidden", host=host, node=node, vm_state="active",
             hidden=True)
    for status in ("running", "confirmed"):
        mig = objects.Migration(
            cctxt, instance_uuid=made["resizing"], source_compute=host,
            dest_compute=host, source_node=node, dest_node=node,
            dest_compute_id=made["node-id"], status=status,
            migration_type="resize")
        mig.create()
        made["migration-" + status] = mig.uuid
with context.target_cell(ctxt, cells["cell0"]) as cctxt:
    instance(cctxt, "never-built", vm_state="error")
print(json.dumps(made))
"""

# argv: nova.conf, then UUIDs; NovaRecords' three lists and the deleted
# projects of the UUIDs as one JSON line, or the one-line error.
READ = """
import dataclasses, json, sys
from nova_drain_filters.clients import nova_db
try:
    records = nova_db.NovaRecords(sys.argv[1])
    lists = ("hypervisors", "servers", "migrations_in_progress")
    found = {what: [dataclasses.asdict(x) for x in getattr(records, what)()]
             for what in lists}
    found["deleted_projects"] = records.deleted_projects(sys.argv[2:])
    print(json.dumps(found))
except nova_db.Unavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
"""


def _env() -> dict[str, str]:
    # OS_* would reach oslo.config (OS_<GROUP>__<OPT>) and the openstack CLI.
    return {k: v for k, v in os.environ.items() if not k.startswith("OS_")}


def _run(argv: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    """Run argv to completion (or kill it at TIMEOUT); raise on failure."""
    try:
        proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{argv[:4]} timed out after {TIMEOUT}s\n"
                             f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")
    if proc.returncode != 0:
        raise AssertionError(f"{argv[:4]} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


class NovaDbTest(testtools.TestCase):
    tmp: str
    conf: str

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="ndf-nova-db-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.conf = os.path.join(cls.tmp, "nova.conf")
        db = {name: f"sqlite:///{cls.tmp}/{name}.db"
              for name in ("api", "cell0", "cell1")}
        with open(cls.conf, "w") as f:
            f.write(f"[DEFAULT]\ntransport_url = fake:/\n"
                    f"[api_database]\nconnection = {db['api']}\n"
                    f"[database]\nconnection = {db['cell1']}\n")
        manage = [os.path.join(BIN, "nova-manage"), "--config-file", cls.conf]
        for args in (["api_db", "sync"],
                     ["cell_v2", "map_cell0", "--database_connection", db["cell0"]],
                     ["db", "sync"],
                     ["cell_v2", "create_cell", "--name", "cell1",
                      "--database_connection", db["cell1"],
                      "--transport-url", "fake:/"]):
            _run(manage + args, cls.tmp)

    def make_nodes(self, *hosts: str) -> tuple[str, list[str]]:
        """One hypervisor_hostname under each of hosts; return it, uuids."""
        node = f"ironic-{uuid.uuid4()}"
        uuids = [str(uuid.uuid4()) for _ in hosts]
        _run([sys.executable, "-c", CREATE, self.conf]
             + [f"{h}:{node}:{u}" for h, u in zip(hosts, uuids, strict=True)],
             self.tmp)
        return node, uuids

    def live(self, node: str) -> list[tuple[str, str]]:
        """(host, uuid) of the undeleted records of node, read with sqlite3."""
        with closing(sqlite3.connect(os.path.join(self.tmp, "cell1.db"))) as db:
            rows = db.execute(
                "SELECT host, uuid FROM compute_nodes WHERE deleted = 0 "
                "AND hypervisor_hostname = ? ORDER BY host", (node,)).fetchall()
        return [(host, uid) for host, uid in rows]

    def delete(self, config: str, *uuids: str) -> tuple[list[list[str]], str]:
        """Call delete_compute_node in one child; return results, stderr."""
        proc = _run([sys.executable, "-c", DELETE, config, *uuids], REPO)
        results = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual(len(uuids), len(results), proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)
        return results, proc.stderr

    def test_deletes_only_the_duplicate(self) -> None:
        node, (old, new) = self.make_nodes("old-host", "new-host")
        self.assertEqual([("new-host", new), ("old-host", old)], self.live(node))
        results, _ = self.delete(self.conf, old)
        self.assertEqual([["ok", f"old-host/{node}"]], results)
        self.assertEqual([("new-host", new)], self.live(node))

    def test_unknown_uuid_is_in_no_cell(self) -> None:
        node, (kept,) = self.make_nodes("some-host")
        missing = str(uuid.uuid4())
        results, _ = self.delete(self.conf, missing)
        self.assertEqual(
            [["unavailable", f"compute node {missing} is in no cell"]], results)
        self.assertEqual([("some-host", kept)], self.live(node))

    def test_missing_config_names_the_path(self) -> None:
        path = os.path.join(self.tmp, "no-such", "nova.conf")
        results, _ = self.delete(path, str(uuid.uuid4()))
        (kind, message), = results
        self.assertEqual("unavailable", kind)
        self.assertTrue(message.startswith(f"cannot load {path}: "), message)
        self.assertNotIn("\n", message)

    def test_two_deletions_in_one_process(self) -> None:
        # 'stale clear --all --nova-config' with two duplicates calls
        # delete_compute_node twice in one process; the second call runs
        # nova.config.parse_args again, which oslo.config refuses
        # ("arguments already parsed: cannot register CLI option").
        node_a, (old_a, new_a) = self.make_nodes("old-a", "new-a")
        node_b, (old_b, new_b) = self.make_nodes("old-b", "new-b")
        results, _ = self.delete(self.conf, old_a, old_b)
        self.assertEqual(["ok", f"old-a/{node_a}"], results[0])
        self.assertEqual([("new-a", new_a)], self.live(node_a))
        self.assertEqual([["ok", f"old-b/{node_b}"], [("new-b", new_b)]],
            [results[1], self.live(node_b)])

    def test_config_without_api_database(self) -> None:
        # A compute host's nova.conf has no [api_database]: Nova's objects
        # cannot be used, which should be Unavailable, not CantStartEngineError.
        conf = os.path.join(self.tmp, "compute-nova.conf")
        with open(conf, "w") as f:
            f.write("[DEFAULT]\ntransport_url = fake:/\n")
        argv = [sys.executable, "-c", DELETE, conf, str(uuid.uuid4())]
        proc = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
        kinds = [json.loads(line)[0] for line in proc.stdout.splitlines()]
        self.assertEqual((0, ["unavailable"]), (proc.returncode, kinds))

    def read_records(self, config: str, *uuids: str) -> dict[str, Any]:
        proc = _run([sys.executable, "-c", READ, config, *uuids], REPO)
        self.assertNotIn("Traceback", proc.stderr)
        result: dict[str, Any] = json.loads(proc.stdout)
        return result

    def test_records_as_the_api_would_show_them(self) -> None:
        host = f"host-{uuid.uuid4()}"
        node = f"ironic-{uuid.uuid4()}"
        made = json.loads(_run([sys.executable, "-c", RECORDS, self.conf,
                                host, node], self.tmp).stdout)
        read = self.read_records(self.conf, made["deleted"], made["active"],
                                 str(uuid.uuid4()))
        servers = {s["uuid"]: s for s in read["servers"]}
        self.assertEqual(
            {"uuid": made["active"], "status": "ACTIVE", "host": host,
             "node": node, "project_id": "p-active"}, servers[made["active"]])
        # The status the API shows (status_from_state): a resize in flight.
        self.assertEqual("RESIZE", servers[made["resizing"]]["status"])
        # cell0 is read too: an instance that never built has no node.
        self.assertEqual((None, "ERROR"), (servers[made["never-built"]]["node"],
                                           servers[made["never-built"]]["status"]))
        # Deleted instances and the hidden copy of a cross-cell resize are
        # not listed, as GET /servers/detail does not list them.
        self.assertNotIn(made["deleted"], servers)
        self.assertNotIn(made["hidden"], servers)
        # Only a deleted instance's row gives its project.
        self.assertEqual({made["deleted"]: "p-deleted"},
                         read["deleted_projects"])
        migrations = {m["uuid"]: m for m in read["migrations_in_progress"]}
        self.assertIn(made["migration-running"], migrations)
        self.assertNotIn(made["migration-confirmed"], migrations)
        self.assertEqual((made["resizing"], node), (
            migrations[made["migration-running"]]["instance_uuid"],
            migrations[made["migration-running"]]["source_node"]))
        nodes = {h["uuid"]: h for h in read["hypervisors"]}
        self.assertEqual((host, node, "enabled"), (
            nodes[made["node"]]["host"],
            nodes[made["node"]]["hypervisor_hostname"],
            nodes[made["node"]]["status"]))
        self.assertIsNotNone(nodes[made["node"]]["service_id"])

    def test_records_from_an_unreadable_cell_are_an_error(self) -> None:
        # A cell whose database cannot be read must not look empty: its
        # instances would all look gone, their allocations orphaned.
        broken = os.path.join(self.tmp, "broken")
        shutil.copytree(self.tmp, broken,
                        ignore=shutil.ignore_patterns("broken", "*.log"))
        os.remove(os.path.join(broken, "cell1.db"))
        os.mkdir(os.path.join(broken, "cell1.db"))  # sqlite cannot open it
        conf = os.path.join(broken, "nova.conf")
        with closing(sqlite3.connect(os.path.join(broken, "api.db"))) as db:
            db.execute("UPDATE cell_mappings SET database_connection = "
                       "replace(database_connection, ?, ?)",
                       (self.tmp + "/", broken + "/"))
            db.commit()
        with open(conf, "w") as f:
            f.write(open(self.conf).read().replace(self.tmp + "/",
                                                   broken + "/"))
        read = self.read_records(conf)
        self.assertEqual(["unavailable"], list(read), read)
        self.assertIn("cannot read cell", read["unavailable"])
        self.assertNotIn("\n", read["unavailable"])

    def test_cli_refuses_a_nova_view_without_the_compute_nodes(self) -> None:
        # As an operator runs it: a real placement, the real openstack CLI
        # in its own process, its first request right after the start, and
        # nova.conf naming databases that hold none of placement's compute
        # nodes (another cloud's, say). Every allocation would look
        # orphaned; the command must refuse instead, then judge once the
        # records are there.
        placement = self.useFixture(PlacementServerFixture()).client
        nodes = {}
        for i in range(3):
            rp = placement.create_resource_provider(f"view-node{i}")
            placement.request("PUT", f"/resource_providers/{rp['uuid']}/"
                              "inventories", {
                                  "resource_provider_generation": 0,
                                  "inventories": {"VCPU": {"total": 8}}})
            placement.set_provider_traits(rp["uuid"], ["COMPUTE_NODE"])
            placement.request("PUT", f"/allocations/{uuid.uuid4()}", {
                "allocations": {rp["uuid"]: {"resources": {"VCPU": 1}}},
                "consumer_generation": None, "project_id": "p",
                "user_id": "u", "consumer_type": "INSTANCE"}, (204,))
            nodes[rp["uuid"]] = rp["name"]
        cli = [os.path.join(BIN, "openstack"), "--os-auth-type", "admin_token",
               "--os-token", "admin", "--os-endpoint", placement.url,
               "drain", "orphan", "list", "--nova-config", self.conf,
               "-f", "value", "-c", "Node"]
        proc = subprocess.run(cli, cwd=self.tmp, env=_env(), capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
        self.assertEqual(1, proc.returncode, proc.stdout + proc.stderr)
        self.assertEqual("", proc.stdout)
        # One line; its wording depends on whether other tests' records
        # are in these databases already (none: "lists no compute node
        # record"; some: "lacks 3 of the 3").
        (line,) = proc.stderr.strip().splitlines()[-1:]
        self.assertTrue(line.startswith("refusing to judge any allocation: "),
                        proc.stderr)
        self.assertIn("3 compute node providers", line)
        self.assertTrue(line.endswith(
            "--nova-config may name another cloud's nova.conf, or a cell may "
            "not be mapped") or "raise --max-missing-fraction" in line, line)
        self.assertNotIn("Traceback", proc.stderr)
        _run([sys.executable, "-c", CREATE, self.conf]
             + [f"view-host:{name}:{rp}" for rp, name in nodes.items()],
             self.tmp)
        proc = _run(cli, self.tmp)
        self.assertEqual(sorted(nodes.values()), sorted(proc.stdout.split()))

    def test_cli_help_mentions_nova_config(self) -> None:
        proc = _run([os.path.join(BIN, "openstack"), "drain", "stale", "clear",
                     "--help"], self.tmp)
        self.assertIn("--nova-config", proc.stdout)
