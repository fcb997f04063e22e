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

"""The drain traits survive Nova's own Ironic driver's periodic.

Driver: ``ironic.IronicDriver`` (Nova's own) on a real Ironic, because the
driver replaces each provider's traits with the Ironic node's on every
periodic (``update_provider_tree``: ``update_traits(nodename,
node.traits)``); only traits set on the node survive, which is why
``drain sync`` and ``drain node start`` mark both.
"""
import json
import time

from nova_drain_filters import traits
from tests.functional import cli_harness
from tests.functional import ironic_driver_base as idb

PLACEMENT_ONLY = "CUSTOM_SET_IN_PLACEMENT_ONLY"


class TraitsSurviveTest(cli_harness.CliTestBase, idb.IronicDriverTestBase):
    NODES = ("a", "maint", "drained")

    def custom_traits(self, name: str) -> set[str]:
        return {t for t in self._get_provider_traits(self.nodes[name])
                if t.startswith("CUSTOM_")}

    def test_drain_traits_survive_periodics_and_keep_boots_off(self) -> None:
        maint, drained = self.nodes["maint"], self.nodes["drained"]
        self.ironic.set_maintenance(maint, True, reason="psu")
        sync = self.cli_json("drain", "sync")
        self.assertEqual(
            {("ironic", maint, traits.BAREMETAL_UNAVAILABLE, "add"),
             ("placement", maint, traits.BAREMETAL_UNAVAILABLE, "add")},
            {(r["Target"], r["UUID"], r["Trait"], r["Action"]) for r in sync
             if r["UUID"] in self.by_uuid})
        run = self.cli("drain", "node", "start", drained, "--yes", "-f",
                       "json")
        self.assertEqual(0, run.rc, run)
        self.assertEqual({("mark Ironic node", drained),
                          ("mark provider", drained)},
                         {(r["Step"], r["Target"])
                          for r in json.loads(run.stdout)})
        # A trait set only in placement shows the periodic really replaces
        # the provider's traits.
        self._create_trait(PLACEMENT_ONLY)
        self._set_provider_traits(
            self.nodes["a"],
            self._get_provider_traits(self.nodes["a"]) + [PLACEMENT_ONLY])

        # nova-compute re-reads each provider from placement once its cache
        # is older than resource_provider_association_refresh (300 s by
        # default; nova/scheduler/client/report.py
        # _refresh_associations): at 1 s, every periodic here starts from
        # what placement holds, as a production periodic does every 300 s.
        self.flags(resource_provider_association_refresh=1, group="compute")
        expected = {"maint": traits.BAREMETAL_UNAVAILABLE,
                    "drained": traits.DRAIN_HOST}
        for _ in range(3):
            time.sleep(1.1)
            self.periodic()
            for name, trait in expected.items():
                self.assertIn(trait, self.custom_traits(name))
                self.assertIn(trait, self.ironic.get_traits(self.nodes[name]))
        self.assertNotIn(PLACEMENT_ONLY, self.custom_traits("a"))

        # The pre-filter forbids the drain traits; the one free node takes
        # the first boot, and the next finds no host.
        self.assertEqual("a", self.node_of(self.boot()))
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        log = self.stdlog.logger.output
        self.assertIn("%21CUSTOM_DRAIN_HOST", log)
        self.assertIn("%21CUSTOM_DRAIN_BAREMETAL_UNAVAILABLE", log)
        idb.report(f"traits: after 3 periodics {sorted(expected.values())} "
                   f"still on providers and nodes; {PLACEMENT_ONLY} (placement "
                   f"only) wiped by the periodic once Nova re-read the provider")
