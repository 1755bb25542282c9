#!/usr/bin/env bash
# The whole test suite on the native local stack: installs what is missing, starts PostgreSQL and
# the broker, builds, and runs every test target (unit, mock-cluster, integration, compose check).
#
#   deploy/local/test.sh [extra `swift test` arguments, e.g. --filter KafkaClientTests]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

"$here/stack.sh" start
"$ROOT/deploy/compose/check.sh" --install-only

echo "==> swift build --build-tests"
swift build --build-tests
echo "==> swift test"
swift test --skip-build "$@"
