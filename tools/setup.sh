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
# Make the two virtualenvs the tests and the demo need; quick when they exist.
#   .venv         this project, Nova 34 (its functional harness), placement
#   .venv-ironic  Ironic, run as a real server by the tests
# Versions are pinned by tools/constraints.txt and tools/ironic-constraints.txt
# (the sets this project was tested with), like OpenStack's upper-constraints.
# --ironic-only: only .venv-ironic (tox's functional env brings its own venv).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))'; then
    echo "setup: $PYTHON is $("$PYTHON" -V 2>&1); Python 3.10 to 3.12 is needed" >&2
    exit 2
fi

stamp() { cat "$@" | sha256sum | cut -d' ' -f1; }

main_stamp=$(stamp requirements.txt test-requirements.txt tools/constraints.txt setup.cfg)
if [ "${1:-}" != "--ironic-only" ] && { [ ! -x .venv/bin/python ] || [ "$(cat .venv/.ndf-stamp 2>/dev/null)" != "$main_stamp" ]; }; then
    echo "setup: installing .venv (Nova, placement, this project)..." >&2
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -U pip
    .venv/bin/pip install -q --disable-pip-version-check -c tools/constraints.txt \
        -r requirements.txt -r test-requirements.txt
    .venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
    echo "$main_stamp" > .venv/.ndf-stamp
fi

ironic_stamp=$(stamp tools/ironic-constraints.txt)
if [ ! -x .venv-ironic/bin/ironic ] || [ "$(cat .venv-ironic/.ndf-stamp 2>/dev/null)" != "$ironic_stamp" ]; then
    echo "setup: installing .venv-ironic (Ironic)..." >&2
    [ -x .venv-ironic/bin/python ] || "$PYTHON" -m venv .venv-ironic
    .venv-ironic/bin/pip install -q --disable-pip-version-check -U pip
    .venv-ironic/bin/pip install -q --disable-pip-version-check \
        -c tools/ironic-constraints.txt ironic
    echo "$ironic_stamp" > .venv-ironic/.ndf-stamp
fi

# The event-mode tests run a private RabbitMQ broker, as they run Ironic
# (tests/functional/services/rabbitmq_server.py); Debian's package has it.
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    apt_install() { "$@" apt-get update -q >/dev/null && "$@" DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server >/dev/null; }
    echo "setup: installing rabbitmq-server (a private broker for the event-mode tests)..." >&2
    if [ "$(id -u)" = 0 ]; then apt_install env || true
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then apt_install sudo env || true
    fi
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || echo "setup: could not install rabbitmq-server; install Debian's rabbitmq-server package (apt-get install rabbitmq-server, as root): the event-mode tests start a private RabbitMQ broker from it" >&2
fi
