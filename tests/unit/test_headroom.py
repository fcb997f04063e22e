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

"""Headroom: free capacity of the schedulable nodes, as pure functions."""
import testtools

from nova_drain_filters import headroom
from nova_drain_filters import report


def node(uuid: str, host: str, *reasons: str) -> report.NodeVerdict:
    return report.NodeVerdict(host, host, uuid, reasons,
                              (("VCPU", 8), ("MEMORY_MB", 4096)))


VERDICTS = [node("n1", "c1"), node("n2", "c2"),
            node("n3", "c3", "drain_drained"), node("n4", "c4")]
ROOMS = {"n1": {"VCPU": (32, 4), "MEMORY_MB": (4096, 1024)},
         "n2": {"VCPU": (32, 0), "MEMORY_MB": (4096, 4000)},
         "n3": {"VCPU": (32, 0), "MEMORY_MB": (4096, 0)}}


class TestHeadroom(testtools.TestCase):
    def test_only_schedulable_nodes_count(self) -> None:
        [row] = headroom.rows(VERDICTS, ROOMS)
        # n3 is drained; n4 is in no answer: its inventory, nothing free.
        self.assertEqual((None, 3, 3), (row.group, row.hosts, row.nodes))
        self.assertEqual({"VCPU": 72, "MEMORY_MB": 12288},
                         dict(row.capacity))
        self.assertEqual({"VCPU": 60, "MEMORY_MB": 3168}, dict(row.free))
        self.assertAlmostEqual(3168 / 12288, row.fraction("MEMORY_MB"))
        self.assertEqual(0.0, row.fraction("CUSTOM_NONE"))

    def test_by_aggregate(self) -> None:
        found = headroom.rows(VERDICTS, ROOMS, "aggregate",
                              {"c1": ["a", "b"], "c2": ["b"]})
        self.assertEqual(
            [("(none)", 1, 0), ("a", 1, 3072), ("b", 2, 3168)],
            [(r.group, r.nodes, r.free["MEMORY_MB"]) for r in found])
        self.assertEqual(["MEMORY_MB", "VCPU"],
                         headroom.resource_classes(found))
