#!/usr/bin/env bash
# The main job on the native local stack (no containers): install what is missing, start
# PostgreSQL and the broker, build, create the platform's topics, apply the services' migrations
# and check the whole path with
# `attendancectl doctor` (broker, topics, an idempotent produce read back by offset, PostgreSQL).
#
#   deploy/local/run.sh          # then: make stop
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
cd "$ROOT"

"$here/stack.sh" start
echo "==> swift build --product attendancectl"
swift build --product attendancectl
bin="$(swift build --show-bin-path)/attendancectl"

echo "==> attendancectl topics ensure"
"$bin" topics ensure
echo "==> attendancectl migrate"
"$bin" migrate
echo "==> attendancectl doctor"
"$bin" doctor
echo
"$here/stack.sh" status
echo
echo "The local stack keeps running; stop it with: make stop"
