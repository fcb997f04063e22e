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

"""DisabledServiceFilter inside Nova's real scheduler."""
import fixtures
from nova import objects

from tests.functional import base


class DisabledServiceTest(base.DrainTestBase):
    """Two computes; one is drained, then given back."""

    def test_disabled_then_enabled_via_api(self) -> None:
        # The API path: nova-compute also sets COMPUTE_STATUS_DISABLED, so
        # Nova's own pre-filter hides host1 from placement; the summary line
        # says so (read every request here, not every 60 s).
        self.useFixture(fixtures.MockPatch(
            "nova_drain_filters.status_hidden.REFRESH_SECONDS", 0.0))
        host1, host2 = self.service_id("host1"), self.service_id("host2")
        self.admin_api.put_service(
            host1, {"status": "disabled", "disabled_reason": "drain: rack 7"})
        for _ in range(3):
            self.assertEqual("host2", self.host_of(self.boot()))
        self.assertIn("Nova's compute_status_filter forbade "
                      "COMPUTE_STATUS_DISABLED, hiding 1 disabled compute "
                      "node(s): host1 (placement read 0s ago)",
                      self.summary_lines()[-1])

        self.admin_api.put_service(host1, {"status": "enabled"})
        self.admin_api.put_service(
            host2, {"status": "disabled", "disabled_reason": "drain: rack 9"})
        for _ in range(3):
            self.assertEqual("host1", self.host_of(self.boot()))
        self.assertIn("hiding 1 disabled compute node(s): host2",
                      self.summary_lines()[-1])

    def test_disabled_while_compute_unreachable(self) -> None:
        # When nova-compute cannot be told, the service is disabled in the
        # database but its provider keeps no COMPUTE_STATUS_DISABLED trait:
        # placement still offers host1, and the filter must say why not.
        service = objects.Service.get_by_compute_host(self.ctxt, "host1")
        service.disabled = True
        service.disabled_reason = "drain: firmware upgrade"
        service.save()

        server = self.boot()
        self.assertEqual("host2", self.host_of(server))
        lines = self.summary_lines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn(server["id"], lines[0])
        self.assertIn(
            "DisabledServiceFilter rejected 1 "
            "(1 x service disabled: drain: firmware upgrade)", lines[0])

    def test_forced_down_service(self) -> None:
        self.admin_api.put_service_force_down(self.service_id("host1"), True)
        for _ in range(3):
            self.assertEqual("host2", self.host_of(self.boot()))
        self.assertIn("1 x service forced down", self.summary_lines()[0])

        self.admin_api.put_service_force_down(self.service_id("host1"), False)
        self.admin_api.put_service_force_down(self.service_id("host2"), True)
        self.assertEqual("host1", self.host_of(self.boot()))

    def test_all_hosts_rejected_gives_no_valid_host(self) -> None:
        for host in self.HOSTS:
            self.admin_api.put_service_force_down(self.service_id(host), True)
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        line = self.summary_lines()[-1]
        self.assertIn("2 hosts in, 0 left", line)
        self.assertIn("DisabledServiceFilter rejected 2", line)
