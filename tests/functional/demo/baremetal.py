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

"""Act 3: baremetal nodes change state in a real Ironic on loopback and the
scheduler follows, by event through a private broker when rabbitmq-server
is installed, else by the next listing (as in
tests/functional/test_baremetal_scheduling.py and test_baremetal_events.py,
on the bases of tests/functional/baremetal_base.py).
"""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

from tests.functional import baremetal_base
from tests.functional.services import rabbitmq_server

from .screen import ActMixin

NODES = {f"node-{n}": "available" for n in range(1, 6)}
SEEN_WITHIN = 30.0
"""Seconds a change may take to reach the scheduler before the act fails."""


def broker_installed() -> bool:
    """Whether a private broker can run (tools/setup.sh installs it)."""
    return ((rabbitmq_server.RABBITMQ_BIN / "rabbitmq-server").exists()
            and shutil.which("epmd") is not None)


class BaremetalStory(ActMixin):
    """Five available nodes; three change state; boots follow."""

    NUMBER, TITLE = 3, "Baremetal nodes change state in Ironic"
    NODES = NODES
    MODE = ""
    # Set by the harness base classes this mixes into.
    drain: Any
    ironic: Any
    nodes: dict[str, str]

    def in_view(self, name: str) -> Any:
        """The node as the scheduler's Ironic view holds it (None: gone)."""
        snap = self.drain.view.trusted()
        return None if snap is None else snap.nodes.get(self.nodes[name])

    def change(self, name: str, what: str, do: Callable[[], object],
               seen: Callable[[Any], bool]) -> None:
        """Make one change in Ironic; time it until the scheduler sees it.

        Timed from when the request is sent: that includes Ironic's own
        work (a failed cleaning takes a conductor run), then the event or
        listing that brings it to the scheduler's view.
        """
        listings = self.drain.view.refreshes
        start = time.monotonic()
        do()
        while not seen(self.in_view(name)):
            if time.monotonic() - start > SEEN_WITHIN:
                self.screen.check(False, f"{name}: {what}: the scheduler did "
                                  f"not see it within {SEEN_WITHIN:.0f} s")
                return
            time.sleep(0.01)
        took = time.monotonic() - start
        how = ("by event" if self.drain.view.refreshes == listings
               else "by a listing")
        self.screen.say(f"  {name}: {what:<30} seen {how}, {took:.2f} s "
                        "after the request")

    def test_act(self) -> None:
        say, check = self.screen.say, self.screen.check
        say(f"A real Ironic on loopback with {len(self.NODES)} available "
            "nodes behind one nova-compute.")
        say(self.MODE)
        names = list(self.NODES)
        say("Changes made through Ironic's API (Nova is not told):")
        self.change(names[0], 'maintenance on ("bmc firmware")',
                    lambda: self.ironic.set_maintenance(
                        self.nodes[names[0]], True, reason="bmc firmware"),
                    lambda n: n is not None and bool(n.maintenance))
        self.ironic.manage(self.nodes[names[1]])
        self.change(names[1], "manageable, cleaning fails",
                    lambda: self.ironic.fail_cleaning(self.nodes[names[1]]),
                    lambda n: n is not None
                    and n.provision_state == "clean failed")
        self.change(names[2], "deleted from Ironic",
                    lambda: self.ironic.delete_node(self.nodes[names[2]]),
                    lambda n: n is None)
        say("Booting 3 servers:")
        for number in range(1, 4):
            server = self.boot(name=f"demo-bm-{number}")  # type: ignore[attr-defined]
            node = self.node_of(server)  # type: ignore[attr-defined]
            say(f"  demo-bm-{number} ACTIVE on {node}")
            check(node in names[3:], f"a boot landed on {node}, a changed node")
        lines = self.summary_lines()  # type: ignore[attr-defined]
        check(lines, "no summary line from our filters")
        summary = lines[0] if lines else ""
        counts, _, reasons = summary.partition(" hosts in, ")[2].partition(": ")
        say(f"Our filters, first boot: {len(self.NODES)} nodes in, "
            f"{counts.split()[0] if counts else '?'} left:")
        for reason in reasons.split("; "):
            say(f"  {reason}")
        for why in ("baremetal: maintenance (bmc firmware)",
                    "provision_state=clean failed",
                    "node missing from Ironic: " + self.nodes[names[2]]):
            check(why in summary, f"the summary does not say {why!r}")
        self.keep_logs()

    def keep_logs(self) -> None:
        super().keep_logs()
        log = self.ironic_fixture.server.state_dir / "ironic.log"  # type: ignore[attr-defined]
        if self.screen.verbose and log.exists():
            self.screen.logs.append(log.read_text(errors="replace")[-6000:])


class PollingAct(BaremetalStory, baremetal_base.BaremetalTestBase):
    """The scheduler lists Ironic's nodes every second."""

    MODE = ("No rabbitmq-server here (tools/setup.sh installs it): event "
            "mode falls back\nto polling, a listing every "
            f"{baremetal_base.REFRESH} s.")


class EventAct(BaremetalStory, baremetal_base.EventModeTestBase):
    """Ironic publishes node events to a private broker; the full listing
    is 600 s away, so what the scheduler sees within the act came by event."""

    MODE = ("Event mode: Ironic publishes to a private RabbitMQ; the full "
            "listing is\n600 s away, so what the scheduler sees now came by "
            "event.")


def act_class() -> type[BaremetalStory]:
    """The act for this machine: event mode if the broker is installed."""
    return EventAct if broker_installed() else PollingAct
