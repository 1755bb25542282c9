#!/usr/bin/env bash
# Runs docs/device-api.md: its `sh` blocks in order, as one script, against the running services
# (from an empty organization to a device's first accepted event), and checks what the document
# promises: the device receives its site's detection settings (and 304 for the configuration it holds),
# the check-in is 201 accepted and its replay is marked replayed.
#
#   deploy/local/device-api-walkthrough.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"
"$here/admin-key.sh" "device API walkthrough"
script="$(mktemp)"
output="$(mktemp)"
trap 'rm -f "$script" "$output"' EXIT
{
    echo 'set -euo pipefail'
    awk '/^```sh$/ { inside = 1; next } /^```$/ { inside = 0; next } inside { print }' docs/device-api.md
} >"$script"
echo "==> docs/device-api.md ($(grep -c '^```sh$' docs/device-api.md) blocks)"
if ! bash "$script" >"$output" 2>&1; then
    cat "$output"
    echo "device-api walkthrough: a command of docs/device-api.md failed" >&2
    exit 1
fi
cat "$output"
grep -q '"detectionConfig".*"enter_hold_ms":3000' "$output" || { echo "device-api walkthrough: the device did not receive its site's detection settings" >&2; exit 1; }
grep -q '^HTTP 304 with If-None-Match$' "$output" || { echo "device-api walkthrough: the configuration the device held was sent again (no 304)" >&2; exit 1; }
grep -q '"status":"accepted"' "$output" || { echo "device-api walkthrough: the check-in was not accepted" >&2; exit 1; }
grep -q '^HTTP 201$' "$output" || { echo "device-api walkthrough: the check-in was not 201" >&2; exit 1; }
grep -qi '^idempotent-replayed: true' "$output" || { echo "device-api walkthrough: the replay was not marked" >&2; exit 1; }
echo "==> docs/device-api.md: every command ran; the first check-in was accepted and its replay answered from the record"
