#!/usr/bin/env bash
# The whole test suite on the native local stack: installs what is missing, starts PostgreSQL and
# the broker, builds, and runs every test target (unit, mock-cluster, integration, compose check),
# then the end-to-end targets one at a time (the pipeline's, then the fleet simulator's): they start
# the services as processes (services.sh), which must not share the merger's tables with the
# merger's own tests, and stop them afterwards. Last, schemathesis checks every service's OpenAPI
# document against the running service (api-conformance.sh).
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
echo "==> swift test (every target but the fleet simulator's and the end-to-end ones)"
swift test --skip-build --skip PipelineEndToEndTests --skip FleetEndToEndTests --skip FleetSimulatorTests
# The simulator's scenarios keep both cores busy on the cooperative pool for a minute; beside the
# other targets they starved the timing of the gateway's and policy's tests.
echo "==> swift test --filter FleetSimulatorTests"
swift test --skip-build --filter FleetSimulatorTests
trap '"$here/services.sh" stop >/dev/null 2>&1 || true' EXIT
# The fleet's demo first: PipelineEndToEndTests restarts the broker under the services, and after that
# the broker may hold the telemetry aggregator's consumer group in a rebalance for minutes (the demo
# asserts the status page's numbers, so it needs the aggregator consuming at once).
echo "==> swift test --filter FleetEndToEndTests (make run's demo against the services)"
swift test --skip-build --filter FleetEndToEndTests
echo "==> swift test --filter PipelineEndToEndTests (services as processes)"
swift test --skip-build --filter PipelineEndToEndTests
echo "==> schemathesis against every service's OpenAPI document (deploy/local/api-conformance.sh)"
# Restarted by it with a per-device rate limit the run cannot exhaust.
"$here/services.sh" stop >/dev/null
"$here/api-conformance.sh"
echo "==> docs/device-api.md, command by command, against the services"
"$here/device-api-walkthrough.sh"
