#!/usr/bin/env bash
# Validates docker-compose.yml without a container engine: the Compose Specification schema, and
# that it matches the code (commands are real products, environment variables are read by the
# code, images pinned, Dockerfile targets exist). Python deps live in a project-local venv.
#
#   deploy/compose/check.sh [--install-only]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
root="$(cd "$here/../.." && pwd -P)"
venv="$root/.local/venv"
if ! "$venv/bin/python" -c 'import jsonschema, yaml' >/dev/null 2>&1; then
    echo "==> installing jsonschema and PyYAML into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check jsonschema pyyaml
fi
# promtool checks the Prometheus configuration, the alert rules and the dashboards' queries.
if [[ -z "${PROMTOOL:-}" && ! -x "$root/.local/promtool/bin/promtool" ]]; then
    "$root/deploy/local/install.sh" promtool
fi
[[ "${1:-}" == "--install-only" ]] && exit 0
exec "$venv/bin/python" "$here/check.py" "$root"
