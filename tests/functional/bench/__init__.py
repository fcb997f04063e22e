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

"""The benchmarks: figures and ratios measured side by side, never asserted.

One module per benchmark, run from the repository root as
``tools/bench.sh NAME [ARGS]`` (or ``tox -e bench -- NAME [ARGS]``), which
is ``python -m tests.functional.bench.NAME ARGS`` in ``.venv``. A
benchmark module:

* has a ``main(argv) -> int`` behind ``if __name__ == "__main__":``
  (``tools/bench.sh`` lists the modules that have one) and its docstring
  says what it measures and how to run it;
* defines its Nova harness case, if it has one, as a module-level class on
  the shared bases (``tests/functional/base.py``, ``cli_harness.py``,
  ``fake_ironic_driver.FakeIronicDriver``) and runs it with
  ``tests.functional.harness_run.run_quietly``; what varies per run (sizes,
  repeats, the object results go to) is set on the case before it runs
  (never as ``run``, which is ``unittest.TestCase.run``);
* if it runs our code as nova-scheduler does rather than inside Nova's
  harness, says ``EVENTLET = False``: ``tools/bench.sh`` then sets
  ``OS_NOVA_DISABLE_EVENTLET_PATCHING=true``, so that importing
  ``tests.functional`` (which imports Nova's harness) does not
  monkey-patch it, and it runs on native threads as Nova 34's scheduler;
* is never named ``test_*``, and no test imports it: the test runner does
  not collect a benchmark's case, so none runs in CI. A helper module
  that a benchmark splits out has no ``__main__`` block.
"""
