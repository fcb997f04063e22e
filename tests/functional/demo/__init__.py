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

"""The acts of ``tools/demo.sh``, one module per story.

Each act is a Nova functional-harness case (``test_act``) that fills a
:class:`~.screen.Screen`: the lines to show and the claims that did not
hold. ``python -m tests.functional.demo`` (``__main__.py``, which
``tools/demo.sh`` runs) prints them; ``tests/functional/test_demo.py``
runs the same cases in the suite and asserts every claim held. The
modules are not named ``test_*``, so the test runner does not collect
the acts a second time.
"""
