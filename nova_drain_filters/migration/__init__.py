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

"""The migrate engine: move a drained host's servers away, and say when it is done.

``openstack drain host migrate`` (and each batch of ``drain rolling``)
reads a host into moves, posts them within a concurrency cap and
deadlines, polls Nova's migration records, and judges each server by
where Nova says it ended up. Nothing is kept between runs: a rerun reads
Nova's migration records and picks up what is still in flight.

* ``plan``: the decisions, pure: how a server moves or why it stays, what
  each migration status means, and when to look again.
* ``tracking``: one server's move as the runner tracks it, the runner's
  options and the events the CLI prints.
* ``runner``: posts, polls and judges the moves.
* ``facts``: reads a host's servers and migration records into moves,
  and what is left on it after a run.
"""
