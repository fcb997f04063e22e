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


"""``nova-drain-agent``: the drain traits kept current from Ironic's events.

A service of its own (``nova-drain-agent``, on oslo.service), run beside
nova-scheduler with the same ``nova.conf``. Its modules, one noun each:

``service``
    The oslo.service ``Service`` and ``main``: wires the rest, stops
    after the batch in hand.
``events``
    The batch endpoint of oslo.messaging's notification listener: one
    verdict a node a batch.
``reconcile``
    The bulk read of Ironic, Nova and placement on an interval, with the
    sync's refusals.
``writer``
    The agent's picture, what changes a verdict, the write budget, and the
    writes (through ``sync.apply_steps``, the sync's own write path).
``capacity``
    What the capacity report needs beyond a reconcile's picture, read
    after it.
``metrics``
    The agent's health and the capacity report's gauges on ``/metrics``.
"""
