#!/usr/bin/env bash
# Validates docker-compose.yml without a container engine: the Compose Specification schema, and
# that it matches the code (commands and options the built products take, environment variables the
# code reads, the local stack's ports and variables, images pinned, Dockerfile targets). Needs a build.
# Python deps live in the project-local venv (deploy/local/python-env.sh).
#
#   deploy/compose/check.sh [--install-only]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
root="$(cd "$here/../.." && pwd -P)"
venv="$root/.local/venv"
"$root/deploy/local/python-env.sh"
# promtool checks the Prometheus configuration, the alert rules and the dashboards' queries; amtool
# the Alertmanager configuration.
if [[ -z "${PROMTOOL:-}" && ! -x "$root/.local/promtool/bin/promtool" ]] || [[ -z "${AMTOOL:-}" && ! -x "$root/.local/promtool/bin/amtool" ]]; then
    "$root/deploy/local/install.sh" promtool
fi
[[ "${1:-}" == "--install-only" ]] && exit 0
exec "$venv/bin/python" "$here/check.py" "$root"
