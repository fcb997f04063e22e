#!/usr/bin/env bash
# The main job on an embedded default: set up (first run only), then boot
# servers through Nova's real scheduler and placement with the drain filters
# and the pre-filter on, and report where they landed and what was excluded.
# Arguments go to tools/demo.py (e.g. --servers 12, --verbose).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
export OS_WSGI__API_PASTE_CONFIG="$PWD/.venv/etc/nova/api-paste.ini"
exec .venv/bin/python tools/demo.py "$@"
