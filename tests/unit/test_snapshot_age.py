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

"""baremetal_max_snapshot_age: derived when unset; event mode's freshness."""
import fixtures
from oslo_config import cfg

from nova_drain_filters import conf as drain_conf
from nova_drain_filters.ironic_view import events as ironic_events
from tests.unit import base as unit_base
from tests.unit.ironic_view import helpers as ironic_view_helpers


class TestDerivation(unit_base.ConfTestCase):
    def age(self, *lines: str) -> int:
        conf = self.load(*lines)
        drain_conf.validate(conf)  # never an error without an explicit age
        return drain_conf.max_snapshot_age(conf.drain_filters)

    def test_defaults_keep_the_old_120(self) -> None:
        self.assertEqual(120, self.age())
        self.assertEqual(120, self.age("baremetal_notifications = true"))

    def test_polling_follows_the_interval(self) -> None:
        self.assertEqual(120, self.age("baremetal_refresh_interval = 60"))
        self.assertEqual(1200, self.age("baremetal_refresh_interval = 600"))
        self.assertEqual(7200, self.age("baremetal_refresh_interval = 3600"))

    def test_event_mode_follows_the_fallback_not_the_interval(self) -> None:
        # The documented event-mode set-up, which stopped nova-scheduler.
        self.assertEqual(120, self.age("baremetal_notifications = true",
                                       "baremetal_refresh_interval = 600"))
        self.assertEqual(600, self.age(
            "baremetal_notifications = true",
            "baremetal_refresh_interval = 600",
            "baremetal_notifications_fallback_interval = 300"))

    def test_an_empty_line_is_unset(self) -> None:
        self.assertEqual(1200, self.age("baremetal_refresh_interval = 600",
                                        "baremetal_max_snapshot_age ="))

    def test_an_explicit_age_is_used_and_checked(self) -> None:
        self.assertEqual(90, self.age("baremetal_refresh_interval = 60",
                                      "baremetal_max_snapshot_age = 90"))
        for mode in ("false", "true"):
            conf = self.load(f"baremetal_notifications = {mode}",
                             "baremetal_refresh_interval = 600",
                             "baremetal_max_snapshot_age = 120")
            exc = self.assertRaises(drain_conf.ConfigError,
                                    drain_conf.validate, conf)
            self.assertEqual(
                "[drain_filters] baremetal_max_snapshot_age: 120 is smaller "
                "than baremetal_refresh_interval (600)", str(exc))

    def test_the_rule(self) -> None:
        cases = {  # (interval, notifications, fallback): derived
            (15, False, 15): 120, (61, False, 15): 122,
            (600, True, 15): 120, (600, True, 61): 122,
            (1, True, 3600): 7200}
        for args, want in cases.items():
            self.assertEqual(want, drain_conf.derived_snapshot_age(*args),
                             args)


class TestEventModeFreshness(ironic_view_helpers.ViewTestCase):
    """A healthy listener connection, not the last event, keeps trust."""

    def setUp(self) -> None:
        super().setUp()
        self.useFixture(fixtures.TempDir())
        self.conf.config(group="drain_filters", baremetal_notifications=True,
                         baremetal_refresh_interval=600,
                         baremetal_max_snapshot_age=None)
        self.up = True
        self.listener = ironic_events.EventListener(
            self.view, self.factory, clock=self.clock)  # type: ignore
        self.useFixture(fixtures.MockPatchObject(
            self.listener, "connected", lambda: self.up))
        self.view._events = self.listener
        self.assertTrue(self.view.refresh())
        self.started = self.clock()
        # The first look: up, then the catch-up listing, then settled.
        self.look()
        self.look()
        self.assertTrue(self.listener.settled)

    def look(self) -> None:
        self.listener._watch_once(self.started, self.started, 15)

    def test_a_quiet_cloud_stays_trusted_while_connected(self) -> None:
        for _ in range(10):  # ten hours without an event or a listing
            self.clock.advance(3600)
            self.look()
            self.assertIsNotNone(self.view.trusted())
        snap = self.view.trusted()
        assert snap is not None
        self.assertGreater(self.clock() - snap.finished_at,
                           drain_conf.max_snapshot_age(cfg.CONF.drain_filters))

    def test_without_looks_the_snapshot_ages_as_in_polling(self) -> None:
        # A watcher that stopped looking vouches for nothing.
        self.clock.advance(121)
        self.assertIsNone(self.view.trusted())

    def test_a_lost_connection_ages_from_when_it_was_last_up(self) -> None:
        self.clock.advance(3600)
        self.look()
        self.up = False
        self.client.error = RuntimeError("Ironic is down too")
        self.clock.advance(100)
        self.look()  # down: a fallback listing, which fails
        self.assertFalse(self.listener.broker_up)
        self.assertIsNotNone(self.view.trusted())
        self.clock.advance(21)
        self.look()
        self.assertIsNone(self.view.trusted())

    def test_back_up_it_trusts_again_only_after_the_catch_up(self) -> None:
        self.up = False
        self.clock.advance(200)
        self.client.error = RuntimeError("Ironic is down too")
        self.look()
        self.assertIsNone(self.view.trusted())
        self.up = True
        self.look()  # up again, but the catch-up listing fails
        self.assertFalse(self.listener.settled)
        self.assertIsNone(self.view.trusted())
        self.client.error = None
        self.look()
        self.assertTrue(self.listener.settled)
        self.assertIsNotNone(self.view.trusted())

    def test_an_explicit_age_bounds_a_lost_connection(self) -> None:
        self.conf.config(group="drain_filters", baremetal_max_snapshot_age=900)
        self.clock.advance(5000)
        self.look()
        self.up = False
        self.client.error = RuntimeError("Ironic is down too")
        self.clock.advance(899)
        self.look()
        self.assertIsNotNone(self.view.trusted())
        self.clock.advance(2)
        self.assertIsNone(self.view.trusted())

    def test_a_fork_forgets_the_parents_connection(self) -> None:
        self.clock.advance(3600)
        self.look()
        self.assertIsNotNone(self.view.trusted())
        self.view.refresher._reset_after_fork()
        self.assertIsNone(self.listener.healthy_at)
        self.assertIsNone(self.view.trusted())
