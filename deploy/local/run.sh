#!/usr/bin/env bash
# The main job on the native local stack (no containers), in one command: install what is missing,
# start PostgreSQL and the broker, build, create the topics, apply the migrations, check the platform
# path with `attendancectl doctor`, start every service, then run the fleet simulator against them
# in real time for a minute and a half: it enrolls a fleet through the registry, its phones run
# PresenceKit through a morning rush (everyone arrives within the run), send what they detect under
# the no-loss contract and upload their telemetry, and it proves in PostgreSQL that every event
# arrived exactly once and that the status page's SLO is the run's. Prints the report's headline and
# where the HTML report and the status page are.
# `make stop` (deploy/local/services.sh stop; stack.sh stop) stops everything.
#
#   deploy/local/run.sh     # the simulator's defaults: 300 phones, 2 sites, 90s, seed 1
#   FLEET_DEVICES=1000 FLEET_SITES=4 FLEET_DURATION=3m FLEET_SEED=7 deploy/local/run.sh
#   # an SLO burning (phones offline longer than the 5-minute objective), for a look at the alerts:
#   FLEET_DURATION=10m FLEET_OFFLINE_SHARE=0.5 FLEET_OFFLINE_TIME=9m deploy/local/run.sh
#   FLEET_CONFIG=site-settings.json deploy/local/run.sh   # the sites' detection settings (see the README)
#   SKIP_BUILD=1 deploy/local/run.sh   # the binaries are built already (make test runs it so)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
caller_dir="$PWD"
cd "$ROOT"

# The fleet's shape: the simulator's own defaults unless one of these is set.
fleet_options=()
[[ -z "${FLEET_DEVICES:-}" ]] || fleet_options+=(--devices "$FLEET_DEVICES")
[[ -z "${FLEET_SITES:-}" ]] || fleet_options+=(--sites "$FLEET_SITES")
[[ -z "${FLEET_DURATION:-}" ]] || fleet_options+=(--duration "$FLEET_DURATION")
[[ -z "${FLEET_SEED:-}" ]] || fleet_options+=(--seed "$FLEET_SEED")
[[ -z "${FLEET_OFFLINE_SHARE:-}" ]] || fleet_options+=(--offline-share "$FLEET_OFFLINE_SHARE")
[[ -z "${FLEET_OFFLINE_TIME:-}" ]] || fleet_options+=(--offline-time "$FLEET_OFFLINE_TIME")
# A remote-config document set as the fleet's sites' detection settings through the registry; every
# phone fetches its site's with its own token (the library's defaults without one).
if [[ -n "${FLEET_CONFIG:-}" ]]; then
    [[ "$FLEET_CONFIG" == /* ]] || FLEET_CONFIG="$caller_dir/$FLEET_CONFIG"   # relative to where run.sh was called
    fleet_options+=(--config "$FLEET_CONFIG")
fi
FLEET_REPORT_DIR="${FLEET_REPORT_DIR:-$RUN_DIR/fleet-report}"
# An earlier run's report goes first, so that a run that fails before its own never leaves one behind
# that reads as this run's.
rm -rf "$FLEET_REPORT_DIR"

"$here/stack.sh" start
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
    for product in attendancectl beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator fleet-simulator; do
        echo "==> swift build --product $product"
        swift build --product "$product"
    done
fi
bin="$(swift build --show-bin-path)"

echo "==> attendancectl topics ensure"
"$bin/attendancectl" topics ensure
# Each service also applies its own at start; `<service> migrate` does it ahead, as an operator would.
for service in beacon-registry policy-service session-merger telemetry-aggregator; do
    echo "==> $service migrate"
    "$bin/$service" migrate
done
echo "==> attendancectl doctor"
"$bin/attendancectl" doctor

# Services a previous run left running are stopped first: they would go on serving its binaries.
echo "==> start the services"
"$here/services.sh" stop
"$here/services.sh" start

# The admin REST examples (README) need an admin key.
"$here/admin-key.sh" "local operator (make run)"

echo "==> fleet-simulator run ${fleet_options[*]}: a morning rush in real time"
fleet_status=0
"$bin/fleet-simulator" run --gateway "http://127.0.0.1:$GATEWAY_PORT" --telemetry "http://127.0.0.1:$TELEMETRY_PORT" \
    "${fleet_options[@]}" \
    --registry "http://127.0.0.1:$REGISTRY_PORT" --api-key-file "$RUN_DIR/secrets/admin-api-key" \
    --report-dir "$FLEET_REPORT_DIR" --no-progress || fleet_status=$?

echo
"$here/stack.sh" status
"$here/services.sh" status || true
cat <<INFO

Everything keeps running:
  gateway    http://127.0.0.1:$GATEWAY_PORT     device API
  policy     http://127.0.0.1:$POLICY_PORT     policy admin REST (/v1/admin/policies)
  merger     http://127.0.0.1:$MERGER_PORT     sessions, daily attendance, CSV (/v1/admin/...)
  registry   http://127.0.0.1:$REGISTRY_PORT     registry admin REST; admin API key: $RUN_DIR/secrets/admin-api-key
  telemetry  http://127.0.0.1:$TELEMETRY_PORT/    the SLO status page (JSON: /v1/slo)
  fleet report: $FLEET_REPORT_DIR/fleet-report.html (JSON: fleet-report.json beside it)
  service logs: $RUN_DIR/services/
Stop everything with: make stop
INFO
if ((fleet_status != 0)); then
    echo "run.sh: the fleet run FAILED (exit $fleet_status): events lost, duplicated or undelivered; see the report above" >&2
    exit "$fleet_status"
fi
