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
# The main job on an embedded default: set up (first run only), then tell
# what the project does in six acts (tests/functional/demo/), each checked,
# on Nova's in-process harness, a real Ironic on loopback and, when
# installed, a private RabbitMQ. Arguments go to python -m
# tests.functional.demo (--act N, --servers N, --verbose).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
export OS_WSGI__API_PASTE_CONFIG="$PWD/.venv/etc/nova/api-paste.ini"
# -W ignore: Nova's harness warns on import (eventlet), before the demo can
# silence it; the warning is for developers, not for this screen.
exec .venv/bin/python -W ignore -m tests.functional.demo "$@"
