#!/usr/bin/env bash
# The whole test suite on the native local stack: installs what is missing, checks the code style,
# starts PostgreSQL and the broker, builds, and runs every test target (unit, mock-cluster,
# integration, compose check), then the fleet simulator's beside the pipeline's end-to-end target,
# which starts the services as processes (services.sh). Beside all of that, on a stack of its own,
# `make run`'s main job (deploy/local/run.sh, started as soon as the services are built, while the
# tests build), schemathesis against the policy's document, FleetEndToEndTests on the run's report and
# status page, schemathesis against the other four services' documents (api-conformance.sh), and
# docs/device-api.md against the services.
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
# Each step's line carries the seconds since the suite started, so a slow step shows in CI's log.
step() { echo "==> [${SECONDS}s] $*"; }

step "what the build needs (install.sh: Debian packages, librdkafka, the broker)"
INSTALL_QUIET=1 "$here/install.sh"
# First, so that a style error stops the suite before it builds or starts anything (not for one
# `swift test` run with arguments).
if (($# == 0)); then
    step "swift format lint (the style in .swift-format; \`make format\` applies it)"
    swift format lint --strict --recursive --parallel Services Shared Tests Package.swift
fi
# CPU-light and mostly waiting on disk and network, so it runs beside the build: the suite's stack
# (and, for the whole suite, the e2e stack of the chain beside), the compose check's Python tools and
# promtool, headless Chromium for the telemetry status-page test (a Debian package; skipped when
# present).
prepare_log="$LOCAL/test-prepare.log"
(
    "$here/stack.sh" start
    # Services an interrupted earlier run left on this stack would drain the outboxes the tests read.
    "$here/services.sh" stop >/dev/null
    # A fresh (in-memory) broker for the whole suite: the tests' topics are their own, and a broker that
    # kept every earlier run's records answers more slowly with each (seen: produce reports missing
    # after a day of runs, gone after a restart).
    (($# > 0)) || "$here/stack.sh" restart-broker
    (($# > 0)) || (
        export ATTENDANCE_STACK=e2e
        # shellcheck source=deploy/local/env.sh
        source "$here/env.sh"
        "$here/stack.sh" start
        "$here/services.sh" stop >/dev/null
        # A fresh (in-memory) broker: a chain stopped midway (a failed build, Ctrl-C) can leave a
        # consumer group on it that no later member joins, and run.sh's services then wait forever.
        "$here/stack.sh" restart-broker
    )
    "$ROOT/deploy/compose/check.sh" --install-only
    "$here/install.sh" chromium
) >"$prepare_log" 2>&1 &
prepare_pid=$!

if (($# > 0)); then
    step "swift build --build-tests (beside it: the stack and the test tools, log $prepare_log)"
    swift build --build-tests
    wait "$prepare_pid" || { cat "$prepare_log"; exit 1; }
    step "swift test $*"
    swift test --skip-build "$@"
    exit
fi
step "swift build: the services, the CLI, the simulator, the benchmarks (beside it: the stacks and the test tools, log $prepare_log)"
# With C compiling through ccache (env.sh), the log says how many compiles its store served.
if [[ "${CC:-}" == */deploy/local/ccache-clang ]]; then
    export CCACHE_STATSLOG="$LOCAL/ccache-stats.log"
    rm -f "$CCACHE_STATSLOG"
fi
swift build
if [[ -n "${CCACHE_STATSLOG:-}" && -s "$CCACHE_STATSLOG" ]]; then
    echo "    C compiles served by ccache's store ($CCACHE_DIR): $(ccache --show-log-stats 2>/dev/null | sed -n 's/^ *Hits: *//p' | head -n 1)"
fi
if ! wait "$prepare_pid"; then
    cat "$prepare_log"
    echo "test.sh: starting the stacks or installing the test tools failed (above)" >&2
    exit 1
fi
# Two chains run side by side, each on a stack of its own, so the wall time is the longer one's:
# - ATTENDANCE_STACK=e2e: `make run`'s main job (run.sh with SKIP_BUILD=1; about two minutes, mostly
#   real time, so it runs while the tests build), schemathesis against the policy's OpenAPI document
#   on the services it left running, FleetEndToEndTests on its report and those services, then
#   schemathesis against the other four services' documents, two at a time (api-conformance.sh
#   restarts the services with a per-device rate limit the run cannot exhaust), then
#   docs/device-api.md against those services. Its output is printed at the end.
# - ATTENDANCE_STACK=test: the tests' build, then every other target, then the simulator's (CPU, no
#   stack) beside the pipeline's end-to-end target (mostly waiting on services; it restarts its broker
#   under them).
# Once built, the test bundle is started directly, not through `swift test`: SwiftPM lets one instance
# at a time use .build, and each `swift test --skip-build` spent about 4 s of CPU loading the package
# and running an empty XCTest pass before the tests.
tests_bundle="$(swift build --show-bin-path)/beacon-attendancePackageTests.xctest"
run_tests() {
    # Colours only on a terminal, as `swift test` has them.
    if [[ -t 1 ]]; then
        "$tests_bundle" --testing-library swift-testing "$@"
    else
        NO_COLOR=1 "$tests_bundle" --testing-library swift-testing "$@"
    fi
}
side_log="$LOCAL/e2e-chain.log"
tests_built="$LOCAL/tests-built"
rm -f "$tests_built"
# Job control gives the chain a process group of its own, so that stopping it early (a failure on this
# side, Ctrl-C) also stops the test runner and the scripts it started.
set -m
step "beside the runs below, on its own stack: make run's main job, FleetEndToEndTests, schemathesis, docs/device-api.md; output at the end"
(
    export ATTENDANCE_STACK=e2e
    # shellcheck source=deploy/local/env.sh
    source "$here/env.sh"
    status=0
    report_dir="$RUN_DIR/fleet-report"
    step "deploy/local/run.sh (make run's main job; SKIP_BUILD=1)"
    # A run that lost an event exits 1 after writing its report: FleetEndToEndTests says what.
    # The sites' detection settings go the operator's way (set through the registry, fetched by every
    # phone with its token); the document states shipped defaults, so the run's targets are the defaults'.
    export FLEET_CONFIG="$here/site-detection-settings.json"
    SKIP_BUILD=1 FLEET_REPORT_DIR="$report_dir" "$here/run.sh" || status=$?
    # While the tests build, on the services run.sh left running: the policy service's run changes
    # nothing FleetEndToEndTests reads (the report, the telemetry of the run's sites), and it needs no
    # gateway restarted with a higher rate limit.
    step "schemathesis: the policy's OpenAPI document (deploy/local/api-conformance.sh)"
    "$here/api-conformance.sh" policy-service || status=$?
    step "waiting for the tests' build"
    while [[ ! -e "$tests_built" ]]; do sleep 1; done
    step "FleetEndToEndTests (on run.sh's report and the services it left running)"
    FLEET_DEMO_REPORT="$report_dir/fleet-report.json" run_tests --filter FleetEndToEndTests || status=$?
    step "schemathesis: the registry's, the gateway's, the merger's and the telemetry's OpenAPI documents (deploy/local/api-conformance.sh)"
    "$here/services.sh" stop >/dev/null
    "$here/api-conformance.sh" beacon-registry ingest-gateway session-merger telemetry-aggregator || status=$?
    step "docs/device-api.md, command by command, against the services"
    "$here/device-api-walkthrough.sh" || status=$?
    step "the chain's end"
    "$here/services.sh" stop >/dev/null
    exit "$status"
) >"$side_log" 2>&1 &
side_pid=$!
set +m
trap 'kill -- -"$side_pid" 2>/dev/null || true; ATTENDANCE_STACK=e2e "$here/services.sh" stop >/dev/null 2>&1 || true; "$here/services.sh" stop >/dev/null 2>&1 || true' EXIT

step "swift build --build-tests"
swift build --build-tests
touch "$tests_built"
step "the tests: every target but the fleet simulator's and the end-to-end ones"
run_tests --skip PipelineEndToEndTests --skip FleetEndToEndTests --skip FleetSimulatorTests
# The simulator's scenarios keep both cores busy; beside the other targets they starved the timing of
# the gateway's and policy's tests. The pipeline's end-to-end tests mostly wait on the services they
# start, so the two run side by side, in two processes: in one, the simulator's synchronous scenarios
# held both threads of the test runner's pool and the pipeline's tests waited for them.
step "FleetSimulatorTests beside PipelineEndToEndTests (services as processes); the simulator's output follows"
simulator_log="$LOCAL/fleet-simulator-tests.log"
run_tests --filter FleetSimulatorTests >"$simulator_log" 2>&1 &
simulator_pid=$!
pipeline_status=0
run_tests --filter PipelineEndToEndTests || pipeline_status=$?
simulator_status=0
wait "$simulator_pid" || simulator_status=$?
cat "$simulator_log"
((pipeline_status == 0 && simulator_status == 0)) || exit 1
"$here/services.sh" stop >/dev/null

step "the chain beside (its output, from $side_log)"
side_status=0
wait "$side_pid" || side_status=$?
cat "$side_log"
exit "$side_status"
