#!/usr/bin/env bash
# The whole test suite on the native local stack: installs what is missing, starts PostgreSQL and
# the broker, builds, checks the code style, and runs every test target (unit, mock-cluster,
# integration, compose check), the fleet simulator's, then the pipeline's end-to-end target, which
# starts the services as processes (services.sh); then schemathesis checks every service's OpenAPI
# document against the running service (api-conformance.sh) and docs/device-api.md is run. The
# fleet's end-to-end demo runs beside all of that on a stack of its own.
#
#   deploy/local/test.sh [extra `swift test` arguments, e.g. --filter KafkaClientTests]
#   (with arguments, only that one `swift test` run is made)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# The suite's own stack: its own PostgreSQL cluster, broker, service ports and run folder
# (.local/test-run), so a stack `make run` left running is neither read nor disturbed (env.sh).
export ATTENDANCE_STACK=test
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

"$here/stack.sh" start
"$ROOT/deploy/compose/check.sh" --install-only
# Headless Chromium for the telemetry status-page test (Debian package; skipped when present).
"$here/install.sh" chromium

echo "==> swift build --build-tests"
swift build --build-tests
if (($# > 0)); then
    echo "==> swift test $*"
    swift test --skip-build "$@"
    exit
fi
echo "==> swift format lint (the style in .swift-format; \`make format\` applies it)"
swift format lint --strict --recursive --parallel Services Shared Tests Package.swift
# The fleet's demo (about three minutes, mostly real time) runs beside everything else, on a stack of
# its own (ATTENDANCE_STACK=e2e: its own PostgreSQL, broker, ports and run folder): nothing the other
# runs do (PipelineEndToEndTests restarts its broker, schemathesis writes to its registry) reaches it.
# The test runner itself is started, not `swift test`: SwiftPM lets one instance at a time use .build.
fleet_log="$LOCAL/fleet-end-to-end.log"
echo "==> FleetEndToEndTests (make run's demo against the services), on its own stack beside the runs below; output at the end"
(
    export ATTENDANCE_STACK=e2e
    # shellcheck source=deploy/local/env.sh
    source "$here/env.sh"
    "$here/stack.sh" start >/dev/null
    "$(swift build --show-bin-path)/beacon-attendancePackageTests.xctest" --testing-library swift-testing --filter FleetEndToEndTests
) >"$fleet_log" 2>&1 &
fleet_pid=$!
trap 'kill "$fleet_pid" 2>/dev/null || true; ATTENDANCE_STACK=e2e "$here/services.sh" stop >/dev/null 2>&1 || true; "$here/services.sh" stop >/dev/null 2>&1 || true' EXIT

echo "==> swift test (every target but the fleet simulator's and the end-to-end ones)"
swift test --skip-build --skip PipelineEndToEndTests --skip FleetEndToEndTests --skip FleetSimulatorTests
# The simulator's scenarios keep both cores busy; beside the other targets they starved the timing of
# the gateway's and policy's tests.
echo "==> swift test --filter FleetSimulatorTests"
swift test --skip-build --filter FleetSimulatorTests
echo "==> swift test --filter PipelineEndToEndTests (services as processes)"
swift test --skip-build --filter PipelineEndToEndTests
echo "==> schemathesis against every service's OpenAPI document (deploy/local/api-conformance.sh)"
# Restarted by it with a per-device rate limit the run cannot exhaust.
"$here/services.sh" stop >/dev/null
"$here/api-conformance.sh"
echo "==> docs/device-api.md, command by command, against the services"
"$here/device-api-walkthrough.sh"
"$here/services.sh" stop >/dev/null

echo "==> FleetEndToEndTests (its output, from $fleet_log)"
fleet_status=0
wait "$fleet_pid" || fleet_status=$?
cat "$fleet_log"
exit "$fleet_status"
