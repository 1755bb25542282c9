#!/usr/bin/env bash
# Makes sure $RUN_DIR/secrets/admin-api-key holds an admin API key the running registry accepts.
# The registry writes its bootstrap key there only on a database that had no admin key
# (services.sh sets REGISTRY_BOOTSTRAP_KEY_PATH); otherwise one is minted straight in PostgreSQL
# (`attendancectl api-keys mint`, debug build unless BUILD_CONFIG says otherwise).
#
#   deploy/local/admin-key.sh [NAME]      NAME: the key's name when one is minted
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
key_file="$RUN_DIR/secrets/admin-api-key"
if [[ -s "$key_file" ]] && [[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$key_file")" \
        "http://127.0.0.1:$REGISTRY_PORT/v1/admin/organizations?limit=1")" == 200 ]]; then
    exit 0
fi
echo "==> no working admin API key in $key_file: attendancectl api-keys mint"
mkdir -p "$(dirname "$key_file")"
rm -f "$key_file"
bin="$(cd "$ROOT" && swift build -c "${BUILD_CONFIG:-debug}" --show-bin-path)"
"$bin/attendancectl" api-keys mint --name "${1:-local operator}" --secret-file "$key_file" >/dev/null
