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

"""A real multi-process OpenStack on loopback: ``tools/cloud.sh``.

MariaDB, RabbitMQ, Keystone, Placement, Glance, a network stand-in, Nova
(API, conductor, scheduler, four computes) and Ironic, each a process of
its own on 127.0.0.1, with every file under the checkout's ``.cloud/``.
``python -m tests.functional.cloud up|down|status`` drives it; the state
file ``.cloud/cloud.json`` (:mod:`.state`) lists every endpoint, PID and
log, so a test tier can start, read and stop the same cloud.
"""
