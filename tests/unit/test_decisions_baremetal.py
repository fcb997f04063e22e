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

"""baremetal_reasons, the baremetal reason codes and is_ironic."""
import ddt
import testtools

from nova_drain_filters import decisions
from nova_drain_filters import traits
from tests.unit import ironic_fakes

RC = decisions.ReasonCode
node = ironic_fakes.ironic_node


def details(n: decisions.IronicNodeFacts) -> list[str]:
    reasons = decisions.baremetal_reasons(n)
    for reason in reasons:
        assert reason.code is RC.BAREMETAL_UNAVAILABLE, reason
    return [r.detail for r in reasons]


@ddt.ddt
class TestBaremetalReasons(testtools.TestCase):
    def test_available_node_is_usable(self) -> None:
        self.assertEqual([], decisions.baremetal_reasons(node()))

    @ddt.data("power off", "power on")
    def test_power_off_and_power_on_are_fine(self, power: str) -> None:
        self.assertEqual(
            [], decisions.baremetal_reasons(node(power_state=power)))

    @ddt.data("clean wait", "cleaning", "manageable", "enroll", "active",
              "deploying", "deploy failed", "clean failed", "inspecting",
              "rescue", "error", "adopting", "AVAILABLE", "")
    def test_every_other_provision_state(self, state: str) -> None:
        self.assertEqual([f"provision_state={state}"],
                         details(node(provision_state=state)))

    def test_provision_state_none(self) -> None:
        self.assertEqual(["provision_state=None"],
                         details(node(provision_state=None)))

    def test_reason_string(self) -> None:
        reasons = decisions.baremetal_reasons(
            node(provision_state="clean wait"))
        self.assertEqual(["baremetal: provision_state=clean wait"],
                         [str(r) for r in reasons])
        self.assertEqual("baremetal", reasons[0].label)

    def test_maintenance_without_reason(self) -> None:
        self.assertEqual(["maintenance"], details(node(maintenance=True)))

    def test_maintenance_with_reason(self) -> None:
        n = node(maintenance=True, maintenance_reason="disk swap INC-42")
        self.assertEqual(["maintenance (disk swap INC-42)"], details(n))
        self.assertEqual("baremetal: maintenance (disk swap INC-42)",
                         decisions.summarize(decisions.baremetal_reasons(n)))

    def test_maintenance_reason_alone_is_not_maintenance(self) -> None:
        # Ironic keeps the old reason text only while in maintenance, but a
        # reason without the flag must not reject the node.
        self.assertEqual([], details(node(maintenance_reason="old")))

    def test_power_state_unknown(self) -> None:
        self.assertEqual(["power_state=unknown"],
                         details(node(power_state=None)))

    def test_power_state_error(self) -> None:
        self.assertEqual(["power_state=error"],
                         details(node(power_state="error")))

    def test_retired_without_reason(self) -> None:
        self.assertEqual(["retired"], details(node(retired=True)))

    def test_retired_with_reason(self) -> None:
        self.assertEqual(["retired (end of lease)"],
                         details(node(retired=True,
                                      retired_reason="end of lease")))

    def test_retired_reason_alone_is_not_retired(self) -> None:
        self.assertEqual([], details(node(retired_reason="was retired")))

    def test_fault(self) -> None:
        self.assertEqual(["fault=power failure"],
                         details(node(fault="power failure")))

    def test_instance_uuid(self) -> None:
        self.assertEqual(["instance_uuid=inst-1"],
                         details(node(instance_uuid="inst-1")))

    def test_allocation_uuid(self) -> None:
        self.assertEqual(["allocation_uuid=alloc-1"],
                         details(node(allocation_uuid="alloc-1")))

    def test_empty_strings_are_not_set(self) -> None:
        self.assertEqual([], details(node(fault="", instance_uuid="",
                                          allocation_uuid="")))

    def test_several_at_once_in_a_stable_order(self) -> None:
        n = node(provision_state="clean failed", maintenance=True,
                 maintenance_reason="cleaning failed", power_state=None,
                 retired=True, retired_reason="eol", fault="clean failure",
                 instance_uuid="inst-1", allocation_uuid="alloc-1")
        self.assertEqual(
            ["provision_state=clean failed",
             "maintenance (cleaning failed)",
             "power_state=unknown",
             "retired (eol)",
             "fault=clean failure",
             "instance_uuid=inst-1",
             "allocation_uuid=alloc-1"],
            details(n))
        self.assertEqual(
            "baremetal: provision_state=clean failed; "
            "baremetal: maintenance (cleaning failed); "
            "baremetal: power_state=unknown; baremetal: retired (eol); "
            "baremetal: fault=clean failure; baremetal: instance_uuid=inst-1; "
            "baremetal: allocation_uuid=alloc-1",
            decisions.summarize(decisions.baremetal_reasons(n)))

    def test_traits_and_name_do_not_matter(self) -> None:
        n = node(name="rack1-u12", traits=frozenset(
            {traits.BAREMETAL_UNAVAILABLE, traits.DRAIN_HOST}))
        self.assertEqual([], decisions.baremetal_reasons(n))

    def test_defaults_of_the_facts(self) -> None:
        n = decisions.IronicNodeFacts(uuid="u1", provision_state="available")
        # Only the power state is unknown by default.
        self.assertEqual(["power_state=unknown"], details(n))
        self.assertEqual(frozenset(), n.traits)
        self.assertIs(False, n.maintenance)
        self.assertIs(False, n.retired)


class TestBaremetalCodes(testtools.TestCase):
    def test_codes_are_stable_strings(self) -> None:
        self.assertEqual("ironic_node_missing", RC.IRONIC_NODE_MISSING.value)
        self.assertEqual("baremetal_unavailable",
                         RC.BAREMETAL_UNAVAILABLE.value)
        self.assertEqual("baremetal_unknown", RC.BAREMETAL_UNKNOWN.value)

    def test_traits(self) -> None:
        self.assertEqual(traits.BAREMETAL_UNAVAILABLE, decisions.Reason(
            RC.BAREMETAL_UNAVAILABLE, "provision_state=clean").trait)
        self.assertEqual(traits.STALE_NODE,
                         decisions.Reason(RC.IRONIC_NODE_MISSING).trait)
        # Unknown is a scheduler-side verdict; the sync never sets a trait
        # because Ironic could not be asked.
        self.assertIsNone(decisions.Reason(RC.BAREMETAL_UNKNOWN).trait)

    def test_labels(self) -> None:
        self.assertEqual("node missing from Ironic",
                         decisions.Reason(RC.IRONIC_NODE_MISSING).label)
        self.assertEqual("baremetal state unknown: no snapshot",
                         str(decisions.Reason(RC.BAREMETAL_UNKNOWN,
                                              "no snapshot")))

    def test_missing_from_ironic_reason(self) -> None:
        reason = decisions.missing_from_ironic_reason("node-1")
        self.assertEqual(RC.IRONIC_NODE_MISSING, reason.code)
        self.assertEqual("node-1", reason.detail)
        self.assertEqual("node missing from Ironic: node-1", str(reason))
        self.assertEqual(traits.STALE_NODE, reason.trait)


@ddt.ddt
class TestIsIronic(testtools.TestCase):
    def test_ironic(self) -> None:
        self.assertIs(True, decisions.is_ironic("ironic"))
        self.assertEqual("ironic", decisions.IRONIC_HYPERVISOR_TYPE)

    @ddt.data(None, "", "QEMU", "kvm", "Ironic", "ironic ", "vmware")
    def test_not_ironic(self, htype: str | None) -> None:
        self.assertIs(False, decisions.is_ironic(htype))
