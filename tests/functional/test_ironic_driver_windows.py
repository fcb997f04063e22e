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

"""The windows Nova's Ironic driver leaves open between two periodics.

Driver: ``ironic.IronicDriver`` (Nova's own) on a real Ironic, because the
window is the driver's: it sets ``reserved = 1`` for a node that is
cleaning, manageable or in maintenance only in ``update_provider_tree``,
which for a node nobody deploys or deletes runs only on the
``update_available_resource`` periodic (``nova/compute/manager.py``).

With no server involved, a node goes into cleaning, manageable or
maintenance through Ironic's API. Each test measures how long the Ironic
view takes to exclude it (by polling, or by Ironic's notifications), shows
that placement still offers it by Nova alone until the test runs Nova's
periodic, and that the periodic then reserves it. The figures are printed
(``ndf-ironic-driver:`` lines on stderr); only a generous bound is asserted.
"""
import time
from collections.abc import Callable

from tests.functional import ironic_driver_base as idb

#: Generous bound on the view's exclusion (polling every REFRESH s or
#: events); the figures printed are what counts.
BOUND = 15.0
#: Seconds placement is watched after the last change before the periodic.
HOLD = 2.0


class WindowsPollingTest(idb.IronicDriverTestBase):
    """The Ironic view lists every ``REFRESH`` s (polling mode)."""

    NODES = ("cleaning", "manageable", "maintenance", "spare")
    MODE = "polling"

    def changes(self) -> dict[str, tuple[Callable[[], object],
                                         Callable[[], bool]]]:
        """How each window opens, through Ironic's API only, and when the
        view has seen it."""
        return {
            # Manual cleaning starts from manageable, both within one
            # periodic: timed from the manage request until the view has
            # the node in CLEANING (it excludes it from manageable on).
            "cleaning": (
                self.manage_and_clean,
                lambda: self.excluded_by_view("cleaning") and self.view_state(
                    "cleaning") in ("cleaning", "clean wait")),
            "manageable": (
                lambda: self.ironic.manage(self.nodes["manageable"]),
                lambda: self.excluded_by_view("manageable")),
            "maintenance": (
                lambda: self.ironic.set_maintenance(
                    self.nodes["maintenance"], True, reason="bmc"),
                lambda: self.excluded_by_view("maintenance")),
        }

    def manage_and_clean(self) -> None:
        """available -> manageable -> cleaning (the slow vendor step)."""
        node = self.nodes["cleaning"]
        self.ironic.manage(node)
        self.ironic.set_provision_state(node, "clean",
                                        clean_steps=[idb.SLOW_CLEAN_STEP])

    def view_state(self, name: str) -> str | None:
        snap = self.drain.view.trusted()
        node = snap.nodes.get(self.nodes[name]) if snap else None
        return node.provision_state if node else None

    def test_windows_between_two_periodics(self) -> None:
        self.assertEqual(set(self.NODES), self.candidates())
        listings = self.drain.view.refreshes
        opened: dict[str, float] = {}
        excluded: dict[str, float] = {}
        for name, (change, seen) in self.changes().items():
            start = time.monotonic()
            change()
            opened[name] = start
            self.wait_until(f"{name}: excluded by the view", seen,
                            timeout=BOUND)
            # From before the request: the request is part of the window.
            excluded[name] = time.monotonic() - start
        time.sleep(HOLD)
        if self.EVENTS:
            # Nothing was listed: each change came by a notification.
            self.assertEqual(listings, self.drain.view.refreshes)

        # Nova alone: placement still offers all three, unreserved; our
        # filters keep the boot off them.
        offered = self.candidates()
        for name in opened:
            self.assertIn(name, offered)
            self.assertEqual(0, self.reserved(name))
        self.assertEqual("spare", self.node_of(self.boot()))
        line = self.summary_lines()[-1]
        self.assertIn("baremetal: maintenance (bmc)", line)
        self.assertIn("baremetal: provision_state=manageable", line)
        self.assertIn("baremetal: provision_state=clean", line)
        offered_for = {name: time.monotonic() - t for name, t in opened.items()}

        # The periodic reserves them (nova/virt/ironic/driver.py
        # update_provider_tree, _node_resources_unavailable).
        took = self.periodic()
        offered = self.candidates()
        for name in opened:
            self.assertNotIn(name, offered)
            self.assertEqual(1, self.reserved(name))
        for name in opened:
            idb.report(
                f"window {name} ({self.MODE}): excluded by the view "
                f"{excluded[name]:.2f} s after the Ironic request; offered "
                f"by Nova alone for the {offered_for[name]:.1f} s until the "
                f"test ran update_available_resource, reserved by it "
                f"({took:.2f} s over {len(self.nodes)} nodes)")


class WindowsEventsTest(WindowsPollingTest):
    """Event mode: Ironic's notifications through a private RabbitMQ; the
    full listing runs every 600 s, so none happens during the test."""

    EVENTS = True
    MODE = "events"
