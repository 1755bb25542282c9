#!/usr/bin/env bash
# The whole test suite on the native local stack: installs what is missing, starts PostgreSQL and
# the broker, builds, and runs every test target (unit, mock-cluster, integration, compose check),
# then the pipeline's end-to-end target on its own: it starts the registry, policy, merger and
# gateway as processes (services.sh), which must not share the merger's tables with the merger's
# own tests, and stops them afterwards.
#
#   deploy/local/test.sh [extra `swift test` arguments, e.g. --filter KafkaClientTests]
#   (with arguments, only that one `swift test` run is made)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
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
echo "==> swift test (every target but the end-to-end one)"
swift test --skip-build --skip PipelineEndToEndTests
echo "==> swift test --filter PipelineEndToEndTests (services as processes)"
trap '"$here/services.sh" stop >/dev/null 2>&1 || true' EXIT
swift test --skip-build --filter PipelineEndToEndTests
