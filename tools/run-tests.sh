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
# The whole test suite: lint, types, the sample config, the docs, unit and
# functional tests (Nova's harness, a real Ironic and a real placement,
# started by the tests themselves) on the newest supported Nova, in .venv;
# then the scheduler-side tests again on native threads (SCHEDULER_SIDE),
# as that release's nova-scheduler runs, with a summary line of their own.
#   --all-releases  then the functional tests of what differs between
#                   releases (OLDER_SELECTED) on every older supported Nova
#                   (.venv-novaNN, built by tools/setup.sh in the background
#                   while the newest Nova's stages run), one summary line
#                   per release, and the native-threads pass on each in
#                   THREADING_RELEASES (OLDER_THREADING). This is what CI
#                   runs.
#   --save-times    only write this checkout's recorded test durations
#                   into tools/test-times.json (see below), after a run.
# After the newest Nova's suites, the end-to-end tier (tests/e2e) on the
# real multi-process cloud of tools/cloud.sh, which the tier starts and
# stops itself: once per run, newest Nova only, with a summary line of its
# own (doc/source/testing.rst). The stestr runs above leave it out.
# Other arguments go to stestr as a test filter. The last line is always
# "N passed, N failed, N skipped" over everything that ran; before it, the
# summary lines and the id of every test that failed, with its stage.
set -uo pipefail
cd "$(dirname "$0")/.."

# Kept in step with tools/setup.sh.
OLDER_RELEASES="31 32 33"
NEWEST=34
declare -A SERIES=([31]=2025.1 [32]=2025.2 [33]=2026.1 [34]=2026.2)
# The releases whose nova-scheduler console script starts on native threads
# (monkey_patch.patch(backend='threading') in nova/cmd/scheduler.py; 31 and
# 32 patch eventlet in nova/cmd/__init__.py). doc/source/install.rst.
# Nova 33's functional harness was written for eventlet: its
# FakeVersionedNotifier._get_sender_test_case_id
# (nova/tests/fixtures/notifications.py) walks eventlet.getcurrent()'s
# parents whatever the backend, so every notification sent from a native
# thread fails, and its in-memory SQLite, one connection shared by the
# service threads, fails boots with "cannot start a transaction within a
# transaction". Nova 34 changed its harness for both (no sender check on
# threads; a WAL file per database and one writer at a time on each), and
# tests/functional/nova33_harness.py makes the same changes to Nova 33's,
# on threads only, so the pass runs there too: about five minutes of CI
# on 2 cores (285 s for Nova 33's, 296 s for Nova 34's).
THREADING_RELEASES="33 34"
# The scheduler-side tests, run a second time on native threads on those
# releases (OS_NOVA_DISABLE_EVENTLET_PATCHING=true; Nova's harness patches
# eventlet otherwise): the filters, the pre-filter, the Ironic view and its
# threads, start-up from nova.conf, events and the broker outage, the
# host's shared reader, and the fork path's unit tests.
SCHEDULER_SIDE='^tests\.(functional\.(test_baremetal_events|test_baremetal_scheduling|test_baremetal_startup|test_concurrency_mode|test_event_mode_config|test_host_reader|test_ironic_events|test_ironic_view|test_prefilter|test_service_filters|test_stale_nodes)|unit\.(ironic_view\.(test_events|test_host_reader|test_refresher|test_snapshot_batches|test_view|test_view_verdict)|test_snapshot_age))\.'
# On the older releases, what differs between releases, not every test
# (issue 42; doc/source/testing.rst, "What runs where"):
# - the filters and the pre-filter on that release's scheduler
#   (nova_compat.py), and start-up from nova.conf;
# - the Nova database reads (nova_db.py), and the differential against
#   that release's nova-manage audit on three seeds that between them hold
#   every ingredient both ways, one (13) through --nova-config;
# - the harness shims (cli_harness, harness_run, nova33_harness);
# - the CLI against that release's API and migrations, a class a command;
# - event mode on that release's oslo.messaging and kombu.
# What only our code or a service of our own pins decides runs on the
# newest alone, where the same code runs: the Ironic view's threads, the
# clears' races, placement contention, the real Ironic and our client of
# it, our queue consumer and the host's reader, the tier on Nova's own
# Ironic driver (about four minutes a release; it passed on 31 to 33 when
# it was written), and the demo.
OLDER_SELECTED='^tests\.functional\.(test_service_filters|test_prefilter|test_stale_nodes|test_baremetal_scheduling\.(BootsLandOnAvailableNodesTest|ExcludedWithinOneRefreshTest)|test_baremetal_startup|test_concurrency_mode|test_harness_race|test_nova_db|test_orphans_vs_audit|test_cli_harness|test_cli_stale|test_cli_orphans\.BaremetalOrphanTest|test_cli_report|test_cli_sync\.SyncTest|test_cli_drain_host\.LifecycleTest|test_cli_drain_node|test_cli_drain_migrate\.(MixedStatesTest|GroupsTest|UnmovableTest)|test_cli_drain_check\.(FitTest|AntiAffinityTest|MigrateRefusesTest|DifferentialTest\.test_seed_4)|test_cli_drain_rolling|test_event_mode_config|test_ironic_events)\.'
OLDER_AUDIT_SEEDS=8,13,14
# The native-threads pass on an older release (Nova 33): the scheduler-side
# tests that run that release's own scheduler and harness shims on threads
# (nova33_harness.py). The unit tests, the Ironic view's threads and the
# event threads are our code: they run on threads on the newest.
OLDER_THREADING='^tests\.functional\.(test_service_filters|test_prefilter|test_stale_nodes|test_baremetal_scheduling\.(BootsLandOnAvailableNodesTest|ExcludedWithinOneRefreshTest)|test_baremetal_startup|test_concurrency_mode|test_ironic_events)\.'
# The end-to-end tier: a cloud of its own, so never in the stestr runs
# above, and always on one worker (its tests share that cloud).
E2E='^tests\.e2e\.'


if [ "${1:-}" = "--save-times" ]; then
    # This checkout's recorded durations (a second or more) into
    # tools/test-times.json, after a full run.
    exec .venv/bin/python - <<'PY'
import json
from dbm import dumb
from pathlib import Path
with dumb.open(".stestr/times.dbm", "r") as db:
    kept = {k.decode(): round(float(db[k]), 1) for k in db.keys()}
kept = {k: v for k, v in sorted(kept.items())
        if v >= 1.0 and k.startswith("tests.")}
Path("tools/test-times.json").write_text(
    json.dumps(kept, indent=0, sort_keys=True) + "\n")
print(f"run-tests: {len(kept)} durations in tools/test-times.json")
PY
fi

all_releases=0
if [ "${1:-}" = "--all-releases" ]; then
    all_releases=1
    shift
fi

# Bytecode goes to .pycache/, not beside the sources: the checkout stays
# clean, and the venvs' modules, installed uncompiled (tools/setup.sh),
# are compiled once, on first import, by whichever process needs them.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$PWD/.pycache"
rc=0
total_passed=0 total_failed=0 total_skipped=0
summaries=()
# "stage: test id" of every failed test, repeated after the summary lines,
# so the end of the output names them however long the rest is.
failures=()
stage=""

step() { echo "== $*" >&2; "$@" || rc=1; }

# Three stestr workers on CI's two cores: a worker spends much of some
# tests waiting on its services (Nova 33's threads pass: 351 s with two,
# 249 s with three; the CPU-bound Nova 34 stage: 904 s and 899 s;
# doc/source/testing.rst). NDF_CONCURRENCY overrides it.
# run_suite VENV LOG TEST_PATH [filter...]: one stestr run; sets passed,
# failed, skipped and run_rc, prints the result lines (and on failure the
# rest of the output; service logs stay in LOG).
run_suite() {
    local venv=$1 log=$2 test_path=$3
    shift 3
    # nova's harness looks for api-paste.ini under site-packages; the wheel
    # puts it under the environment's data directory.
    OS_WSGI__API_PASTE_CONFIG="$PWD/$venv/etc/nova/api-paste.ini" \
        "$venv/bin/stestr" --test-path "$test_path" run \
        --concurrency "${NDF_CONCURRENCY:-3}" "$@" > "$log" 2>&1
    run_rc=$?
    grep -aE '^\{[0-9]+\} .* \.\.\. (ok|FAILED|SKIPPED)' "$log" | sed 's/^{[0-9]*} //'
    local failed_id
    while read -r failed_id; do
        failures+=("${stage:-$log}: $failed_id")
    done < <(grep -aE '^\{[0-9]+\} .* \.\.\. FAILED' "$log" |
             sed -E 's/^\{[0-9]+\} ([^ ]+).*/\1/')
    if [ $run_rc -ne 0 ]; then
        grep -avE '^\{[0-9]+\} .* \.\.\. ok' "$log" | tail -n 300
    fi
    local stats
    stats=$("$venv/bin/stestr" last --subunit 2>/dev/null | "$venv/bin/subunit-stats" 2>/dev/null)
    passed=$(awk '/^Passed tests:/ {print $3}' <<< "$stats")
    failed=$(awk '/^Failed tests:/ {print $3}' <<< "$stats")
    skipped=$(awk '/^Skipped tests:/ {print $3}' <<< "$stats")
    passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    total_skipped=$((total_skipped + skipped))
    if [ $run_rc -ne 0 ] || [ "$passed" -eq 0 ]; then rc=1; fi
}

# threading_pass VENV LOG SELECTED [filter...]: the tests SELECTED matches
# (SCHEDULER_SIDE, or OLDER_THREADING on an older release) again, on native
# threads; sets passed, failed, skipped and run_rc like run_suite.
threading_pass() {
    local venv=$1 log=$2 selected=$3 list
    shift 3
    list=$(mktemp)
    OS_NOVA_DISABLE_EVENTLET_PATCHING=true "$venv/bin/stestr" \
        --test-path ./tests list "$@" 2>/dev/null | grep -E "$selected" > "$list"
    if [ ! -s "$list" ]; then
        passed=0 failed=0 skipped=0 run_rc=0
        rm -f "$list"
        return 1
    fi
    OS_NOVA_DISABLE_EVENTLET_PATCHING=true \
        run_suite "$venv" "$log" ./tests --load-list "$list"
    rm -f "$list"
}

# threading_summary RELEASE VENV: the native-threads pass, if RELEASE's
# scheduler defaults to them, with its own summary line.
threading_summary() {
    local release=$1 venv=$2 log
    shift 2
    case " $THREADING_RELEASES " in *" $release "*) ;; *) return 0 ;; esac
    echo "== Nova $release (${SERIES[$release]}): the scheduler-side tests on native threads" >&2
    log=.stestr-run-threading.log
    [ "$release" = "$NEWEST" ] || log=.stestr-run-nova$release-threading.log
    local began=$SECONDS selected=$SCHEDULER_SIDE
    [ "$release" = "$NEWEST" ] || selected=$OLDER_THREADING
    stage="Nova $release native threads"
    if threading_pass "$venv" "$log" "$selected" "$@"; then
        summaries+=("Nova $release (${SERIES[$release]}) scheduler-side, native threads: $passed passed, $failed failed, $skipped skipped; tests $((SECONDS - began))s")
    else
        summaries+=("Nova $release (${SERIES[$release]}) scheduler-side, native threads: none selected")
    fi
}

# e2e_summary: the end-to-end tier, if the filter selects any of it, with
# its own summary line; the tier starts (and stops) tools/cloud.sh's cloud.
e2e_summary() {
    local list
    list=$(mktemp)
    OS_NOVA_DISABLE_EVENTLET_PATCHING=true .venv/bin/stestr \
        --test-path ./tests list "$@" 2>/dev/null | grep -E "$E2E" > "$list"
    if [ ! -s "$list" ]; then
        summaries+=("Nova $NEWEST (${SERIES[$NEWEST]}) end-to-end, real cloud: none selected")
        rm -f "$list"
        return 0
    fi
    echo "== Nova $NEWEST (${SERIES[$NEWEST]}): the end-to-end tier on tools/cloud.sh's cloud" >&2
    local began=$SECONDS notes="${NDF_CLOUD_DIR:-.cloud}/e2e.log" seen memory
    stage="Nova $NEWEST end-to-end"
    seen=$(cat "$notes" 2>/dev/null | wc -l)
    # Native threads, as the cloud's own orchestrator runs (tools/cloud.sh).
    NDF_CONCURRENCY=1 OS_NOVA_DISABLE_EVENTLET_PATCHING=true \
        run_suite .venv .stestr-run-e2e.log ./tests --load-list "$list"
    rm -f "$list"
    # The cloud's memory as this run's tier noted it last (tests/e2e).
    memory=$(tail -n +$((seen + 1)) "$notes" 2>/dev/null |
             grep -o "memory at the end of the tier: .*" | tail -n 1)
    summaries+=("Nova $NEWEST (${SERIES[$NEWEST]}) end-to-end, real cloud: $passed passed, $failed failed, $skipped skipped; cloud and tests $((SECONDS - began))s${memory:+; $memory} (.cloud/e2e.log)")
}

run_began=$SECONDS
start=$SECONDS
tools/setup.sh || exit $?
install_time=$((SECONDS - start))

start=$SECONDS
step .venv/bin/ruff check nova_drain_filters osc_plugin tests tools
step .venv/bin/mypy nova_drain_filters osc_plugin
sample=$(mktemp)
step .venv/bin/oslo-config-generator --namespace nova_drain_filters --output-file "$sample"
grep -q '^\[drain_filters\]' "$sample" || { echo "genconfig: no [drain_filters] section" >&2; rc=1; }
rm -f "$sample"
# The operator docs, as tox -e docs builds them: a warning fails the step,
# and -E re-reads every page so none is skipped as unchanged.
step .venv/bin/sphinx-build -W --keep-going -E -q -b html doc/source doc/build/html
checks_time=$((SECONDS - start))

# stestr splits the tests between its workers by the durations it has
# recorded (stestr/scheduler.py partition_tests, by class as .stestr.conf
# groups them). A fresh clone has none and splits blindly: CI's Nova 34
# stage once kept one worker busy 16 minutes and the other 12. So a clone
# with no durations gets a CI run's, tools/test-times.json (made with
# --save-times); they only steer the split, and a stale entry costs
# balance, never a test.
[ -d .stestr ] || .venv/bin/stestr init > /dev/null
.venv/bin/python - <<'PY' || true
import json
from dbm import dumb  # stestr's own (stestr/repository/file.py)
from pathlib import Path
if not Path(".stestr/times.dbm.dat").exists():
    with dumb.open(".stestr/times.dbm", "c") as db:
        for test_id, seconds in json.loads(
                Path("tools/test-times.json").read_text()).items():
            db[test_id] = str(seconds)
PY
# The older releases' venvs install in the background, one after another,
# while the newest Nova's stages run: each install is mostly waiting on
# downloads and the disk, and each release's stage below waits for its
# own. Their output goes to .stestr-setup-novaNN.log.
if [ $all_releases -eq 1 ]; then
    rm -f .stestr-setup-nova*.rc
    (
        for release in $OLDER_RELEASES; do
            began=$SECONDS
            tools/setup.sh --release "$release" > ".stestr-setup-nova$release.log" 2>&1
            echo "$? $((SECONDS - began))" > ".stestr-setup-nova$release.rc"
        done
    ) &
fi

echo "== stestr run: unit and functional tests, Nova $NEWEST" >&2
start=$SECONDS
stage="Nova $NEWEST unit+functional"
run_suite .venv .stestr-run.log ./tests --exclude-regex "$E2E" "$@"
summaries+=("Install ${install_time}s; lint, types, sample config and docs ${checks_time}s")
summaries+=("Nova $NEWEST (${SERIES[$NEWEST]}) unit+functional: $passed passed, $failed failed, $skipped skipped; tests $((SECONDS - start))s")
threading_summary "$NEWEST" .venv "$@"
e2e_summary "$@"

if [ $all_releases -eq 1 ]; then
    for release in $OLDER_RELEASES; do
        echo "== Nova $release (${SERIES[$release]}): install (in the background since the start), then the functional tests" >&2
        start=$SECONDS
        # Bounded: a stuck install fails its release, not the whole run.
        while [ ! -s ".stestr-setup-nova$release.rc" ] && [ $((SECONDS - start)) -lt 1800 ]; do
            sleep 2
        done
        cat ".stestr-setup-nova$release.log" >&2 2>/dev/null
        read -r setup_rc install_time < ".stestr-setup-nova$release.rc" 2>/dev/null
        if [ "${setup_rc:-1}" != 0 ]; then
            summaries+=("Nova $release (${SERIES[$release]}) functional: not installed (tools/setup.sh --release $release failed; .stestr-setup-nova$release.log)")
            rc=1
            continue
        fi
        stage="Nova $release functional"
        start=$SECONDS
        list=$(mktemp)
        ".venv-nova$release/bin/stestr" --test-path ./tests/functional \
            list "$@" 2>/dev/null | grep -E "$OLDER_SELECTED" > "$list"
        if [ -s "$list" ]; then
            NDF_AUDIT_SEEDS=${NDF_AUDIT_SEEDS:-$OLDER_AUDIT_SEEDS} \
                run_suite ".venv-nova$release" ".stestr-run-nova$release.log" \
                ./tests/functional --load-list "$list"
            summaries+=("Nova $release (${SERIES[$release]}) functional, what differs between releases: $passed passed, $failed failed, $skipped skipped; install ${install_time}s in the background, tests $((SECONDS - start))s")
        else
            summaries+=("Nova $release (${SERIES[$release]}) functional, what differs between releases: none selected")
        fi
        rm -f "$list"
        threading_summary "$release" ".venv-nova$release" "$@"
    done
fi

summaries+=("Whole run: $((SECONDS - run_began))s")
echo
printf '%s\n' "${summaries[@]}"
if [ ${#failures[@]} -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${failures[@]}"
fi
if [ "$total_passed" -eq 0 ]; then echo "no test ran" >&2; rc=1; fi
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
exit $rc
