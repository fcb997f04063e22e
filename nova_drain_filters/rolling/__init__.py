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


"""Rolling maintenance: patch many hosts, a batch at a time, resumably.

``openstack drain rolling`` takes hosts in a stable order and, batch by
batch, checks that the batch's servers fit elsewhere, drains the batch
(``drain.plan_start``), moves its servers (the migrate engine), runs the
operator's COMMAND on each host, waits for each host to come back, and
puts back only what the run changed (``drain.plan_cancel``).

* ``schedule``: the decisions, pure: batches, the checks of the input,
  and what a host needs next from its journal and from Nova.
* ``journal``: the run's progress, one fsynced line per event in a file.
* ``hook``: COMMAND, run detached so that it outlives the command that
  started it, with its log and exit status in files.
* ``runner``: a run, batch by batch, against a :class:`runner.Cloud`.
"""
