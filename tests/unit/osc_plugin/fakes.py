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

"""A fake openstackclient app and DrainClient, and canned clouds for them."""
import argparse
import io
import types
from typing import Any

import fixtures
import testtools

from nova_drain_filters.clients import http
from tests.unit import drain_fakes as df
from tests.unit import ironic_fakes


def uuid(n: int) -> str:
    """A readable UUID: ``uuid(0xa)`` is ``0000000a-0000-4000-8000-...``."""
    return f"{n:08x}-0000-4000-8000-000000000000"


class Stream(io.StringIO):
    """A StringIO whose isatty() the test decides."""

    def __init__(self, text: str = "", tty: bool = False) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class FakeDrainClient:
    """Stands in for osc_plugin.client.DrainClient."""

    def __init__(self, nova: Any = None, placement: Any = None,
                 ironic: Any = None, has_ironic: bool = False) -> None:
        self.nova = nova or df.FakeNova()
        self.placement = placement or df.FakeAllocations()
        self.ironic = ironic
        self._has_ironic = has_ironic
        #: What token_scope() answers: why the token may see few nodes.
        self.scope: str | None = None

    def has_ironic(self) -> bool:
        return self._has_ironic

    def token_scope(self) -> str | None:
        return self.scope


class FakeApp:
    """The parts of the openstackclient shell the drain commands use."""

    def __init__(self, client: Any = None, answer: str = "",
                 tty: bool = False) -> None:
        self.client_manager = types.SimpleNamespace(
            drain=client or FakeDrainClient())
        self.stdin = Stream(answer, tty)
        self.stdout = Stream()
        self.stderr = Stream()


def api_error(status: int = 500, service: str = "placement",
              method: str = "DELETE", url: str = "/x") -> http.ApiError:
    return http.error_type(status)(service, method, url, status, "boom")


class CommandTestCase(testtools.TestCase):
    """Builds a command on a fake app, parses and runs it."""

    cls: Any = None
    prog = ""

    def setUp(self) -> None:
        super().setUp()
        # Progress writes to sys.stderr when it is a terminal.
        self.sys_stderr = Stream()
        self.useFixture(fixtures.MonkeyPatch("sys.stderr", self.sys_stderr))

    def command(self, client: Any = None, answer: str = "",
                tty: bool = False) -> Any:
        self.app = FakeApp(client, answer, tty)
        return self.cls(self.app, None)

    def parse(self, *argv: str, cmd: Any = None) -> argparse.Namespace:
        cmd = cmd or self.command()
        parsed: argparse.Namespace = cmd.get_parser(self.prog).parse_args(
            list(argv))
        return parsed

    def parse_error(self, *argv: str) -> str:
        """The message argparse prints for a command line it rejects."""
        err = self.useFixture(fixtures.MonkeyPatch("sys.stderr", io.StringIO()))
        self.assertRaises(SystemExit, self.parse, *argv)
        return str(err.new_value.getvalue())

    def take(self, client: Any, *argv: str, answer: str = "",
             tty: bool = False) -> tuple[Any, list[Any]]:
        cmd = self.command(client, answer, tty)
        cmd.failures = []
        columns, rows = cmd.take_action(self.parse(*argv, cmd=cmd))
        self.cmd = cmd
        return columns, list(rows)

    def run_cmd(self, client: Any, *argv: str) -> int:
        cmd = self.command(client)
        self.cmd = cmd
        rc: int = cmd.run(self.parse("-f", "value", *argv, cmd=cmd))
        return rc


# --- A cloud with stale records -------------------------------------------
SVC1, SVC2 = uuid(0x51), uuid(0x52)
NODE_OK, NODE_GONE, NODE_DOWN = uuid(0xA), uuid(0xB), uuid(0xC)
RP_ORPHAN, RP_OTHER, DEAD = uuid(0xE), uuid(0xF), uuid(0xDEAD)


def stale_cloud(ironic: bool = True) -> FakeDrainClient:
    """c1 (up): NODE_OK, NODE_GONE (gone from Ironic); c2 (forced down):
    NODE_DOWN; RP_ORPHAN: a compute provider with no node, used by DEAD;
    RP_OTHER: not a compute provider."""
    hvs = [df.hv(NODE_OK, host="c1", service_id=SVC1),
           df.hv(NODE_GONE, host="c1", service_id=SVC1),
           df.hv(NODE_DOWN, host="c2", service_id=SVC2)]
    compute = df.FakeNova(
        hvs, [df.service("c1", uuid=SVC1),
              df.service("c2", "down", forced_down=True, uuid=SVC2)],
        servers=[df.server(uuid(0x1), NODE_OK, "c1")])
    rps = [NODE_OK, NODE_GONE, NODE_DOWN, RP_ORPHAN, RP_OTHER]
    placement = df.FakeAllocations(
        providers={rp: rp for rp in rps},
        allocations={RP_ORPHAN: {DEAD: {"VCPU": 1}},
                     NODE_OK: {uuid(0x1): {"VCPU": 1}}},
        consumers={DEAD: df.consumer({RP_ORPHAN: {"VCPU": 1}})},
        compute=rps[:4])
    nodes = ironic_fakes.FakeIronicClient([
        ironic_fakes.ironic_node(NODE_OK), ironic_fakes.ironic_node(NODE_DOWN)])
    return FakeDrainClient(compute, placement, nodes, has_ironic=ironic)


# --- A cloud with orphaned allocations ------------------------------------
RP_N1, RP_N2, RP_GPU, RP_SHARED = uuid(0x11), uuid(0x22), uuid(0x33), uuid(0x44)
ELSE, GONE, HERE, OTHER = uuid(0xA1), uuid(0xB1), uuid(0xC1), uuid(0xD1)


def orphan_cloud() -> FakeDrainClient:
    """HERE lives on n1; ELSE lives on n2 but also holds n1; GONE does not
    exist and holds n1 and its child RP_GPU; RP_SHARED is no compute tree."""
    compute = df.FakeNova(
        [df.hv(RP_N1, "n1", "c1", "QEMU"), df.hv(RP_N2, "n2", "c2", "QEMU")],
        servers=[df.server(HERE, "n1", "c1"),
                 df.server(ELSE, "n2", "c2", project="p-else")])
    placement = df.FakeAllocations(
        providers={RP_N1: RP_N1, RP_N2: RP_N2, RP_GPU: RP_N1,
                   RP_SHARED: RP_SHARED},
        allocations={
            RP_N1: {HERE: {"VCPU": 1}, ELSE: {"VCPU": 2},
                    GONE: {"CUSTOM_BAREMETAL_GOLD": 1}},
            RP_GPU: {GONE: {"VGPU": 1}},
            RP_N2: {ELSE: {"VCPU": 2}},
            RP_SHARED: {OTHER: {"DISK_GB": 10}}},
        consumers={
            GONE: df.consumer({RP_N1: {"CUSTOM_BAREMETAL_GOLD": 1},
                               RP_GPU: {"VGPU": 1}}, project="p-gone"),
            ELSE: df.consumer({RP_N1: {"VCPU": 2}, RP_N2: {"VCPU": 2}},
                              generation=4, project="p-else")})
    return FakeDrainClient(compute, placement)
