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
# A real multi-process OpenStack on 127.0.0.1, for trying the project:
#   tools/cloud.sh up       start what does not run yet (idempotent); prints
#                           every log; the cloud runs until `down`
#   tools/cloud.sh status   what runs (--json: processes, endpoints, facts)
#   tools/cloud.sh down     stop every process by its recorded PID
#   tools/cloud.sh stop NAME...  stop those processes (as status names
#                           them); `up` starts them again
#                           (--purge: also remove the state directory)
# Everything lives in .cloud/ (NDF_CLOUD_DIR moves it): the state file
# cloud.json, clouds.yaml, env, the databases, the logs. doc/source/cloud.rst
# says what runs and how.
# `up` first makes what it needs: .venv and .venv-ironic (tools/setup.sh),
# .venv-cloud (Nova, placement, Keystone, Glance, uWSGI, pinned by
# tools/cloud-constraints.txt), and Debian's mariadb-server and
# rabbitmq-server when they are missing (as root or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

CLOUD_REQS=(nova==34.0.0 openstack-placement==16.0.0 keystone==30.0.0
            glance==33.0.0 pyuwsgi PyMySQL)

# The services' packages, with the same pins either way: by the uv that
# tools/setup.sh keeps in .venv-uv (its pin; NDF_INSTALLER=pip and a uv
# that cannot be had mean pip). As there, uv compiles no bytecode ahead:
# uv resolved and installed the same set as pip (pip freeze identical) in
# 44 s without compiling, 462 s with it, on the loaded 2-core machine;
# each service compiles what it imports on first start (under run-tests.sh
# into its .pycache/, elsewhere beside the sources, as Python does).
cloud_reqs() {
    local pin=(-c tools/cloud-constraints.txt)
    if [ "${NDF_INSTALLER:-uv}" = uv ] && [ -x .venv-uv/bin/uv ]; then
        .venv-uv/bin/uv pip install --python .venv-cloud/bin/python \
            "${pin[@]}" "${CLOUD_REQS[@]}" && return 0
        echo "cloud: uv failed; installing with pip" >&2
    fi
    .venv-cloud/bin/pip install --disable-pip-version-check "${pin[@]}" "${CLOUD_REQS[@]}"
}

cloud_venv() {
    local stamp
    stamp=$(cat tools/cloud-constraints.txt setup.cfg | sha256sum | cut -d' ' -f1)
    if [ -x .venv-cloud/bin/nova-conductor ] && [ "$(cat .venv-cloud/.ndf-stamp 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    echo "cloud: .venv-cloud: Nova, placement, Keystone, Glance, uWSGI (pip's output: .venv-cloud/pip.log)" >&2
    [ -x .venv-cloud/bin/python ] || "${PYTHON:-python3}" -m venv .venv-cloud
    if ! { .venv-cloud/bin/pip install --disable-pip-version-check -q -U pip &&
           cloud_reqs &&
           .venv-cloud/bin/pip install --disable-pip-version-check --no-deps -e .; } >> .venv-cloud/pip.log 2>&1; then
        echo "cloud: pip failed in .venv-cloud; the last lines of .venv-cloud/pip.log:" >&2
        grep -v "^WARNING: Location" .venv-cloud/pip.log | tail -n 30 >&2
        exit 1
    fi
    echo "$stamp" > .venv-cloud/.ndf-stamp
}

debian_packages() {
    local missing=()
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "cloud: installing ${missing[*]} (Debian packages; only their programs are used, no system service)..." >&2
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo); else
            echo "cloud: install Debian's ${missing[*]} as root (apt-get install ${missing[*]})" >&2; exit 1
        fi
    fi
    "${sudo[@]}" apt-get update -q >/dev/null


    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

case "${1:-}" in
    up)
        # setup.sh first: it may use apt too, and it makes the uv that
        # cloud_venv uses; then Debian's packages and .venv-cloud side by
        # side (apt and uv wait on the network and on disk, not on each
        # other).
        tools/setup.sh
        debian_packages &
        apt_job=$!
        cloud_venv
        wait "$apt_job" ;;
    down|status|stop) ;;
    *) echo "usage: tools/cloud.sh up | down [--purge] | status [--json] | stop NAME..." >&2; exit 2 ;;
esac
# The orchestrator runs in .venv (it imports the tests' service helpers);
# the services run from .venv-cloud and .venv-ironic. Native threads: it
# imports Nova's functional package and needs no eventlet.
export OS_NOVA_DISABLE_EVENTLET_PATCHING=true
exec .venv/bin/python -m tests.functional.cloud "$@"
