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


"""A cloud for rolling runs: hosts with a service and one node each, the
drain steps applied to them, heartbeats on every read."""
import dataclasses
import datetime
from collections.abc import Sequence

from nova_drain_filters import decisions
from nova_drain_filters import drain

EPOCH = datetime.datetime(2026, 1, 1)


@dataclasses.dataclass
class FakeHost:
    name: str
    disabled: bool = False
    reason: str | None = None
    marked: bool = False
    up: bool = True
    servers: tuple[str, ...] = ()
    beats: int = 0
    #: Reads left before it reports again (a host that is rebooting).
    silent: int = 0


class FakeCloud:
    """Implements ``rolling.runner.Cloud`` over FakeHosts."""

    def __init__(self, *names: str) -> None:
        self.hosts = {n: FakeHost(n) for n in names}
        self.nowhere: dict[str, list[str]] = {}
        self.migrated: list[list[str]] = []
        self.checked: list[tuple[list[str], list[str]]] = []
        self.fail_migrate: dict[str, str] = {}
        self.steps: list[drain.Step] = []

    def facts(self, hosts: Sequence[str]) -> dict[str, drain.HostFacts]:
        found = {}
        for name in hosts:
            host = self.hosts[name]
            if host.silent:
                host.silent -= 1
            elif host.up:
                host.beats += 1
            found[name] = drain.HostFacts(
                name, decisions.ServiceFacts(
                    host=name, disabled=host.disabled, forced_down=False,
                    is_up=host.up and not host.silent,
                    disabled_reason=host.reason,
                    last_seen_up=EPOCH + datetime.timedelta(
                        seconds=host.beats),
                    uuid=f"svc-{name}"),
                (drain.NodeMark(f"rp-{name}", name, in_placement=host.marked),),
                servers=host.servers)
        return found

    def has_ironic(self) -> bool:
        return False

    def carry_out(self, steps: Sequence[drain.Step],
                  all_or_nothing: bool) -> list[str]:
        for step in steps:
            self.steps.append(step)
            host = self.hosts[step.host]
            if step.action is drain.Action.MARK_PROVIDER:
                host.marked = True
            elif step.action is drain.Action.UNMARK_PROVIDER:
                host.marked = False
            elif step.action is drain.Action.DISABLE:
                host.disabled, host.reason = True, step.reason
            elif step.action is drain.Action.ENABLE:
                host.disabled, host.reason = False, None
        return []

    def check(self, hosts: Sequence[str],
              avoid: Sequence[str]) -> list[str]:
        self.checked.append((list(hosts), list(avoid)))
        return [line for h in hosts for line in self.nowhere.get(h, [])]

    def migrate(self, hosts: Sequence[str]) -> dict[str, str]:
        self.migrated.append(list(hosts))
        for name in hosts:
            if name not in self.fail_migrate:
                self.hosts[name].servers = ()
        return {h: why for h, why in self.fail_migrate.items() if h in hosts}
