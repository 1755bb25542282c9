#!/usr/bin/env bash
# The platform's services as processes on the native local stack (broker and PostgreSQL from
# stack.sh), with pid files and logs under $RUN_DIR/services.
#
#   services.sh start [NAME...]    start (default: all) side by side and wait until each is ready
#   services.sh stop [NAME...]     SIGTERM (graceful), SIGKILL after $STOP_TIMEOUT s (default: every instance)
#   services.sh status             one line per instance; exit 0 when all run, 3 otherwise
#   services.sh kill9 NAME         SIGKILL, as a crash would (no graceful shutdown); the supervisor restarts it
#   services.sh restart NAME       stop, start, wait until ready
#   services.sh wait-ready [NAME...]  wait until each (default: every instance) answers /health/ready
#   services.sh logs NAME [-f]     the service's log
#   services.sh describe           each service's port and the variables it gets beyond every service's
#
# NAME is one of: beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator,
# optionally with @N for a further instance (N = 2..9): `policy-service@2` listens on the service's
# port + 100 * (N - 1), with INSTANCE_ID `policy-service-local-2`, in the same consumer groups.
#
# Each instance runs under deploy/local/supervise.sh, which starts it again whenever it ends without
# being stopped: after a crash, a kill -9, or its own exit (75) when the broker lost its state.
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
# Past the services' own graceful budget (45 s, then 10 s of cancellation: ServiceKit), as compose's 60 s.
STOP_TIMEOUT="${STOP_TIMEOUT:-60}"
ALL=(beacon-registry policy-service session-merger ingest-gateway telemetry-aggregator)
SUPERVISE="$HERE/supervise.sh"

log() { printf '[services] %s\n' "$*"; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

# service_of NAME[@N] -> NAME; instance_of NAME[@N] -> N (1 without @).
service_of() { echo "${1%@*}"; }
instance_of() {
    if [[ "$1" == *@* ]]; then
        local n="${1##*@}"
        [[ "$n" =~ ^[2-9]$ ]] || die "'$1': an instance number is 2..9"
        echo "$n"
    else
        echo 1
    fi
}

port_of() {
    local base n
    base="$(base_port_of "$(service_of "$1")")"
    n="$(instance_of "$1")"
    echo $((base + 100 * (n - 1)))
}

instance_id_of() {
    local n; n="$(instance_of "$1")"
    if ((n == 1)); then echo "$(service_of "$1")-local"; else echo "$(service_of "$1")-local-$n"; fi
}

base_port_of() {
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
supervisor_file() { echo "$SERVICES_DIR/$1.supervisor.pid"; }
log_file() { echo "$SERVICES_DIR/$1.log"; }

# live_pid FILE: the pid in FILE when that process is alive and is the instance's (its supervisor or
# its product: the command line names the product), else failure. A pid file left by a run before a
# reboot may name an unrelated process now; it is never signalled.
live_pid() {
    [[ -f "$1" ]] || return 1
    local pid name; pid="$(cat "$1")"
    kill -0 "$pid" 2>/dev/null || return 1
    name="$(basename "$1")"; name="${name%.pid}"; name="${name%.supervisor}"
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "${name%@*}" || return 1
    echo "$pid"
}
supervisor_pid() { live_pid "$(supervisor_file "$1")"; }

# Every instance that has a supervisor file, the base instances first.
known_instances() {
    local f n names=()
    for n in "${ALL[@]}"; do names+=("$n"); done
    shopt -s nullglob
    for f in "$SERVICES_DIR"/*@*.supervisor.pid; do
        n="$(basename "$f" .supervisor.pid)"
        names+=("$n")
    done
    shopt -u nullglob
    echo "${names[@]}"
}

running_pid() { live_pid "$(pid_file "$1")"; }

# The shared secrets (one file each, made once by `attendancectl secrets init`, kept afterwards), read
# into the variables the services take (a value already in the environment wins). Not exported: each
# service gets only its own (service_secrets). The GATT challenge: the gateway signs nonces with
# GATT_NONCE_KEY (the policy checks them); the registry creates a random key per beacon and stores and
# publishes it sealed with BEACON_KEY_SEAL_KEY, which only the registry and the policy hold. The rule
# itself is off until a site's policy switches it on.
ensure_secrets() {
    local ctl; ctl="$(bin_dir)/attendancectl"
    [[ -x "$ctl" ]] || die "$ctl is not built (swift build -c $BUILD_CONFIG --product attendancectl)"
    "$ctl" secrets init --dir "$SECRETS_DIR" >/dev/null
    DEVICE_TOKEN_KEYS="${DEVICE_TOKEN_KEYS:-$(cat "$SECRETS_DIR/device-token-keys")}"
    GATT_NONCE_KEY="${GATT_NONCE_KEY:-$(cat "$SECRETS_DIR/gatt-nonce-key")}"
    BEACON_KEY_SEAL_KEY="${BEACON_KEY_SEAL_KEY:-$(cat "$SECRETS_DIR/beacon-key-seal-key")}"
    export -n "${PLATFORM_SECRETS[@]}"
}

# Every secret variable above; a service is started without them, then given its own (service_secrets).
PLATFORM_SECRETS=(DEVICE_TOKEN_KEYS GATT_NONCE_KEY BEACON_KEY_SEAL_KEY)

# What a service gets beyond what every service gets (env.sh's broker and PostgreSQL, HTTP_HOST,
# HTTP_PORT, INSTANCE_ID, LOG_FORMAT): the secrets its code reads, and its own settings.
# docker-compose.yml gives each service the same; the compose check reads them from `describe`.
service_secrets() {
    case "$1" in
        beacon-registry) echo DEVICE_TOKEN_KEYS BEACON_KEY_SEAL_KEY ;;
        policy-service) echo GATT_NONCE_KEY BEACON_KEY_SEAL_KEY ;;
        ingest-gateway) echo DEVICE_TOKEN_KEYS GATT_NONCE_KEY ;;
        *) echo ;;
    esac
}

# service_settings NAME: appends the service's own settings (KEY=value) to the array `settings`.
service_settings() {
    case "$1" in
        # The first admin API key goes to its secrets file (mode 0600), never to the log.
        beacon-registry) settings+=(REGISTRY_BOOTSTRAP=1 REGISTRY_BOOTSTRAP_KEY_PATH="$SECRETS_DIR/admin-api-key") ;;
    esac
}

wait_ready() {
    local name="$1" port; port="$(port_of "$1")"
    local deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! supervisor_pid "$name" >/dev/null; then
            tail -n 30 "$(log_file "$name")" >&2 || true
            die "$name is not running (log: $(log_file "$name"))"
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

# Starts the service under its supervisor without waiting for it (start_one waits).
launch_one() {
    local name="$1" port service
    port="$(port_of "$1")"
    service="$(service_of "$1")"
    if supervisor_pid "$name" >/dev/null; then
        log "$name already supervised (pid $(running_pid "$name" || echo restarting))"
        return 0
    fi
    local bin; bin="$(bin_dir)/$service"
    [[ -x "$bin" ]] || die "$bin is not built (swift build -c $BUILD_CONFIG --product $service)"
    mkdir -p "$SERVICES_DIR"
    local settings=() unset=() key
    for key in "${PLATFORM_SECRETS[@]}"; do unset+=(-u "$key"); done
    for key in $(service_secrets "$service"); do settings+=("$key=${!key}"); done
    service_settings "$service"
    # setsid: the supervisor and its service outlive this script; a kill9 hits only the service.
    rm -f "$(pid_file "$name")"
    env "${unset[@]}" \
        HTTP_HOST=127.0.0.1 HTTP_PORT="$port" INSTANCE_ID="$(instance_id_of "$name")" LOG_FORMAT="${LOG_FORMAT:-json}" "${settings[@]}" \
        setsid "$SUPERVISE" "$name" "$(pid_file "$name")" "$(log_file "$name")" -- "$bin" </dev/null >/dev/null 2>&1 &
    echo $! >"$(supervisor_file "$name")"
}

ready_one() {
    wait_ready "$1"
    if [[ "$1" == beacon-registry && -s "$SECRETS_DIR/admin-api-key" ]]; then
        log "admin API key: $SECRETS_DIR/admin-api-key"
    fi
}

start_one() {
    launch_one "$1"
    ready_one "$1"
}

stop_one() {
    local name="$1" pid supervisor
    supervisor="$(supervisor_pid "$name")" || supervisor=""
    pid="$(running_pid "$name")" || pid=""
    if [[ -z "$supervisor" && -z "$pid" ]]; then
        rm -f "$(pid_file "$name")" "$(supervisor_file "$name")"
        return 0
    fi
    # The supervisor forwards SIGTERM to the service and waits for it; without one, signal the service.
    if [[ -n "$supervisor" ]]; then kill -TERM "$supervisor" 2>/dev/null || true; else kill -TERM "$pid" 2>/dev/null || true; fi
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while { [[ -n "$supervisor" ]] && kill -0 "$supervisor" 2>/dev/null; } || { [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; }; do
        ((SECONDS < deadline)) || break
        sleep 0.2
    done
    local p
    for p in $supervisor $pid; do
        if kill -0 "$p" 2>/dev/null; then
            log "$name did not stop in ${STOP_TIMEOUT}s; SIGKILL"
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    rm -f "$(pid_file "$name")" "$(supervisor_file "$name")"
    log "$name stopped"
}

names_or_all() { if (($# == 0)); then echo "${ALL[@]}"; else echo "$@"; fi; }

cmd="${1:-status}"
shift || true
case "$cmd" in
    start)
        ensure_secrets
        # All at once, then each awaited: no service's readiness waits on another's (each creates the
        # topics and applies its own migrations; the caches follow the registry's feed whenever it comes).
        for n in $(names_or_all "$@"); do launch_one "$n"; done
        for n in $(names_or_all "$@"); do ready_one "$n"; done
        ;;
    stop)
        if (($# == 0)); then names=($(known_instances)); else names=("$@"); fi
        # Side by side: each drains its own work (the broker and PostgreSQL hold what passes between
        # them), so one stop takes as long as the slowest service's graceful shutdown, not their sum.
        for ((i = ${#names[@]} - 1; i >= 0; i--)); do stop_one "${names[i]}" & done
        wait
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
        log "$1 killed with SIGKILL (pid $pid)$(supervisor_pid "$1" >/dev/null && echo '; its supervisor starts it again')"
        ;;
    wait-ready)
        if (($# == 0)); then names=($(known_instances)); else names=("$@"); fi
        for n in "${names[@]}"; do wait_ready "$n"; done
        ;;
    status)
        rc=0
        for n in $(known_instances); do
            if pid="$(running_pid "$n")"; then
                printf '%-22s running  pid %-7s :%s\n' "$n" "$pid" "$(port_of "$n")"
            elif supervisor_pid "$n" >/dev/null; then
                printf '%-22s restarting (supervisor pid %s)\n' "$n" "$(supervisor_pid "$n")"
                rc=3
            else
                printf '%-22s stopped\n' "$n"
                rc=3
            fi
        done
        exit "$rc"
        ;;
    describe)
        # One line a service: its name, its port, and the variables it gets beyond every service's
        # (LOG_FORMAT, its secrets, its settings). Starts nothing; the compose check compares it.
        for n in "${ALL[@]}"; do
            settings=()
            service_settings "$n"
            echo "$n $(base_port_of "$n") LOG_FORMAT $(service_secrets "$n") ${settings[*]%%=*}"
        done
        ;;
    logs)
        [[ $# -ge 1 ]] || die "usage: services.sh logs NAME [-f]"
        port_of "$1" >/dev/null
        if [[ "${2:-}" == "-f" ]]; then tail -n 50 -f "$(log_file "$1")"; else tail -n 50 "$(log_file "$1")"; fi
        ;;
    *)
        die "usage: services.sh start|stop|status|kill9|restart|wait-ready|describe|logs [NAME...]"
        ;;
esac
