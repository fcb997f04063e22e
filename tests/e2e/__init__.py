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

"""The end-to-end tier: the project on the real cloud of ``tools/cloud.sh``.

Every test boots through the real nova-api with real Keystone tokens,
on the multi-process cloud of ``tests/functional/cloud`` (doc/source/
cloud.rst). The tier starts that cloud itself (or reuses one that runs in
this checkout) and stops what it started; ``tools/run-tests.sh`` runs it
once, on the newest Nova, in a stage of its own. doc/source/testing.rst.
"""
