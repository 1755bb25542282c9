#!/usr/bin/env bash
# The crash test of the no-loss contract, scaled out. Two instances each of the policy service, the
# merger and the gateway (SCALE) on six partitions per topic, one registry and one telemetry
# aggregator, every one under its supervisor (services.sh). A steady load of keyed events from
# enrolled devices, each device with a home gateway and failing over to the other (as behind a load
# balancer). Then, one after another, each fault, and the time until the whole stack answers ready
# again, with no hand on the keyboard:
#
#   gateway, policy, merger    kill -9 of the first instance (its supervisor restarts it)
#   registry, telemetry        kill -9 (restarted by the supervisor)
#   postgres                   kill -9 of the postmaster, started again DOWN_FOR s later (as its
#                              own supervisor would); the services wait for it
#   broker                     restart of the broker, which forgets every topic, group, offset and
#                              producer id: each service says so in one log line and exits, its
#                              supervisor starts it afresh
#
# Last, the proof: PostgreSQL holds exactly the events the clients sent (0 lost, 0 duplicated),
# each device's accepted events make one session, and every gateway answered its own devices.
#
#   deploy/local/crash-test.sh     # DURATION=180 RATE=40 DEVICES=40 SCALE=2 BUILD_CONFIG=debug
#   FAULTS="merger broker" deploy/local/crash-test.sh
#
# It empties the local broker first (so that the topics get six partitions) and leaves the stack
# and the services running, scaled out.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

DURATION="${DURATION:-180}"
RATE="${RATE:-40}"
DEVICES="${DEVICES:-40}"
SCALE="${SCALE:-2}"
BUILD_CONFIG="${BUILD_CONFIG:-debug}"
FAULTS=(${FAULTS:-gateway policy merger registry telemetry postgres broker})
FIRST_FAULT_AT="${FIRST_FAULT_AT:-10}"   # seconds after the load starts sending
FAULT_GAP="${FAULT_GAP:-8}"              # seconds of steady load between a heal and the next fault
DOWN_FOR="${DOWN_FOR:-5}"                # seconds PostgreSQL stays down
HEAL_TIMEOUT="${HEAL_TIMEOUT:-180}"
export BUILD_CONFIG TOPIC_PARTITIONS="${TOPIC_PARTITIONS:-6}"

services() { "$here/services.sh" "$@"; }
now_ms() { date +%s%3N; }

"$here/stack.sh" start
echo "==> swift build -c $BUILD_CONFIG (services and the load client)"
for product in attendancectl beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator PipelineLoad; do
    swift build -c "$BUILD_CONFIG" --product "$product"
done
bin="$(swift build -c "$BUILD_CONFIG" --show-bin-path)"

instances=(beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator)
gateways=("http://127.0.0.1:$GATEWAY_PORT")
for ((n = 2; n <= SCALE; n++)); do
    instances+=("policy-service@$n" "session-merger@$n" "ingest-gateway@$n")
    gateways+=("http://127.0.0.1:$((GATEWAY_PORT + 100 * (n - 1)))")
done
echo "==> an empty broker, then ${instances[*]} (TOPIC_PARTITIONS=$TOPIC_PARTITIONS)"
services stop >/dev/null
"$here/stack.sh" restart-broker
services start "${instances[@]}"
DEVICE_TOKEN_KEYS="$(cat "$RUN_DIR/secrets/device-token-keys")"
export DEVICE_TOKEN_KEYS

# Only what the services log from here on is this run's (the logs keep earlier runs).
declare -A log_start=()
for name in "${instances[@]}"; do log_start[$name]="$(stat -c %s "$RUN_DIR/services/$name.log" 2>/dev/null || echo 0)"; done
report="$RUN_DIR/crash-test-report.json"
heal_report="$RUN_DIR/crash-test-heal.txt"
: >"$heal_report"
gateway_list="$(IFS=,; echo "${gateways[*]}")"
echo "==> load: $RATE events/s from $DEVICES devices for $DURATION s over $gateway_list; faults: ${FAULTS[*]}"
started_file="$RUN_DIR/crash-test-sending"
rm -f "$started_file"
"$bin/PipelineLoad" --gateway "$gateway_list" --devices "$DEVICES" --rate "$RATE" --duration "$DURATION" --report "$report" \
    --started-file "$started_file" &
load_pid=$!
trap 'kill "$load_pid" 2>/dev/null || true' EXIT

# The load spends a few seconds enrolling its devices; its clock starts when it says sending began.
for _ in $(seq 1 1200); do
    [[ -e "$started_file" ]] && break
    kill -0 "$load_pid" 2>/dev/null || { echo "crash test: the load ended before sending" >&2; exit 3; }
    sleep 0.1
done
[[ -e "$started_file" ]] || { echo "crash test: the load did not start sending within 120 s" >&2; exit 3; }
load_started=$SECONDS
sleep "$FIRST_FAULT_AT"

pid_of() { cat "$RUN_DIR/services/$1.pid" 2>/dev/null || echo none; }

# wait_replaced NAME OLD_PID: until NAME runs as a process other than OLD_PID.
wait_replaced() {
    local deadline=$((SECONDS + HEAL_TIMEOUT)) pid
    while ((SECONDS < deadline)); do
        pid="$(pid_of "$1")"
        [[ "$pid" != "$2" && "$pid" != none ]] && kill -0 "$pid" 2>/dev/null && return 0
        sleep 0.2
    done
    echo "crash test: $1 was not restarted within ${HEAL_TIMEOUT}s" >&2
    return 1
}

victim_of() {
    case "$1" in
        gateway) echo ingest-gateway ;;
        policy) echo policy-service ;;
        merger) echo session-merger ;;
        registry) echo beacon-registry ;;
        telemetry) echo telemetry-aggregator ;;
    esac
}

# A fault must strike while the load is sending, or the run proves nothing about it.
missed_faults=()
for fault in "${FAULTS[@]}"; do
    at=$((SECONDS - load_started))
    if ! kill -0 "$load_pid" 2>/dev/null || ((at >= DURATION - 5)); then
        echo "crash test: the $fault fault would come at t+${at}s, after the load's last events: raise DURATION (now $DURATION)" >&2
        missed_faults+=("$fault")
        continue
    fi
    started="$(now_ms)"
    case "$fault" in
        gateway | policy | merger | registry | telemetry)
            victim="$(victim_of "$fault")"
            old="$(pid_of "$victim")"
            echo "==> t+${at}s: kill -9 $victim (pid $old)"
            services kill9 "$victim"
            wait_replaced "$victim" "$old"
            ;;
        postgres)
            echo "==> t+${at}s: kill -9 PostgreSQL's postmaster; started again in ${DOWN_FOR}s"
            "$here/stack.sh" kill9-postgres
            sleep "$DOWN_FOR"
            SKIP_INSTALL=1 "$here/stack.sh" start >/dev/null
            ;;
        broker)
            declare -A before=()
            for name in "${instances[@]}"; do before[$name]="$(pid_of "$name")"; done
            echo "==> t+${at}s: restart the broker (it forgets every topic, group, offset and producer id)"
            "$here/stack.sh" restart-broker >/dev/null
            for name in "${instances[@]}"; do wait_replaced "$name" "${before[$name]}"; done
            ;;
        *) echo "crash test: unknown fault '$fault' (gateway policy merger registry telemetry postgres broker)" >&2; exit 2 ;;
    esac
    services wait-ready "${instances[@]}" >/dev/null
    healed="$(now_ms)"
    line="$(printf '%-10s healed in %6.1f s (from the fault until every instance answered ready)' "$fault" "$(((healed - started)))e-3")"
    echo "    $line"
    echo "$line" >>"$heal_report"
    sleep "$FAULT_GAP"
done

set +e
wait "$load_pid"
rc=$?
set -e
if ((${#missed_faults[@]} > 0)) && ((rc == 0)); then
    echo "crash test: faults not injected under load: ${missed_faults[*]}" >&2
    rc=3
fi
trap - EXIT
echo "==> this run's exits, as the services and their supervisors logged them:"
for name in "${instances[@]}"; do
    tail -c +"$((log_start[$name] + 1))" "$RUN_DIR/services/$name.log" |
        { grep -E "broker state lost|exited with status" || true; } | sed -E 's/^.*"msg":"([^"]*)".*$/\1/' | cut -c1-200 |
        sed "s/^/    $name: /"
done
echo "==> heal times ($heal_report):"
cat "$heal_report"
echo "==> report: $report"
if ((rc == 0)); then
    echo "CRASH TEST PASSED: every event the clients sent is in PostgreSQL exactly once, each device's events make one session"
else
    echo "CRASH TEST FAILED (exit $rc): see the report above and $RUN_DIR/services/*.log"
fi
exit "$rc"
