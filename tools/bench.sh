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
# Run one benchmark: tools/bench.sh NAME [ARGS], i.e. python -m
# tests.functional.bench.NAME ARGS from the repository root in .venv, with
# the Nova API paste config the harness needs. Without NAME, or with an
# unknown one, it lists the benchmarks (the modules of tests/functional/bench
# that run as a script and have a main) and exits 2. tox -e bench -- NAME [ARGS] runs it
# with BENCH_PYTHON set to tox's interpreter instead of .venv's.
set -euo pipefail
cd "$(dirname "$0")/.."
benchmarks() {
    grep -l '^def main(' $(grep -l '^if __name__ == "__main__":' \
        tests/functional/bench/*.py) |
        xargs -n1 basename | sed 's/\.py$//' | sort
}
name="${1:-}"
if [[ -z "$name" || ! "$name" =~ ^[a-z_][a-z0-9_]*$ ]] ||
        ! benchmarks | grep -qx "$name"; then
    echo "usage: tools/bench.sh NAME [ARGS]; NAME is one of:" \
        $(benchmarks) >&2
    [[ -z "$name" ]] || echo "bench.sh: error: no benchmark named '$name'" >&2
    exit 2
fi
shift
# A benchmark that runs our code as nova-scheduler does, outside Nova's
# harness, says EVENTLET = False: importing tests.functional must not
# monkey-patch it (nova/monkey_patch.py reads this variable).
if grep -q '^EVENTLET = False' "tests/functional/bench/$name.py"; then
    export OS_NOVA_DISABLE_EVENTLET_PATCHING=true
fi
python="${BENCH_PYTHON:-.venv/bin/python}"
if [[ -z "${BENCH_PYTHON:-}" ]]; then
    [[ -x .venv/bin/python ]] || tools/setup.sh
    export OS_WSGI__API_PASTE_CONFIG="$PWD/.venv/etc/nova/api-paste.ini"
fi
exec "$python" -m "tests.functional.bench.$name" "$@"
