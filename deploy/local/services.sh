#!/usr/bin/env bash
# The platform's services as processes on the native local stack (broker and PostgreSQL from
# stack.sh), with pid files and logs under $RUN_DIR/services.
#
#   services.sh start [NAME...]    start (default: all, in dependency order) and wait until ready
#   services.sh stop [NAME...]     SIGTERM (graceful), SIGKILL after $STOP_TIMEOUT s
#   services.sh status             one line per service; exit 0 when all run, 3 otherwise
#   services.sh kill9 NAME         SIGKILL, as a crash would (no graceful shutdown)
#   services.sh restart NAME       stop, start, wait until ready
#   services.sh logs NAME [-f]     the service's log
#
# NAME is one of: beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator.
# Binaries come from `swift build -c $BUILD_CONFIG` (default debug; build them first).
# Secrets made on first start (gitignored, under $RUN_DIR/secrets): the device token signing key
# shared by the registry and the gateway, the GATT nonce key shared by the gateway and the policy
# service, the beacon key sealing key shared by the registry and the policy service, and the
# registry's bootstrap admin API key.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=env.sh
source "$HERE/env.sh"

BUILD_CONFIG="${BUILD_CONFIG:-debug}"
SERVICES_DIR="${SERVICES_DIR:-$RUN_DIR/services}"
SECRETS_DIR="${SECRETS_DIR:-$RUN_DIR/secrets}"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"
ALL=(beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator)

log() { printf '[services] %s\n' "$*"; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

port_of() {
    case "$1" in
        beacon-registry) echo "$REGISTRY_PORT" ;;
        policy-service) echo "$POLICY_PORT" ;;
        session-merger) echo "$MERGER_PORT" ;;
        ingest-gateway) echo "$GATEWAY_PORT" ;;
        telemetry-aggregator) echo "$TELEMETRY_PORT" ;;
        *) die "unknown service '$1' (one of: ${ALL[*]})" ;;
    esac
}

bin_dir() { (cd "$ROOT" && swift build -c "$BUILD_CONFIG" --show-bin-path); }
pid_file() { echo "$SERVICES_DIR/$1.pid"; }
log_file() { echo "$SERVICES_DIR/$1.log"; }

running_pid() {
    local f; f="$(pid_file "$1")"
    [[ -f "$f" ]] || return 1
    local pid; pid="$(cat "$f")"
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

ensure_secrets() {
    mkdir -p "$SECRETS_DIR"
    chmod 700 "$SECRETS_DIR"
    local keys="$SECRETS_DIR/device-token-keys"
    if [[ ! -s "$keys" ]]; then
        printf 'local-1:%s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$keys"
        chmod 600 "$keys"
    fi
    DEVICE_TOKEN_KEYS="${DEVICE_TOKEN_KEYS:-$(cat "$keys")}"
    export DEVICE_TOKEN_KEYS
    # The GATT challenge: the gateway signs nonces with GATT_NONCE_KEY (the policy checks them);
    # the registry creates a random key per beacon and stores and publishes it sealed with
    # BEACON_KEY_SEAL_KEY (32 bytes), which only the registry and the policy hold. The rule itself
    # is off until a site's policy switches it on. (The former beacon-key-secret file is no longer
    # read: beacon keys are not derived from a master secret any more.)
    local name file
    for name in gatt-nonce-key beacon-key-seal-key; do
        file="$SECRETS_DIR/$name"
        if [[ ! -s "$file" ]]; then
            head -c 32 /dev/urandom | base64 -w0 >"$file"
            chmod 600 "$file"
        fi
    done
    GATT_NONCE_KEY="${GATT_NONCE_KEY:-$(cat "$SECRETS_DIR/gatt-nonce-key")}"
    export GATT_NONCE_KEY
    # Not exported: start_one hands it to the registry and the policy service only.
    BEACON_KEY_SEAL_KEY="${BEACON_KEY_SEAL_KEY:-$(cat "$SECRETS_DIR/beacon-key-seal-key")}"
    export -n BEACON_KEY_SEAL_KEY
}

wait_ready() {
    local name="$1" port; port="$(port_of "$1")"
    local deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! running_pid "$name" >/dev/null; then
            tail -n 30 "$(log_file "$name")" >&2 || true
            die "$name exited during start (log: $(log_file "$name"))"
        fi
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/health/ready" 2>/dev/null; then
            log "$name ready on :$port (pid $(running_pid "$name"))"
            return 0
        fi
        sleep 0.5
    done
    tail -n 30 "$(log_file "$name")" >&2 || true
    die "$name not ready after ${READY_TIMEOUT}s (log: $(log_file "$name"))"
}

start_one() {
    local name="$1" port; port="$(port_of "$1")"
    if running_pid "$name" >/dev/null; then
        log "$name already running (pid $(running_pid "$name"))"
        return 0
    fi
    local bin; bin="$(bin_dir)/$name"
    [[ -x "$bin" ]] || die "$bin is not built (swift build -c $BUILD_CONFIG --product $name)"
    mkdir -p "$SERVICES_DIR"
    local extra=()
    # The first admin API key goes to its secrets file (mode 0600), never to the log.
    [[ "$name" == beacon-registry ]] && extra+=(REGISTRY_BOOTSTRAP=1 REGISTRY_BOOTSTRAP_KEY_PATH="$SECRETS_DIR/admin-api-key")
    case "$name" in
        beacon-registry | policy-service) extra+=(BEACON_KEY_SEAL_KEY="$BEACON_KEY_SEAL_KEY") ;;
    esac
    # setsid: the service outlives this script, and a kill9 hits only it.
    env HTTP_HOST=127.0.0.1 HTTP_PORT="$port" INSTANCE_ID="${name}-local" LOG_FORMAT="${LOG_FORMAT:-json}" "${extra[@]}" \
        setsid "$bin" >>"$(log_file "$name")" 2>&1 </dev/null &
    echo $! >"$(pid_file "$name")"
    wait_ready "$name"
    if [[ "$name" == beacon-registry && -s "$SECRETS_DIR/admin-api-key" ]]; then
        log "admin API key: $SECRETS_DIR/admin-api-key"
    fi
}

stop_one() {
    local name="$1" pid
    pid="$(running_pid "$name")" || { rm -f "$(pid_file "$name")"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not stop in ${STOP_TIMEOUT}s; SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$(pid_file "$name")"
    log "$name stopped"
}

names_or_all() { if (($# == 0)); then echo "${ALL[@]}"; else echo "$@"; fi; }

cmd="${1:-status}"
shift || true
case "$cmd" in
    start)
        ensure_secrets
        for n in $(names_or_all "$@"); do start_one "$n"; done
        ;;
    stop)
        names=($(names_or_all "$@"))
        for ((i = ${#names[@]} - 1; i >= 0; i--)); do stop_one "${names[i]}"; done
        ;;
    restart)
        [[ $# == 1 ]] || die "usage: services.sh restart NAME"
        ensure_secrets
        stop_one "$1"
        start_one "$1"
        ;;
    kill9)
        [[ $# == 1 ]] || die "usage: services.sh kill9 NAME"
        port_of "$1" >/dev/null
        pid="$(running_pid "$1")" || die "$1 is not running"
        kill -KILL "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        rm -f "$(pid_file "$1")"
        log "$1 killed with SIGKILL (pid $pid)"
        ;;
    status)
        rc=0
        for n in "${ALL[@]}"; do
            if pid="$(running_pid "$n")"; then
                printf '%-16s running  pid %-7s :%s\n' "$n" "$pid" "$(port_of "$n")"
            else
                printf '%-16s stopped\n' "$n"
                rc=3
            fi
        done
        exit "$rc"
        ;;
    logs)
        [[ $# -ge 1 ]] || die "usage: services.sh logs NAME [-f]"
        port_of "$1" >/dev/null
        if [[ "${2:-}" == "-f" ]]; then tail -n 50 -f "$(log_file "$1")"; else tail -n 50 "$(log_file "$1")"; fi
        ;;
    *)
        die "usage: services.sh start|stop|status|kill9|restart|logs [NAME...]"
        ;;
esac
