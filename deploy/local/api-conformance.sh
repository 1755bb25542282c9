#!/usr/bin/env bash
# Every service's OpenAPI document checked by schemathesis against the running service: starts the
# local stack and the services (debug builds unless BUILD_CONFIG says otherwise) when they are not
# running, then runs api-conformance.py (every check, every phase; any finding fails).
#
#   deploy/local/api-conformance.sh [SERVICE ...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
"$here/python-env.sh"
"$here/stack.sh" start >/dev/null
# Started here (not already running), the gateway gets a per-device rate limit the run cannot
# exhaust: one device sends every request, and a 429 in place of the answer under test is no test.
RATE_LIMIT_PER_SECOND="${RATE_LIMIT_PER_SECOND:-100000}" RATE_LIMIT_BURST="${RATE_LIMIT_BURST:-100000}" \
    "$here/services.sh" start >/dev/null
"$here/admin-key.sh" "API conformance run"
exec "$ROOT/.local/venv/bin/python" "$here/api-conformance.py" "$ROOT" "$@"
