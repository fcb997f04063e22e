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

"""``openstack drain orphan list`` against ``nova-manage placement audit``.

Each test builds a small cloud from a seed in Nova's harness (real API,
conductor, scheduler, computes on ``fake.MediumFakeDriverWithNestedCustomResources``,
whose nodes have a child provider offering ``CUSTOM_MAGIC``, and placement),
runs Nova's own audit (``PlacementCommands.audit(verbose=True)``,
``nova/cmd/manage.py``) and the real ``openstack`` shell on it, and checks:

* every orphan the audit reports is in our list;
* every row beyond the audit carries a reason the audit does not know (a
  resource class outside its list, or an instance on another node);
* our list is exactly the orphans the scenario made, and never an
  allocation of a live instance or of a migration in progress;
* ``orphan list --nova-config`` (Nova's side read from the cell databases,
  as the audit reads it) gives exactly the same rows as the API path;
* after ``orphan clear --yes`` (with ``--nova-config`` on odd seeds) every
  live allocation is byte-for-byte what it was, and a second run (ours and
  the audit) finds nothing.

``--nova-config`` names the harness's configuration, which this process
has loaded already; loading a real nova.conf is ``test_nova_db``'s part.

The seed is printed (a ``seed`` detail and every failure message) and
``NDF_AUDIT_SEEDS=7,42`` runs chosen seeds instead of :data:`SEEDS`.
"""
import dataclasses
import io
import json
import os
import random
import re
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

import fixtures
import testtools
from nova.cmd import manage
from nova.tests.functional.api import client
from testtools import content

from tests.functional import cli_harness

#: The resource classes the audit looks at (``nova/cmd/manage.py``
#: ``_check_orphaned_allocations_for_provider``, ``NOVA_RCS``).
AUDIT_CLASSES = frozenset({
    "VCPU", "MEMORY_MB", "DISK_GB", "VGPU", "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC", "PCPU", "MEM_ENCRYPTION_CONTEXT"})
MAGIC = "CUSTOM_MAGIC"
SEEDS = tuple(range(1, 21))
#: Migrate requests tried before a 500 from the harness's race fails.
MIGRATE_ATTEMPTS = 3
HOSTS = ("host1", "host2", "host3", "spare")
AUDIT_ROW = re.compile(r"Allocations for consumer UUID (\S+) on Resource "
                       r"Provider (\S+) can be deleted")
#: What --nova-config names here: the configuration the harness loaded.
HARNESS_CONF = "<nova harness>"
REMOVAL_FAILS = ("nova.scheduler.client.report.SchedulerReportClient."
                 "delete_allocation_for_instance")


@dataclasses.dataclass(frozen=True)
class CloudPlan:
    """What one seed's cloud holds; ``magic``: the flavor asks CUSTOM_MAGIC."""

    seed: int
    live: dict[str, tuple[bool, ...]]
    doomed: tuple[tuple[str, bool], ...]
    evacuate: bool | None
    migrate: bool | None
    delete_spare: bool | None

    def __str__(self) -> str:
        return (f"seed {self.seed}: live {self.live}, deleted while the "
                f"allocation removal fails {list(self.doomed)}, evacuation "
                f"{self.evacuate}, migration in progress {self.migrate}, "
                f"spare service deleted with an orphan {self.delete_spare} "
                "(True/False: with/without CUSTOM_MAGIC; None: not done)")


def plan_cloud(seed: int) -> CloudPlan:
    """A random cloud: live servers on every host, and a random mix of the
    ways allocations are orphaned or kept in flight."""
    rng = random.Random(seed)

    def maybe() -> bool | None:
        return rng.choice((True, False)) if rng.random() < 0.5 else None

    delete_spare = maybe()
    live = {h: (rng.random() < 0.5,)
            for h in HOSTS if h != "spare" or delete_spare is None}
    doomed = tuple((rng.choice(HOSTS[:3]), rng.random() < 0.5)
                   for _ in range(rng.randint(0, 2)))
    return CloudPlan(seed, live, doomed, maybe(), maybe(), delete_spare)


def _seeds() -> tuple[int, ...]:
    chosen = os.environ.get("NDF_AUDIT_SEEDS")
    return tuple(int(s) for s in chosen.split(",")) if chosen else SEEDS


class PlanCoverageTest(testtools.TestCase):
    def test_the_seeds_mix_in_every_ingredient(self) -> None:
        plans = [plan_cloud(seed) for seed in SEEDS]
        self.assertGreaterEqual(len(plans), 20)
        for name, count in (
                ("evacuation", sum(p.evacuate is not None for p in plans)),
                ("migration", sum(p.migrate is not None for p in plans)),
                ("deleted node", sum(p.delete_spare is not None
                                     for p in plans)),
                ("failed removal", sum(bool(p.doomed) for p in plans)),
                ("custom class orphan", sum(
                    any(m for _, m in p.doomed) or bool(p.evacuate)
                    or bool(p.delete_spare) for p in plans))):
            self.assertGreaterEqual(count, 4, name)
        self.assertEqual(plan_cloud(7), plan_cloud(7))


class OrphansVsAuditTest(cli_harness.CliTestBase):
    """One seed's cloud, our list and the audit side by side."""

    HOSTS = HOSTS
    COMPUTE_DRIVER = "fake.MediumFakeDriverWithNestedCustomResources"

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            "nova_drain_filters.clients.nova_db._loaded", HARNESS_CONF))
        self.plain = self._create_flavor(memory_mb=256, vcpu=1, disk=1,
                                         ephemeral=0)
        self.magic = self._create_flavor(memory_mb=256, vcpu=1, disk=1,
                                         ephemeral=0, extra_spec={
                                             f"resources:{MAGIC}": "1"})
        rps = self.placement.get("/resource_providers",
                                 version="1.14").body["resource_providers"]
        self.rp = {p["name"]: p["uuid"] for p in rps}

    # building ------------------------------------------------------------

    def boot(self, host: str, magic: bool) -> dict:
        """Boot on ``host``; a build that met the harness's oslo.db race is
        booted again (base.DrainTestBase.settle)."""
        body = self._build_server(
            flavor_id=self.magic if magic else self.plain,
            networks="none", host=host)
        return self.settle(lambda: self.admin_api.post_server(
            {"server": body}))

    def cold_migrate(self, server: dict, host: str) -> None:
        """Cold migrate ``server`` to ``host`` and wait for VERIFY_RESIZE.

        The same harness race as in :meth:`boot` now and then fails the
        migrate request itself with a 500 (oslo.db's READER to WRITER
        error in ``compute_api.resize``; seen on Nova 32 under load). The
        request is posted again only while Nova shows it left nothing: the
        server ACTIVE with no task and no migration record.
        """
        for attempt in range(MIGRATE_ATTEMPTS):
            try:
                self._migrate_server(server, host=host)
                return
            except client.OpenStackApiException as e:
                if e.response.status_code != 500 or (
                        attempt == MIGRATE_ATTEMPTS - 1):
                    raise
            now = self.admin_api.get_server(server["id"])
            untouched = (now["status"] == "ACTIVE"
                         and now["OS-EXT-STS:task_state"] is None)
            moves = self.admin_api.api_get(
                f"/os-migrations?instance_uuid={server['id']}"
            ).body["migrations"]
            if not untouched or moves:
                raise AssertionError(
                    f"migrate failed and left state behind: {now}, {moves}")

    def tree(self, host: str, magic: bool) -> set[str]:
        """The providers a server of that flavor on ``host`` allocates from."""
        return {self.rp[host]} | ({self.rp[f"{host}-child"]} if magic
                                  else set())

    def build(self, plan: CloudPlan) -> set[tuple[str, str]]:
        """Build the cloud; return the (consumer, provider) pairs orphaned."""
        orphaned: set[tuple[str, str]] = set()
        for host, flavors in plan.live.items():
            for magic in flavors:
                self.boot(host, magic)
        doomed = [(self.boot(h, m), h, m) for h, m in plan.doomed]
        spare = None
        if plan.delete_spare is not None:
            spare = self.boot("spare", plan.delete_spare)
            doomed.append((spare, "spare", plan.delete_spare))
        with fixtures.MockPatch(REMOVAL_FAILS, return_value=False):
            for server, host, magic in doomed:
                self._delete_server(server)
                self._wait_until_deleted(server)
                orphaned |= {(server["id"], rp) for rp in self.tree(host, magic)}
        if plan.migrate is not None:
            moving = self.boot("host1", plan.migrate)
            self.cold_migrate(moving, "host2")
        if plan.evacuate is not None:
            evacuee = self.boot("host3", plan.evacuate)
            self.computes["host3"].stop()
            self.admin_api.put_service_force_down(self.service_id("host3"),
                                                  True)
            self.admin_api.post_server_action(
                evacuee["id"], {"evacuate": {"host": "host1"}})
            self._wait_for_migration_status(evacuee, ["done"])
            self._wait_for_server_parameter(
                evacuee, {"OS-EXT-SRV-ATTR:host": "host1",
                          "OS-EXT-STS:task_state": None})
            orphaned |= {(evacuee["id"], rp)
                         for rp in self.tree("host3", plan.evacuate)}
        if spare is not None:
            # Nova deletes the records but not the providers, which still
            # hold the orphan (services.py delete swallows the 409).
            self.computes["spare"].stop()
            self.admin_api.api_delete(
                f"/os-services/{self.service_id('spare')}")
            hypervisors = self.admin_api.api_get(
                "/os-hypervisors/detail").body["hypervisors"]
            self.assertNotIn("spare", [h["hypervisor_hostname"]
                                       for h in hypervisors])
        return orphaned

    # facts ---------------------------------------------------------------

    def audit(self) -> tuple[int, set[tuple[str, str]], str]:
        out = io.StringIO()
        with redirect_stdout(out):
            rc = manage.PlacementCommands().audit(verbose=True)
        text = out.getvalue()
        return rc, set(AUDIT_ROW.findall(text)), text

    def consumers(self) -> dict[str, dict[str, Any]]:
        """Every consumer with allocations: its ``GET /allocations`` body."""
        found = set()
        rps = self.placement.get("/resource_providers",
                                 version="1.14").body["resource_providers"]
        for rp in rps:
            found |= set(self.placement.get(
                f"/resource_providers/{rp['uuid']}/allocations",
                version="1.0").body["allocations"])
        return {c: self.placement.get(f"/allocations/{c}",
                                      version="1.38").body
                for c in sorted(found)}

    def live_pairs(self) -> set[tuple[str, str]]:
        """(consumer, provider) pairs Nova stands behind: each server on its
        node's tree, and anything of a migration in progress."""
        rps = self.placement.get("/resource_providers",
                                 version="1.14").body["resource_providers"]
        hypervisors = self.admin_api.api_get(
            "/os-hypervisors/detail").body["hypervisors"]
        node_root = {h["hypervisor_hostname"]: h["id"] for h in hypervisors}
        servers = self.admin_api.get_servers()
        migrations = [m for m in self.admin_api.api_get(
            "/os-migrations").body["migrations"]
            if m["status"] not in ("done", "confirmed", "reverted", "error")]
        moving = {m["instance_uuid"] for m in migrations} | {
            m["uuid"] for m in migrations}
        pairs = set()
        for rp in rps:
            for server in servers:
                root = node_root.get(
                    server["OS-EXT-SRV-ATTR:hypervisor_hostname"])
                if rp["root_provider_uuid"] == root or server["id"] in moving:
                    pairs.add((server["id"], rp["uuid"]))
            pairs |= {(c, rp["uuid"]) for c in moving}
        return pairs

    # the test ------------------------------------------------------------

    def check_seed(self, seed: int) -> None:
        plan = plan_cloud(seed)
        print(f"orphans vs audit: {plan}")
        self.addDetail("seed", content.text_content(str(plan)))
        orphaned = self.build(plan)
        say = f"{plan}\n"

        rc, audited, text = self.audit()
        rows = self.cli_json("drain", "orphan", "list")
        ours = {(r["Consumer"], r["Resource Provider"]) for r in rows}
        say += f"audit rc {rc}:\n{text}\nours: {json.dumps(rows, indent=1)}"
        self.assertEqual(rows, self.cli_json(
            "drain", "orphan", "list", "--nova-config", HARNESS_CONF),
            "--nova-config differs from the API; " + say)

        self.assertEqual(set(), audited - ours, "audit orphans we miss; " + say)
        for row in rows:
            if (row["Consumer"], row["Resource Provider"]) in audited:
                continue
            classes = {kv.split("=")[0] for kv in row["Resources"].split(",")}
            self.assertTrue(
                not classes & AUDIT_CLASSES
                or row["Reason"].startswith("instance lives elsewhere"),
                f"extra row without a reason the audit lacks: {row}; " + say)
        self.assertEqual(set(), ours & self.live_pairs(),
                         "live allocations listed; " + say)
        self.assertEqual(orphaned, ours, "the scenario's orphans; " + say)
        self.assertEqual({p for p in orphaned if "-child" not in self.name_of(
            p[1])}, audited, "what the audit is known to find; " + say)
        self.assertEqual(3 if audited else 0, rc, say)

        before = self.consumers()
        # A 4-node cloud: the default disruption budget would allow one.
        from_db = ("--nova-config", HARNESS_CONF) if seed % 2 else ()
        done = self.cli("drain", "orphan", "clear", "--yes", "--max-fraction",
                        "1", "-f", "json", *from_db)
        self.assertEqual(0, done.rc, done.stderr + say)
        results = {r["Result"].split(",")[0] for r in json.loads(done.stdout)}
        self.assertLessEqual(results, {"deleted", "rewritten"}, done.stdout)
        self.assert_live_unchanged(before, self.consumers(), orphaned, say)

        self.assertEqual([], self.cli_json("drain", "orphan", "list"), say)
        rc, after, text = self.audit()
        self.assertEqual((0, set()), (rc, after), text + say)
        counts = (f"seed {seed}: audit {len(audited)}, ours {len(ours)} "
                  f"(+{len(ours - audited)} custom class), "
                  f"{len(before)} consumers checked after the clear")
        print(f"orphans vs audit: {counts}")
        self.addDetail("counts", content.text_content(counts))

    def name_of(self, rp: str) -> str:
        return {u: n for n, u in self.rp.items()}[rp]

    def assert_live_unchanged(self, before: dict[str, Any],
                              after: dict[str, Any],
                              orphaned: set[tuple[str, str]],
                              say: str) -> None:
        """Every live (consumer, provider) allocation byte-for-byte as it
        was; a consumer with no orphaned part not even rewritten."""
        touched = {c for c, _ in orphaned}
        for consumer, body in before.items():
            now = after.get(consumer, {"allocations": {}})
            for rp, alloc in body["allocations"].items():
                if (consumer, rp) in orphaned:
                    self.assertNotIn(rp, now["allocations"], say)
                    continue
                self.assertEqual(
                    _bytes(alloc["resources"]),
                    _bytes(now["allocations"].get(rp, {}).get("resources")),
                    f"{consumer} on {rp}; " + say)
            if consumer not in touched:
                keep = ("consumer_generation", "project_id", "user_id",
                        "consumer_type")
                self.assertEqual(_bytes({k: body.get(k) for k in keep}),
                                 _bytes({k: now.get(k) for k in keep}),
                                 f"{consumer} was written; " + say)


def _bytes(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _seed_test(seed: int) -> Callable[[OrphansVsAuditTest], None]:
    def test(self: OrphansVsAuditTest) -> None:
        self.check_seed(seed)
    test.__doc__ = f"The cloud of seed {seed}."
    return test


class OddSeedsTest(OrphansVsAuditTest):
    """Half of the seeds: stestr runs a class on one worker."""


class EvenSeedsTest(OrphansVsAuditTest):
    """The other half."""


for _i, _seed in enumerate(_seeds()):
    setattr(EvenSeedsTest if _i % 2 else OddSeedsTest,
            f"test_seed_{_seed:03d}", _seed_test(_seed))
