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
# Make the virtualenvs the tests and the demo need; quick when they exist.
#   .venv          this project, the newest supported Nova (34) and placement
#   .venv-novaNN   the same on an older supported Nova (--release NN)
#   .venv-ironic   Ironic, run as a real server by the tests and the cloud
#                  (always newest; PyMySQL for the cloud's MariaDB)
# Versions are pinned by tools/constraints-novaNN.txt (tools/constraints.txt
# is Nova 34's) and tools/ironic-constraints.txt, like OpenStack's
# upper-constraints; doc/source/install.rst says how they were built.
# .venv also gets the docs' tools (doc/requirements.txt: Sphinx, pinned by
# tools/constraints.txt), so tools/run-tests.sh can build the docs.
#   --release NN      also (or only) the venv for Nova NN (31 to 34)
#   --all-releases    every supported release's venv
#   --ironic-only     only .venv-ironic (tox's functional envs bring their own)
# Prints nothing on success unless it installs something.
set -euo pipefail
cd "$(dirname "$0")/.."

# The supported Nova majors, oldest first; the last is the newest (.venv).
RELEASES="31 32 33 34"
NEWEST=34

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))'; then
    echo "setup: $PYTHON is $("$PYTHON" -V 2>&1); Python 3.11 or 3.12 is needed (Nova 34 needs 3.11)" >&2
    exit 2
fi

releases=$NEWEST
ironic_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --release)
            [ $# -ge 2 ] || { echo "setup: --release needs a Nova major, one of: $RELEASES" >&2; exit 2; }
            case " $RELEASES " in
                *" $2 "*) releases=$2 ;;
                *) echo "setup: Nova $2 is not supported; one of: $RELEASES" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --all-releases) releases=$RELEASES; shift ;;
        --ironic-only) ironic_only=1; shift ;;
        *) echo "setup: unknown argument $1 (--release NN, --all-releases, --ironic-only)" >&2; exit 2 ;;
    esac
done

stamp() { cat "$@" | sha256sum | cut -d' ' -f1; }

# The installer. uv installs the same pinned sets as pip, with parallel
# downloads and no bytecode compiled ahead (see quiet_pip): CI builds six
# venvs, and pip took 95 to 143 s for each. It comes from PyPI into .venv-uv, once;
# if that fails, pip does the work as before (NDF_INSTALLER=pip forces it).
UV_PIN="uv==0.13.9"
UV=""
if [ "${NDF_INSTALLER:-uv}" = uv ]; then
    if [ ! -x .venv-uv/bin/uv ]; then
        { "$PYTHON" -m venv .venv-uv &&
          .venv-uv/bin/pip install --disable-pip-version-check -q "$UV_PIN"; } > /dev/null 2>&1 ||
            echo "setup: could not install $UV_PIN from PyPI; using pip" >&2
    fi
    [ -x .venv-uv/bin/uv ] && UV=$PWD/.venv-uv/bin/uv
fi

# quiet_pip VENV ARGS...: pip's arguments, installed into VENV by uv (or
# pip) with their chatter (and the warnings of this machine's pip
# configuration) in VENV/pip.log; on failure, the tail of that log and
# where to read the rest. uv compiles no bytecode: that was most of an
# install (a venv's whole tree, Nova's thousands of test modules
# included), and Python compiles what is imported, once, on first use
# (tools/run-tests.sh keeps it all under .pycache/).
quiet_pip() {
    local venv=$1 ok=0
    shift
    if [ -n "$UV" ]; then
        [ "$*" = "-U pip" ] && return 0  # uv needs no newer pip in the venv
        "$UV" pip install --python "$venv/bin/python" "$@" >> "$venv/pip.log" 2>&1 || ok=$?
    else
        "$venv/bin/pip" install --disable-pip-version-check "$@" >> "$venv/pip.log" 2>&1 || ok=$?
    fi
    if [ $ok -ne 0 ]; then
        echo "setup: ${UV:+uv }pip failed in $venv; the last lines of $venv/pip.log:" >&2
        grep -v "^WARNING: Location" "$venv/pip.log" | tail -n 30 >&2
        exit 1
    fi
}

# venv_for NN: the directory of Nova NN's venv.
venv_for() { if [ "$1" = "$NEWEST" ]; then echo .venv; else echo ".venv-nova$1"; fi; }

install_release() {
    local release=$1 venv constraints main_stamp what=requirements
    local reqs=(requirements.txt test-requirements.txt)
    venv=$(venv_for "$release")
    constraints=tools/constraints-nova$release.txt
    # Only the newest release's constraints pin the docs' tools.
    if [ "$release" = "$NEWEST" ]; then
        reqs+=(doc/requirements.txt)
        what="requirements and the docs' tools"
    fi
    main_stamp=$(stamp "${reqs[@]}" "$constraints" setup.cfg)
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.ndf-stamp" 2>/dev/null)" = "$main_stamp" ]; then
        return 0
    fi
    echo "setup: $venv: Nova $release, placement and this project (pip's output: $venv/pip.log)" >&2
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
    echo "setup:   pip itself" >&2
    quiet_pip "$venv" -U pip
    echo "setup:   $what, pinned by $constraints" >&2
    quiet_pip "$venv" -c "$constraints" "${reqs[@]/#/--requirement=}"
    echo "setup:   this project (editable)" >&2
    quiet_pip "$venv" --no-deps -e .
    echo "$main_stamp" > "$venv/.ndf-stamp"
}

if [ $ironic_only -eq 0 ]; then
    for release in $releases; do install_release "$release"; done
fi

ironic_stamp=$(stamp tools/ironic-constraints.txt)
if [ ! -x .venv-ironic/bin/ironic ] || [ "$(cat .venv-ironic/.ndf-stamp 2>/dev/null)" != "$ironic_stamp" ]; then
    echo "setup: .venv-ironic: Ironic (pip's output: .venv-ironic/pip.log)" >&2
    [ -x .venv-ironic/bin/python ] || "$PYTHON" -m venv .venv-ironic
    quiet_pip .venv-ironic -U pip
    # PyMySQL: the cloud's Ironic keeps its database in MariaDB
    # (tools/cloud.sh); the functional tests' Ironic stays on SQLite.
    quiet_pip .venv-ironic -c tools/ironic-constraints.txt ironic PyMySQL
    echo "$ironic_stamp" > .venv-ironic/.ndf-stamp
fi

# Debian packages, installed when missing (as root, or with sudo that needs
# no password): the event-mode tests run a private RabbitMQ broker, as they
# run Ironic (tests/functional/services/rabbitmq_server.py); the docs draw
# the drain phase diagram (doc/source/drain.rst) with Graphviz's dot.
missing=()
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
command -v dot >/dev/null || missing+=(graphviz)
if [ ${#missing[@]} -gt 0 ]; then
    apt_install() { "$@" apt-get update -q >/dev/null && "$@" DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
    echo "setup: installing ${missing[*]} (Debian packages the tests and the docs need)..." >&2
    if [ "$(id -u)" = 0 ]; then apt_install env || true
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then apt_install sudo env || true
    fi
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || echo "setup: could not install rabbitmq-server; install Debian's rabbitmq-server package (apt-get install rabbitmq-server, as root): the event-mode tests start a private RabbitMQ broker from it" >&2
    command -v dot >/dev/null || echo "setup: could not install graphviz; install Debian's graphviz package (apt-get install graphviz, as root): the docs draw the drain phase diagram with its dot" >&2
fi
