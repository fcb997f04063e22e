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

"""Fake virt drivers whose live migrations take time, for ``drain host migrate``.

``nova/virt/fake.py`` ``FakeDriver.live_migration`` calls ``post_method``
at once, so a migration is over before anyone can see it ``running``.
These hold it. The compute runs ``driver.live_migration`` in its live
migration pool (``nova/compute/manager.py`` ``_do_live_migration``, a
greenthread under the harness's eventlet, a native thread without it):
the wait is a sleep loop, which yields in both modes, so the hold never
blocks the API, the conductor or the test.
"""
import sys
import time
from typing import Any

from nova import exception
from nova.virt import fake

TICK = 0.02


class HeldLiveMigrationDriver(fake.MediumFakeDriver):
    """Holds each live migration ``running`` until it is aborted
    (``live_migration_abort``) or released by the test."""

    #: Seconds each migration takes; None: until released or aborted.
    #: Read on every tick, so a test may change it on a running compute.
    hold: float | None = None
    #: If set, the destination pre-check fails with these words.
    precheck_error: str | None = None

    def __init__(self, virtapi: Any, read_only: bool = False) -> None:
        super().__init__(virtapi, read_only)
        self.holding: set[str] = set()
        self.released: set[str] = set()
        self.aborted: set[str] = set()
        #: Instance UUIDs whose live migration reached the driver.
        self.started: list[str] = []

    def live_migration(self, context: Any, instance: Any, dest: str,
                       post_method: Any, recover_method: Any,
                       block_migration: bool = False,
                       migrate_data: Any = None) -> None:
        uuid = instance.uuid
        self.started.append(uuid)
        self.holding.add(uuid)
        start = time.monotonic()
        try:
            while uuid not in self.released | self.aborted and (
                    self.hold is None
                    or time.monotonic() < start + self.hold):
                time.sleep(TICK)
        finally:
            self.holding.discard(uuid)
            self.released.discard(uuid)
        if uuid in self.aborted:
            self.aborted.discard(uuid)
            # As libvirt's driver does on an abort: roll back, cancelled.
            recover_method(context, instance, dest, migrate_data,
                           migration_status="cancelled")
        else:
            post_method(context, instance, dest, block_migration,
                        migrate_data)

    def check_can_live_migrate_destination(self, *args: Any,
                                           **kwargs: Any) -> Any:
        """Nova's fake answer, or the failure a test asked for: the
        conductor skips such a host (``nova/conductor/tasks/live_migrate.py``
        ``_find_destination``) and ends in NoValidHost."""
        if self.precheck_error:
            raise exception.MigrationPreCheckError(reason=self.precheck_error)
        return super().check_can_live_migrate_destination(*args, **kwargs)

    def live_migration_abort(self, instance: Any) -> None:
        self.aborted.add(instance.uuid)

    def release(self, uuid: str | None = None) -> None:
        """Let one held migration (or all of them) complete."""
        self.released |= {uuid} if uuid else set(self.holding)

    def post_live_migration(self, context: Any, instance: Any,
                            block_device_info: Any,
                            migrate_data: Any = None) -> None:
        # Runs on the source (nova/compute/manager.py _post_live_migration):
        # forget the guest here, as nova/virt/fake.py FakeLiveMigrateDriver
        # does.
        self.destroy(context, instance, network_info=None,
                     block_device_info=block_device_info)


class TimedLiveMigrationDriver(HeldLiveMigrationDriver):
    """Each live migration takes ``hold`` seconds (the benchmark sets it)."""

    hold = 1.0


# nova/virt/driver.py load_compute_driver imports 'nova.virt.<name>' only;
# give this module a name there so [DEFAULT] compute_driver can point at it.
sys.modules["nova.virt.drain_held_migration"] = sys.modules[__name__]
