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

"""Options of the host filters and the placement pre-filter."""

from oslo_config import cfg
from oslo_config import types

from nova_drain_filters import traits

_trait_type = types.String(regex=traits.CUSTOM_TRAIT_PATTERN, max_length=255)

filter_opts = [
    cfg.BoolOpt(
        "placement_prefilter",
        default=True,
        help="""
Forbid ``forbidden_traits`` in every placement allocation candidate query.

When enabled, loading ``nova_drain_filters.filters.all_filters`` appends a
request filter to Nova's ``nova.scheduler.request_filter.ALL_REQUEST_FILTERS``.
It adds the traits to the request's ``root_forbidden`` set, so placement never
offers a provider that carries one of them and no
``[scheduler] max_placement_results`` slot is spent on it. The traits are
created in placement once per scheduler process (and re-checked every few
minutes), because placement rejects a query that forbids an unknown trait.

Nova has no plugin point for request filters and skips them on rebuild, so a
rebuild on a drained host still goes through; that is intended.

Possible values:

* True: forbid the traits in placement queries.
* False: do not touch placement queries; the host filters still run.

Related options:

* ``forbidden_traits``
* ``[scheduler] max_placement_results``
""",
    ),
    cfg.ListOpt(
        "forbidden_traits",
        item_type=_trait_type,
        default=list(traits.DEFAULT_FORBIDDEN),
        help=f"""
Custom traits that take a provider out of scheduling.

``{traits.STALE_NODE}`` and ``{traits.BAREMETAL_UNAVAILABLE}`` are set and
cleared by the trait sync (``openstack drain sync``). ``{traits.DRAIN_HOST}``
is for operators to drain a host by hand; on an Ironic node set it on the
node, since Nova's Ironic driver overwrites the provider's traits with the
node's on its periodic.

Possible values:

* A list of custom trait names, each matching ``CUSTOM_[A-Z0-9_]+``. An empty
  list turns the pre-filter into a no-op.

Related options:

* ``placement_prefilter``
""",
    ),
    cfg.IntOpt(
        "stale_node_max_age",
        default=0,
        min=0,
        help="""
Reject a compute node whose record was last updated more than this many
seconds ago. 0 turns the rule off, which is the default and the right choice
for most clouds.

The age is that of ``compute_nodes.updated_at``, which Nova writes only when a
node's resources change (``_resource_change`` in
``nova/compute/resource_tracker.py``). An idle host or an idle Ironic node can
be days old and perfectly healthy, so this is no liveness signal: service
liveness is judged by ``DisabledServiceFilter`` from the service heartbeat.
Turn this on only where every node's record is known to change often.

Possible values:

* 0: the age rule is off.
* A positive number of seconds.

Related options:

* ``[DEFAULT] service_down_time``
""",
    ),
]
