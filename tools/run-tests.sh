#!/usr/bin/env bash
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
# The whole test suite: lint, types, the sample config, unit and functional
# tests (Nova's harness, a real Ironic and a real placement, started by the
# tests themselves). Extra arguments go to stestr as a test filter.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit $?

# nova's harness looks for api-paste.ini under site-packages; the wheel puts
# it under the environment's data directory.
export OS_WSGI__API_PASTE_CONFIG="$PWD/.venv/etc/nova/api-paste.ini"
export PYTHONDONTWRITEBYTECODE=1

rc=0
step() { echo "== $*" >&2; "$@" || rc=1; }

step .venv/bin/ruff check nova_drain_filters osc_plugin tests tools
step .venv/bin/mypy nova_drain_filters osc_plugin
sample=$(mktemp)
step .venv/bin/oslo-config-generator --namespace nova_drain_filters --output-file "$sample"
grep -q '^\[drain_filters\]' "$sample" || { echo "genconfig: no [drain_filters] section" >&2; rc=1; }
rm -f "$sample"

echo "== stestr run" >&2
.venv/bin/stestr --test-path ./tests run --concurrency "${NDF_CONCURRENCY:-2}" "$@" \
    > .stestr-run.log 2>&1
test_rc=$?
# Only the result lines; the full output (service logs of failures) stays in
# .stestr-run.log.
grep -aE '^\{[0-9]+\} .* \.\.\. (ok|FAILED|SKIPPED)' .stestr-run.log | sed 's/^{[0-9]*} //'
if [ $test_rc -ne 0 ]; then
    grep -avE '^\{[0-9]+\} .* \.\.\. ok' .stestr-run.log | tail -n 300
fi
passed=$(.venv/bin/stestr last --subunit 2>/dev/null | .venv/bin/subunit-stats 2>/dev/null | awk '/^Passed tests:/ {print $3}')
failed=$(.venv/bin/stestr last --subunit 2>/dev/null | .venv/bin/subunit-stats 2>/dev/null | awk '/^Failed tests:/ {print $3}')
skipped=$(.venv/bin/stestr last --subunit 2>/dev/null | .venv/bin/subunit-stats 2>/dev/null | awk '/^Skipped tests:/ {print $3}')
echo "${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
[ $test_rc -eq 0 ] || rc=1
if [ "${passed:-0}" -eq 0 ]; then echo "no test ran" >&2; rc=1; fi
exit $rc
