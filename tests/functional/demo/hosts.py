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

"""Acts 1 and 2: six computes with drain problems, and boots through Nova's
real scheduler and placement with the drain filters and the pre-filter on.

Nova's API, conductor, scheduler and placement run in-process (functional
harness, fake virt driver).
"""
from __future__ import annotations

import dataclasses
import logging
import re
import time
import urllib.parse
from typing import Any

import fixtures
from nova import objects

from nova_drain_filters import decisions
from nova_drain_filters import fixtures as ndf_fixtures
from nova_drain_filters import traits
from tests.functional import base

from .screen import ActMixin

HOSTS = ("rack7-01", "rack7-02", "rack7-03", "rack8-01", "rack8-02", "rack8-03")
DRAIN_REASON = "drain: rack 7 power work"
BM_NODE, BM_OWNER, DUP_HOST = "bm-0042", "rack8-03", "rack7-03"
#: (host, node) -> what must keep it away from every boot.
MUST_EXCLUDE = {("rack7-01", "rack7-01"): "DisabledServiceFilter",
                ("rack7-02", "rack7-02"): "DisabledServiceFilter",
                (DUP_HOST, BM_NODE): "StaleComputeNodeFilter",
                ("rack8-01", "rack8-01"): "pre-filter"}
SUMMARY = re.compile(r"nova-drain-filters: request for instance (\S+): "
                     r"(\d+) hosts in, (\d+) left: (.*)$")
COUNTS = re.compile(r"(\w+Filter) rejected (\d+)")
# Per-host DEBUG line of nova_drain_filters.filters.base; the summary line
# has counts and reasons but no host names.
REJECTED = re.compile(r"^\((?P<host>[^,]+), (?P<node>[^)]+)\) .*? rejected by "
                      r"(?P<filter>\w+): (?P<reason>.*)$", re.M)
QUERY = re.compile(r'"GET (/placement/allocation_candidates\?[^" ]+)')
RESCHEDULE = re.compile(r"Error from last host: (\S+) \(node (\S+)\)")
# Copied to the duplicate record, as in tests/functional/base.py
# (RebalanceDuplicateMixin).


@dataclasses.dataclass
class Host:
    """A nova-compute service: its state and {node: provider traits}."""

    name: str
    disabled_reason: str | None
    forced_down: bool
    state: str
    nodes: dict[str, list[str]]
    duplicates: list[str]


@dataclasses.dataclass
class Boot:
    """One server, and the log written while it was booted."""

    name: str
    uuid: str
    status: str
    host: str | None
    node: str | None
    log: str
    debug: str
    fault: str = ""


def label(host: str | None, node: str | None) -> str:
    """``host`` when the node is named after it, else ``host/node``."""
    return f"{host}" if node in (None, host) else f"{host}/{node}"


def problems_of(host: Host) -> list[str]:
    """What is wrong with a host, from the facts gathered."""
    found = []
    if host.disabled_reason is not None:
        found.append(f'service disabled, reason "{host.disabled_reason}"')
        if not any("COMPUTE_STATUS_DISABLED" in t for t in host.nodes.values()):
            found.append("its compute was not told: the provider has no "
                         "COMPUTE_STATUS_DISABLED, placement still offers it")
    if host.forced_down:
        found.append(f"service forced down (state {host.state})")
    for why in host.duplicates:
        found.append(f"{why} (its own node {host.name} is fine)")
    for node, node_traits in host.nodes.items():
        if ours := sorted(set(node_traits) & set(traits.DEFAULT_FORBIDDEN)):
            found.append(f"provider {node} carries {', '.join(ours)}")
    return found


def forbidden_in(log: str) -> set[str]:
    """Traits forbidden by root_required in placement's candidate queries."""
    found: set[str] = set()
    for uri in QUERY.findall(log):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
        for value in query.get("root_required", []):
            found |= {t[1:] for t in value.split(",") if t.startswith("!")}
    return found


def explain(boot: Boot, carriers: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """What was kept away from one boot, and the smoke-check problems."""
    ours = forbidden_in(boot.log) & set(traits.DEFAULT_FORBIDDEN)
    kept = sorted({c for t in ours for c in carriers.get(t, [])})
    shown = [f"pre-filter kept out {', '.join(kept) or 'no provider'} (query "
             f"forbade {', '.join(sorted(ours)) or 'nothing'})"]
    bad = [] if traits.DRAIN_HOST in ours else [
        f"pre-filter did not forbid {traits.DRAIN_HOST}"]
    rejected: dict[str, dict[str, str]] = {}
    for m in REJECTED.finditer(boot.debug):
        where = label(m["host"], m["node"])
        rejected.setdefault(m["filter"], {})[where] = m["reason"]
    lines = [m for m in map(SUMMARY.search, boot.log.splitlines())
             if m and m[1] == boot.uuid]
    for line in lines:
        shown.append(f"our filters: {line[2]} hosts in, {line[3]} left")
        for name, count in COUNTS.findall(line[4]):
            hosts = rejected.get(name, {})
            if count != "0" or hosts:
                shown.append(f"  {name} rejected {count}: " + "; ".join(
                    f"{where} ({why})" for where, why in sorted(hosts.items())))
    if not lines:
        bad.append("no summary line from our filters")
    for (host, node), who in MUST_EXCLUDE.items():
        if who != "pre-filter" and label(host, node) not in rejected.get(who, {}):
            bad.append(f"{who} did not reject {label(host, node)}")
    for host, node in RESCHEDULE.findall(boot.log):
        bad.append(f"build failed on {label(host, node)}, rescheduled")
    if boot.status != "ACTIVE":
        bad.append(f"server is {boot.status}")
    elif (boot.host, boot.node) in MUST_EXCLUDE:
        bad.append(f"landed on {label(boot.host, boot.node)}, to be excluded")
    return shown, bad



class HostsAct(ActMixin, base.DrainTestBase):
    """Six computes; four have something wrong."""

    NUMBER, TITLE = 1, "The hosts and what is wrong with each"
    HOSTS = HOSTS
    COMPUTE_DRIVER = "fake.FakeDriver"  # room for many servers

    def test_act(self) -> None:
        self.break_hosts()
        hosts = self.describe_hosts()
        self.show_hosts(hosts)
        self.keep_logs()

    def show_hosts(self, hosts: list[Host]) -> None:
        say = self.screen.say
        say(f"{len(hosts)} nova-compute services (fake virt driver):")
        troubled = set()
        for host in hosts:
            problems = problems_of(host)
            say(f"  {host.name}  nodes: {', '.join(host.nodes)}"
                + ("" if problems else "  - healthy"))
            for problem in problems:
                say(f"      - {problem}")
            if problems:
                troubled.add(host.name)
        expected = {host for host, _ in MUST_EXCLUDE}
        self.screen.check(troubled == expected, "hosts with problems: "
                          f"{sorted(troubled)}, not {sorted(expected)}")

    def break_hosts(self) -> None:
        # Disabled in the database only, as when nova-compute could not
        # be told: its provider gets no COMPUTE_STATUS_DISABLED trait.
        service = objects.Service.get_by_compute_host(self.ctxt, "rack7-01")
        service.disabled, service.disabled_reason = True, DRAIN_REASON
        service.save()
        rack7_02 = self.admin_api.get_services(
            binary="nova-compute", host="rack7-02")[0]
        self.admin_api.put_service_force_down(rack7_02["id"], True)
        owner = self.computes[BM_OWNER].manager
        owner.driver._set_nodes([BM_OWNER, BM_NODE])
        owner.update_available_resource(self.ctxt)
        self.make_duplicate(objects.ComputeNode.get_by_host_and_nodename(
            self.ctxt, BM_OWNER, BM_NODE))
        rp_uuid = self._get_provider_uuid_by_host("rack8-01")
        self._create_trait(traits.DRAIN_HOST)
        self._set_provider_traits(
            rp_uuid, self._get_provider_traits(rp_uuid) + [traits.DRAIN_HOST])

    def make_duplicate(self, live: Any) -> None:
        # What a racy Ironic rebalance leaves (Nova bugs 1853009, 1841481).
        ndf_fixtures.make_rebalance_duplicate(
            self.ctxt, self.placement, live, DUP_HOST)

    def describe_hosts(self) -> list[Host]:
        services = sorted(self.admin_api.get_services(binary="nova-compute"),
                          key=lambda svc: svc["host"])
        up = {svc["host"]: svc["state"] == "up" for svc in services}
        nodes = sorted(objects.ComputeNodeList.get_all(self.ctxt),
                       key=lambda cn: cn.hypervisor_hostname)
        dups = decisions.duplicate_reasons(decisions.NodeFacts(
            host=cn.host, nodename=cn.hypervisor_hostname, uuid=cn.uuid,
            service_up=up.get(cn.host, False), updated_at=cn.updated_at)
            for cn in nodes)
        return [Host(
            svc["host"],
            svc["disabled_reason"] or "" if svc["status"] == "disabled"
            else None,
            bool(svc["forced_down"]), svc["state"],
            {cn.hypervisor_hostname: self._get_provider_traits(cn.uuid)
             for cn in nodes if cn.host == svc["host"]},
            [str(why) for (host, _), why in dups.items()
             if host == svc["host"]],
        ) for svc in services]



class BootsAct(HostsAct):
    """The same six computes; servers booted one request each."""

    NUMBER, TITLE = 2, "Boots: where they land, what was excluded and why"
    SERVERS = 6

    def test_act(self) -> None:
        self.break_hosts()
        carriers: dict[str, list[str]] = {}
        for host in self.describe_hosts():
            for node, node_traits in host.nodes.items():
                for trait in node_traits:
                    carriers.setdefault(trait, []).append(
                        label(host.name, node))
        self.show_boots(self.boot_all(), carriers)
        self.keep_logs()

    def boot_all(self) -> list[Boot]:
        """Boot SERVERS servers; keep the log written for each."""
        debug = self.useFixture(fixtures.FakeLogger(
            name="nova_drain_filters.filters.base", level=logging.DEBUG,
            format="%(message)s", nuke_handlers=False))
        boots = []
        for number in range(1, self.SERVERS + 1):
            log, dbg = len(self.stdlog.logger.output), len(debug.output)
            server = self.api.post_server({"server": self._build_server(
                name=f"demo-{number}", networks="none")})
            for _ in range(100):  # builds are synchronous (CastAsCall)
                server = self.api.get_server(server["id"])
                if server["status"] != "BUILD":
                    break
                time.sleep(0.1)
            boots.append(Boot(
                server["name"], server["id"], server["status"],
                server.get("OS-EXT-SRV-ATTR:host"),
                server.get("OS-EXT-SRV-ATTR:hypervisor_hostname"),
                self.stdlog.logger.output[log:], debug.output[dbg:],
                server.get("fault", {}).get("message", "")))
        return boots

    def show_boots(self, boots: list[Boot],
                   carriers: dict[str, list[str]]) -> None:
        say = self.screen.say
        first: tuple[str, list[str]] | None = None
        say(f"Booting {len(boots)} servers, one request each:")
        for boot in boots:
            where = label(boot.host, boot.node) if boot.host else "no host"
            say(f"  {boot.name}  {boot.status} on {where}"
                + (f" ({boot.fault})" if boot.fault else ""))
            shown, problems = explain(boot, carriers)
            for problem in problems:
                self.screen.check(False, f"{boot.name}: {problem}")
            if first and shown == first[1] and not self.screen.verbose:
                say(f"    same exclusions as {first[0]}")
                continue
            first = first or (boot.name, shown)
            for line in shown:
                say(f"    {line}")
        active = [b for b in boots if b.status == "ACTIVE"]
        healthy = [b for b in active if (b.host, b.node) not in MUST_EXCLUDE]
        say(f"Totals: {len(boots)} servers booted, {len(healthy)} landed on "
            f"healthy hosts, {len(boots) - len(active)} failed")
