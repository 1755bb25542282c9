#!/usr/bin/env bash
# The main job on the native local stack (no containers): install what is missing, start
# PostgreSQL and the broker, build, create the topics, apply the migrations, check the platform
# path with `attendancectl doctor`, start every service (registry, policy, merger, gateway), enroll
# a fleet of devices through the registry and send it a keyed load under the no-loss contract, then
# prove in PostgreSQL that every event arrived exactly once.
#
#   deploy/local/run.sh          # LOAD_SECONDS=30 LOAD_RATE=50 LOAD_DEVICES=50; then: make stop
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

LOAD_SECONDS="${LOAD_SECONDS:-30}"
LOAD_RATE="${LOAD_RATE:-50}"
LOAD_DEVICES="${LOAD_DEVICES:-50}"

"$here/stack.sh" start
for product in attendancectl beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator PipelineLoad; do
    echo "==> swift build --product $product"
    swift build --product "$product"
done
bin="$(swift build --show-bin-path)"

echo "==> attendancectl topics ensure"
"$bin/attendancectl" topics ensure
echo "==> attendancectl migrate"
"$bin/attendancectl" migrate
echo "==> attendancectl doctor"
"$bin/attendancectl" doctor

echo "==> start the services"
"$here/services.sh" start
DEVICE_TOKEN_KEYS="$(cat "$RUN_DIR/secrets/device-token-keys")"
export DEVICE_TOKEN_KEYS

echo "==> load: $LOAD_RATE events/s from $LOAD_DEVICES enrolled devices for $LOAD_SECONDS s, then the proof in PostgreSQL"
"$bin/PipelineLoad" --gateway "http://127.0.0.1:$GATEWAY_PORT" --devices "$LOAD_DEVICES" --rate "$LOAD_RATE" \
    --duration "$LOAD_SECONDS" --report "$RUN_DIR/load-report.json"

echo
"$here/stack.sh" status
"$here/services.sh" status
cat <<INFO

Everything keeps running:
  gateway   http://127.0.0.1:$GATEWAY_PORT   (device API)
  registry  http://127.0.0.1:$REGISTRY_PORT  (admin REST; the bootstrap admin key is in $RUN_DIR/secrets/admin-api-key
            when this database had no admin key before: REGISTRY_BOOTSTRAP only ever creates the first one)
  merger    http://127.0.0.1:$MERGER_PORT    (sessions, daily attendance, CSV)
  policy    http://127.0.0.1:$POLICY_PORT    (health, metrics)
  load report: $RUN_DIR/load-report.json    service logs: $RUN_DIR/services/
Stop everything with: make stop
INFO
