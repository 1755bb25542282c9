# shellcheck shell=bash
# Environment of the native local stack (no containers).
#
#   source deploy/local/env.sh
#
# Sourced by install.sh and stack.sh, and by hand before `swift build` / `swift test`
# so that SwiftPM finds librdkafka through pkg-config and the services find the
# broker and the database. Every value below is only a default: anything already
# set in the environment wins. Safe to source any number of times (paths are only
# prepended once). Sets no shell options, so it can be sourced from an interactive shell.

# Repository root, derived from this file's location (deploy/local/env.sh).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
# Project-local prefix for installed tools and run folders (gitignored).
LOCAL="${LOCAL:-$ROOT/.local}"

# ATTENDANCE_STACK=test or e2e: the test suite's own stacks (deploy/local/test.sh sets them; `e2e` runs
# the fleet demo test beside the other targets). Each has its own folders, PostgreSQL cluster, broker
# and service ports, whatever the calling shell had set, so `make test` never reads, writes or stops a
# stack `make run` left running, nor one of its own runs another's.
_local_stack_profile() {
    RUN_DIR="$LOCAL/$1-run"
    PGPORT="$2"
    KAFKA_PORT="$3"
    GATEWAY_PORT=$(($4)) POLICY_PORT=$(($4 + 1)) MERGER_PORT=$(($4 + 2)) REGISTRY_PORT=$(($4 + 3)) TELEMETRY_PORT=$(($4 + 4))
    unset DATABASE_URL KAFKA_BROKERS PG_DIR TANSU_DIR SERVICES_DIR SECRETS_DIR
    export ATTENDANCE_STACK
}
case "${ATTENDANCE_STACK:-}" in
    # Below the kernel's ephemeral range (32768-60999 by default), so no outgoing connection holds them.
    test) _local_stack_profile test 26432 29092 18080 ;;
    e2e) _local_stack_profile e2e 27432 29192 28080 ;;
    "") ;;
    *) echo "env.sh: ATTENDANCE_STACK is test, e2e or unset, not '$ATTENDANCE_STACK'" >&2 ;;
esac
unset -f _local_stack_profile
RUN_DIR="${RUN_DIR:-$LOCAL/run}"
export ROOT LOCAL RUN_DIR

# PostgreSQL (our own cluster on loopback, see stack.sh).
export PGHOST="${PGHOST:-127.0.0.1}"
export PGPORT="${PGPORT:-55432}"
export PGUSER="${PGUSER:-attendance}"
export PGPASSWORD="${PGPASSWORD:-attendance}"
export PGDATABASE="${PGDATABASE:-attendance}"
# Built from the values above; user and password are used verbatim (no URL encoding),
# so keep them URL-safe or set DATABASE_URL yourself.
export DATABASE_URL="${DATABASE_URL:-postgres://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/$PGDATABASE}"

# Kafka-compatible broker (Tansu, loopback only).
export KAFKA_PORT="${KAFKA_PORT:-19092}"
export KAFKA_BROKERS="${KAFKA_BROKERS:-127.0.0.1:$KAFKA_PORT}"
# Tansu's differences from Apache Kafka that the clients work around (KafkaClient's BrokerQuirks).
export KAFKA_BROKER_QUIRKS="${KAFKA_BROKER_QUIRKS:-tansu}"
export TANSU_BIN="${TANSU_BIN:-$LOCAL/tansu/bin/tansu}"

# librdkafka 2.8 built from source (bookworm's 2.0.2 cannot talk to Tansu).
export RDKAFKA_PREFIX="${RDKAFKA_PREFIX:-$LOCAL/librdkafka}"
# Machine-wide cache of what every clone would otherwise build or install again: librdkafka trees
# (install.sh), the Python tools' venv (python-env.sh) and ccache's C objects (below). Empty: no cache.
export BUILD_CACHE_DIR="${BUILD_CACHE_DIR-${XDG_CACHE_HOME:-$HOME/.cache}/beacon-attendance}"

# _local_env_prepend VAR DIR: put DIR in front of the colon-separated list in VAR,
# unless it is already in it (keeps repeated sourcing idempotent).
_local_env_prepend() {
    local var="$1" dir="$2" cur
    cur="${!var:-}"
    case ":$cur:" in
        *":$dir:"*) ;;
        *) export "$var=$dir${cur:+:$cur}" ;;
    esac
}
_local_env_prepend PKG_CONFIG_PATH "$RDKAFKA_PREFIX/lib/pkgconfig"
_local_env_prepend LD_LIBRARY_PATH "$RDKAFKA_PREFIX/lib"
# The Swift toolchain, when it is not on PATH yet.
if ! command -v swift >/dev/null 2>&1 && [[ -d /opt/swift/usr/bin ]]; then
    _local_env_prepend PATH /opt/swift/usr/bin
fi
unset -f _local_env_prepend

# C targets (BoringSSL, which two dependencies each carry, and the packages' C shims; about a third of a
# clean build's CPU) compile through ccache, its store in BUILD_CACHE_DIR, so that a new clone compiles
# each file once per machine rather than once per clone. Paths below ROOT are hashed relative to it and
# the working directory not at all, so two clones share the entries (the debug info of a C object may
# then name the clone that first compiled it). Off when BUILD_CACHE_DIR is empty, ccache is missing,
# or CC is set to another compiler.
_local_clang="$(command -v swift >/dev/null 2>&1 && dirname "$(readlink -f "$(command -v swift)")")/clang"
if [[ -n "$BUILD_CACHE_DIR" && (-z "${CC:-}" || "$CC" == */deploy/local/ccache-clang) && -x "$_local_clang" ]] &&
    command -v ccache >/dev/null 2>&1; then
    export CC="$ROOT/deploy/local/ccache-clang" CCACHE_COMPILER="$_local_clang"
    export CCACHE_DIR="$BUILD_CACHE_DIR/ccache" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
fi
unset _local_clang

# The services' HTTP ports on the local stack (deploy/local/services.sh; docker-compose uses the same).
export GATEWAY_PORT="${GATEWAY_PORT:-8080}"
export POLICY_PORT="${POLICY_PORT:-8081}"
export MERGER_PORT="${MERGER_PORT:-8082}"
export REGISTRY_PORT="${REGISTRY_PORT:-8083}"
export TELEMETRY_PORT="${TELEMETRY_PORT:-8084}"
