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

"""The newcomer test: every act of ``tools/demo.sh`` does what it says.

The same cases the demo runs (tests/functional/demo/), with small sizes, so that
the demo cannot rot. Each act records the claims of it that did not hold;
here none may. Act 3 runs in event mode when rabbitmq-server is installed,
as the demo does. Services get free ports and temp dirs and are stopped by
PID (tests/functional/services/process.py), so two workers can run this.
"""
from typing import Any

from tests.functional.demo import baremetal
from tests.functional.demo import drain
from tests.functional.demo import hosts
from tests.functional.demo import records


class Verdict:
    """Run the act; assert that it did what it says."""

    screen: Any

    def test_act(self) -> None:
        super().test_act()  # type: ignore[misc]
        self.assertEqual(  # type: ignore[attr-defined]
            [], self.screen.problems, self.screen.text())
        self.assertTrue(self.screen.lines)  # type: ignore[attr-defined]


class HostsActTest(Verdict, hosts.HostsAct):
    pass


class BootsActTest(Verdict, hosts.BootsAct):
    SERVERS = 2


class BaremetalActTest(Verdict, baremetal.act_class()):  # type: ignore[misc]
    pass


class StaleActTest(Verdict, records.StaleAct):
    pass


class OrphanActTest(Verdict, records.OrphanAct):
    pass


class DrainActTest(Verdict, drain.DrainAct):
    pass
