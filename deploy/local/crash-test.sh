#!/usr/bin/env bash
# The crash test of the no-loss contract (issue 5): under a steady load of keyed events, kill -9
# the gateway, the policy service and the merger in turn, restart each, let the clients retry per
# the contract, then prove that PostgreSQL holds exactly the set of events the clients sent: zero
# lost, zero duplicated. Exit 0 only then.
#
#   deploy/local/crash-test.sh              # DURATION=90 RATE=60 DEVICES=60 BUILD_CONFIG=debug
#
# Starts the local stack and the services itself (stack.sh, services.sh); leaves them running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

DURATION="${DURATION:-90}"
RATE="${RATE:-60}"
DEVICES="${DEVICES:-60}"
BUILD_CONFIG="${BUILD_CONFIG:-debug}"
export BUILD_CONFIG
# When each service dies, in seconds after the load starts (gateway, policy, merger).
KILL_AT=(${KILL_AT:-15 35 55})
DOWN_FOR="${DOWN_FOR:-3}"

"$here/stack.sh" start
echo "==> swift build -c $BUILD_CONFIG (services and the load client)"
for product in beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator PipelineLoad; do
    swift build -c "$BUILD_CONFIG" --product "$product"
done
bin="$(swift build -c "$BUILD_CONFIG" --show-bin-path)"
"$here/services.sh" start
DEVICE_TOKEN_KEYS="$(cat "$RUN_DIR/secrets/device-token-keys")"
export DEVICE_TOKEN_KEYS

report="$RUN_DIR/crash-test-report.json"
echo "==> load: $RATE events/s from $DEVICES devices for $DURATION s; kills at ${KILL_AT[*]} s"
"$bin/PipelineLoad" --gateway "http://127.0.0.1:$GATEWAY_PORT" --devices "$DEVICES" --rate "$RATE" \
    --duration "$DURATION" --report "$report" &
load_pid=$!

# The load spends a few seconds enrolling its devices; the clock starts when it starts sending.
started=""
for _ in $(seq 1 600); do
    if ! kill -0 "$load_pid" 2>/dev/null; then break; fi
    sleep 0.2
    # The registry has published the fleet once its outbox is empty; give the load that long.
    if [[ -z "$started" ]]; then
        pending="$(PGPASSWORD="$PGPASSWORD" psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PGDATABASE" -Atc \
            "SELECT count(*) FROM registry.change_outbox WHERE published_at IS NULL" 2>/dev/null || echo 1)"
        [[ "$pending" == 0 ]] && started=$SECONDS && break
    fi
done
t0=$((started + 5))
victims=(ingest-gateway policy-service session-merger)
for i in 0 1 2; do
    target=$((t0 + KILL_AT[i]))
    while ((SECONDS < target)) && kill -0 "$load_pid" 2>/dev/null; do sleep 0.2; done
    echo "==> t+$((SECONDS - t0))s: kill -9 ${victims[i]}"
    "$here/services.sh" kill9 "${victims[i]}"
    sleep "$DOWN_FOR"
    "$here/services.sh" start "${victims[i]}"
done

set +e
wait "$load_pid"
rc=$?
set -e
echo "==> report: $report"
if ((rc == 0)); then
    echo "CRASH TEST PASSED: every event the clients sent is in PostgreSQL exactly once"
else
    echo "CRASH TEST FAILED (exit $rc): see the report above and $RUN_DIR/services/*.log"
fi
exit "$rc"
