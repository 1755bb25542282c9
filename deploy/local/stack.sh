#!/usr/bin/env bash
# Native local stack (no containers): a PostgreSQL cluster and the Tansu broker, both
# on loopback only, with their data, pid files and logs under $RUN_DIR.
#
#   stack.sh start            install what is missing (install.sh), start both (idempotent)
#   stack.sh stop             stop both (harmless when not running)
#   stack.sh status           one line per component; exit 0 when both run, 3 otherwise
#   stack.sh logs [postgres|broker] [-f]   last $LOG_LINES lines of the log(s); -f follows
#   stack.sh restart-broker   stop and start the broker only. Tansu keeps everything in
#                             memory: topics and committed offsets are gone afterwards.
#   stack.sh kill9-postgres   SIGKILL PostgreSQL's postmaster, as a crash would (`start` brings it
#                             back through crash recovery)
#   stack.sh reset            stop, then delete the run folders (database included)
#
# Settings (environment, with defaults): see env.sh for PG* / KAFKA_* / paths, plus
#   PG_DIR=$RUN_DIR/postgres    cluster folder (data/, socket, postgres.log); see pg_dir()
#   PG_OS_USER=postgres         OS user that owns and runs the cluster (when run as root)
#   PG_BIN_DIR=                 PostgreSQL binaries (default: newest /usr/lib/postgresql/*/bin)
#   PG_SHARED_BUFFERS=256MB  PG_SERVER_MAX_CONNECTIONS=200  PG_START_TIMEOUT=60 (s)
#   KAFKA_HOST=127.0.0.1        listen and advertised address of the broker
#   TANSU_DIR=$RUN_DIR/tansu    pid file and tansu.log
#   TANSU_STORAGE=memory://tansu/  TANSU_CLUSTER_ID=attendance-local
#   TANSU_START_TIMEOUT=30  STOP_TIMEOUT=20 (s)  LOG_LINES=50
#   SKIP_INSTALL=0              1 = `start` does not run install.sh first
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=env.sh
source "$HERE/env.sh"

PG_OS_USER="${PG_OS_USER:-postgres}"
PG_SHARED_BUFFERS="${PG_SHARED_BUFFERS:-256MB}"
PG_SERVER_MAX_CONNECTIONS="${PG_SERVER_MAX_CONNECTIONS:-200}"
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
KAFKA_HOST="${KAFKA_HOST:-127.0.0.1}"
TANSU_DIR="${TANSU_DIR:-$RUN_DIR/tansu}"
TANSU_LOG="$TANSU_DIR/tansu.log"
TANSU_PID_FILE="$TANSU_DIR/tansu.pid"
TANSU_STORAGE="${TANSU_STORAGE:-memory://tansu/}"
TANSU_CLUSTER_ID="${TANSU_CLUSTER_ID:-attendance-local}"
TANSU_START_TIMEOUT="${TANSU_START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-20}"
LOG_LINES="${LOG_LINES:-50}"
SKIP_INSTALL="${SKIP_INSTALL:-0}"

log() { printf '[stack] %s\n' "$*"; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# die_with_log MESSAGE LOGFILE: fail, showing the end of a log.
die_with_log() {
    printf '[stack] ERROR: %s\n' "$1" >&2
    if [[ -f "$2" ]]; then
        printf -- '--- last lines of %s ---\n' "$2" >&2
        tail -n 30 "$2" >&2
    fi
    exit 1
}

# Close every inherited descriptor above 2 in the current (sub)shell. Used right before
# starting a daemon, so it keeps neither our lock (fd 8) nor a caller's pipes open (a
# caller reading until EOF, e.g. a test runner, would otherwise hang).
close_extra_fds() {
    local fd
    for fd in "/proc/$BASHPID/fd/"*; do
        fd="${fd##*/}"
        if ((fd > 2)); then eval "exec $fd>&-"; fi
    done
}

# True when something accepts TCP connections on HOST PORT (bash's /dev/tcp, no tools needed).
# Whether a socket listens on TCP port $1 (any address), from /proc/net/tcp and tcp6 (state 0A). What
# decides whether another process has a port: a connect probe to a port of the kernel's ephemeral range
# can succeed with nothing listening (loopback connects to itself when it picks that port as its own).
port_listening() {
    local hex
    hex="$(printf ':%04X' "$1")"
    awk -v port="$hex" '$4 == "0A" && substr($2, length($2) - 4) == port { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------
is_root() { [[ "$(id -u)" == 0 ]]; }

# Run a command as the cluster owner. initdb and postgres refuse to run as root, so
# as root we switch to $PG_OS_USER; as any other user we run as that user. `cd /`
# because the owner may not be allowed into the caller's working directory.
as_pg() {
    if is_root; then
        (cd / && runuser -u "$PG_OS_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

# The cluster folder. Normally $RUN_DIR/postgres. The cluster owner must be able to
# traverse every parent folder; when the repository lives somewhere it cannot (e.g.
# under /root, mode 0700) we do not loosen permissions outside the repository but use
# /var/tmp/attendance-pg-<hash of RUN_DIR> instead, with $RUN_DIR/postgres as a symlink to
# it, so the paths shown stay the same. The choice is remembered by that symlink.
# With MODE=create the folder is created; otherwise this only reports it.
pg_dir() {
    local mode="${1:-}" link="$RUN_DIR/postgres" alt
    if [[ -n "${PG_DIR:-}" ]]; then
        :
    elif [[ -L "$link" ]]; then
        PG_DIR="$(readlink "$link")"
    elif [[ -d "$link" || "$mode" != create ]]; then
        PG_DIR="$link"
    else
        mkdir -p "$RUN_DIR"
        # Only folders we create inside the repository get o+x (never anything above ROOT).
        chmod o+x "$LOCAL" "$RUN_DIR"
        if as_pg test -x "$RUN_DIR"; then
            PG_DIR="$link"
        else
            alt="/var/tmp/attendance-pg-$(printf '%s' "$RUN_DIR" | sha256sum | cut -c1-12)"
            log "$PG_OS_USER cannot reach $RUN_DIR; using $alt (symlinked from $link)"
            PG_DIR="$alt"
            ln -sfn "$alt" "$link"
        fi
    fi
    if [[ "$mode" == create && ! -d "$PG_DIR" ]]; then
        mkdir -p "$PG_DIR"
        # Private to the owner: the unix socket lives here and local connections are trusted.
        chmod 0700 "$PG_DIR"
        if is_root; then chown "$PG_OS_USER": "$PG_DIR"; fi
    fi
    PG_DATA="$PG_DIR/data"
    PG_LOG="$PG_DIR/postgres.log"
}

# PostgreSQL binaries: $PG_BIN_DIR, else those matching an existing cluster's version,
# else the newest installed.
pg_bin() {
    if [[ -n "${PG_BIN_DIR:-}" ]]; then
        printf '%s' "$PG_BIN_DIR"
        return
    fi
    if [[ -f "$PG_DATA/PG_VERSION" ]]; then
        local v
        v="$(cat "$PG_DATA/PG_VERSION")"
        [[ -x "/usr/lib/postgresql/$v/bin/postgres" ]] ||
            die "the cluster in $PG_DATA is PostgreSQL $v, whose binaries are not installed (stack.sh reset starts over)"
        printf '%s' "/usr/lib/postgresql/$v/bin"
        return
    fi
    local d best=""
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x "$d/postgres" ]] || continue
        if [[ -z "$best" || "$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n 1)" == "$d" ]]; then
            best="$d"
        fi
    done
    [[ -n "$best" ]] || die "no PostgreSQL server in /usr/lib/postgresql (run deploy/local/install.sh)"
    printf '%s' "$best"
}

# Pid of the running postmaster of our cluster, or failure.
pg_pid() {
    [[ -f "$PG_DATA/postmaster.pid" ]] || return 1
    local pid
    pid="$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    grep -q postgres "/proc/$pid/cmdline" 2>/dev/null || return 1
    printf '%s' "$pid"
}

pg_init() {
    local bin="$1"
    log "creating the PostgreSQL cluster in $PG_DATA"
    # Local (unix socket) connections are trusted: the socket sits in $PG_DIR, which only
    # the owner can enter. TCP connections need the password (scram-sha-256).
    as_pg "$bin/initdb" -D "$PG_DATA" --username=postgres --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >"$PG_DIR/initdb.log" 2>&1 ||
        die_with_log "initdb failed" "$PG_DIR/initdb.log"
    # Our settings live in a file rewritten at every start (ports etc. may change).
    printf "\n# deploy/local/stack.sh writes this file at every start\ninclude_if_exists = 'local_stack.conf'\n" |
        as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null
}

pg_write_conf() {
    local sock="${PG_DIR//\'/\'\'}"
    as_pg tee "$PG_DATA/local_stack.conf" >/dev/null <<EOF
# Written by deploy/local/stack.sh at every start: edits here are lost.
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$sock'
max_connections = $PG_SERVER_MAX_CONNECTIONS
shared_buffers = $PG_SHARED_BUFFERS
# Durability stays as in production: benchmarks and crash tests measure it.
fsync = on
synchronous_commit = on
full_page_writes = on
# Per-statement counters (a percent or two of overhead, as commonly run in production): the
# pipeline benchmark prints PostgreSQL's time per merger row per statement from them.
shared_preload_libraries = 'pg_stat_statements'
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
}

# Create the application role and database if missing; the password follows $PGPASSWORD.
pg_provision() {
    local bin="$1"
    as_pg "$bin/psql" -X -q -h "$PG_DIR" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -v role="$PGUSER" -v pw="$PGPASSWORD" -v db="$PGDATABASE" >/dev/null <<'SQL' ||
SELECT format('CREATE ROLE %I LOGIN CREATEDB PASSWORD %L', :'role', :'pw')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'role', :'pw') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
-- The pipeline benchmark starts each storage phase at a checkpoint (PostgreSQL 15 and later).
SELECT format('GRANT pg_checkpoint TO %I', :'role')
 WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_checkpoint') \gexec
SQL
        die "could not create role $PGUSER / database $PGDATABASE"
    # The statement counters' view, readable by the application role (its own statements' text).
    PGOPTIONS='-c client_min_messages=warning' as_pg "$bin/psql" -X -q -h "$PG_DIR" -p "$PGPORT" -U postgres -d "$PGDATABASE" -v ON_ERROR_STOP=1 \
        -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null ||
        die "could not create the pg_stat_statements extension in $PGDATABASE"
}

start_postgres() {
    pg_dir create
    local bin pid
    bin="$(pg_bin)"
    if pid="$(pg_pid)"; then
        log "postgres already running (pid $pid, port $PGPORT)"
    else
        if port_listening "$PGPORT"; then
            die "port $PGPORT is in use by another process; set PGPORT to a free port"
        fi
        if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
            pg_init "$bin"
        fi
        pg_write_conf
        log "starting postgres $("$bin/postgres" --version | awk '{ print $3 }') on 127.0.0.1:$PGPORT"
        # The port lies in the kernel's ephemeral range: a client's outgoing connection may hold it
        # for a moment (bind fails though nothing listens). That passes; anything else is fatal.
        local attempt=1 logged
        until logged=$(wc -l 2>/dev/null <"$PG_LOG" || echo 0)
            (close_extra_fds && as_pg "$bin/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$PG_START_TIMEOUT" -s); do
            if ((attempt < 10)) && tail -n "+$((logged + 1))" "$PG_LOG" 2>/dev/null | grep -q "Address already in use"; then
                log "port $PGPORT briefly taken by an outgoing connection; starting again (attempt $((attempt += 1)))"
                sleep 2
            else
                die_with_log "postgres did not start" "$PG_LOG"
            fi
        done
    fi
    local waited=0
    until "$bin/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" -t 1; do
        ((waited += 1))
        ((waited < PG_START_TIMEOUT)) || die_with_log "postgres not ready after ${PG_START_TIMEOUT}s" "$PG_LOG"
        sleep 1
    done
    pg_provision "$bin"
}

stop_postgres() {
    pg_dir
    local pid
    if ! pid="$(pg_pid)"; then
        log "postgres not running"
        return 0
    fi
    log "stopping postgres (pid $pid)"
    as_pg "$(pg_bin)/pg_ctl" stop -D "$PG_DATA" -m fast -w -t "$STOP_TIMEOUT" -s ||
        die_with_log "postgres did not stop" "$PG_LOG"
}

# ---------------------------------------------------------------------------
# Tansu broker
# ---------------------------------------------------------------------------
# Pid of our running broker, or failure. The command line is checked too, so a stale
# pid file whose pid was reused (or a zombie) does not count as running.
broker_pid() {
    [[ -f "$TANSU_PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$TANSU_PID_FILE" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'tansu broker' || return 1
    printf '%s' "$pid"
}

start_broker() {
    local pid url="tcp://$KAFKA_HOST:$KAFKA_PORT"
    if pid="$(broker_pid)"; then
        log "broker already running (pid $pid, port $KAFKA_PORT)"
        return 0
    fi
    [[ -x "$TANSU_BIN" ]] || die "no broker binary at $TANSU_BIN (run deploy/local/install.sh)"
    if port_listening "$KAFKA_PORT"; then
        die "port $KAFKA_PORT is in use by another process; set KAFKA_PORT to a free port"
    fi
    # As for PostgreSQL: an outgoing connection may hold the port for a moment (the bind fails though
    # nothing listens). That passes; anything else is fatal.
    local attempt
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        launch_broker && return 0
        ((attempt < 10)) && ! port_listening "$KAFKA_PORT" && grep -q "AddrInUse" <(tail -n 20 "$TANSU_LOG" 2>/dev/null) ||
            die_with_log "broker exited during startup" "$TANSU_LOG"
        log "port $KAFKA_PORT briefly taken by an outgoing connection; starting again (attempt $((attempt + 1)))"
        sleep 2
    done
}

# One start of the broker: 0 once it listens, 1 when it exited during startup or could not bind (Tansu
# then logs AddrInUse and may stay up without a listener: it is stopped).
launch_broker() {
    local pid url="tcp://$KAFKA_HOST:$KAFKA_PORT" logged
    mkdir -p "$TANSU_DIR"
    logged=$(wc -l 2>/dev/null <"$TANSU_LOG" || echo 0)
    rm -f "$TANSU_PID_FILE"
    local cmd=("$TANSU_BIN" broker
        --cluster-id "$TANSU_CLUSTER_ID"
        --listener-url "$url"
        --advertised-listener-url "$url"
        --storage-engine "$TANSU_STORAGE")
    log "starting broker: ${cmd[*]}"
    printf '\n=== %s stack.sh: %s\n' "$(date -Is)" "${cmd[*]}" >>"$TANSU_LOG"
    # Own session (setsid) so it survives the calling shell; the inner shell writes its
    # own pid and then becomes the broker (exec), so the pid file holds the broker's pid.
    # NO_COLOR: Tansu's logger writes ANSI colours even into a file otherwise.
    # shellcheck disable=SC2016  # $$ and $1 expand in the inner shell
    (
        close_extra_fds
        NO_COLOR=1 exec setsid nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' tansu-launch "$TANSU_PID_FILE" "${cmd[@]}" \
            >>"$TANSU_LOG" 2>&1 </dev/null
    ) &
    local waited=0
    until port_listening "$KAFKA_PORT"; do
        sleep 0.2
        ((waited += 1))
        if ((waited % 5 == 0)); then
            broker_pid >/dev/null || return 1
            if tail -n "+$((logged + 1))" "$TANSU_LOG" 2>/dev/null | grep -q "AddrInUse"; then
                stop_broker >/dev/null
                return 1
            fi
        fi
        ((waited < TANSU_START_TIMEOUT * 5)) ||
            die_with_log "broker not accepting connections on $KAFKA_HOST:$KAFKA_PORT after ${TANSU_START_TIMEOUT}s" "$TANSU_LOG"
    done
    pid="$(broker_pid)" || die_with_log "broker is not running after start" "$TANSU_LOG"
    log "broker ready on $KAFKA_HOST:$KAFKA_PORT (pid $pid)"
}

stop_broker() {
    local pid
    if ! pid="$(broker_pid)"; then
        rm -f "$TANSU_PID_FILE"
        log "broker not running"
        return 0
    fi
    log "stopping broker (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local waited=0
    while broker_pid >/dev/null; do
        if ((waited >= STOP_TIMEOUT * 10)); then
            log "broker ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
        ((waited += 1))
    done
    # A killed process lets go of its port only once the kernel has reaped it: wait for both, so a
    # restart right after finds the port free.
    waited=0
    while { kill -0 "$pid" 2>/dev/null || port_listening "$KAFKA_PORT"; } && ((waited < 100)); do
        sleep 0.1
        ((waited += 1))
    done
    rm -f "$TANSU_PID_FILE"
}

# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------
cmd_status() {
    pg_dir
    local pid all=0
    if pid="$(pg_pid)"; then
        printf '%-9s running  port %-6s pid %-8s data %s\n' postgres "$PGPORT" "$pid" "$PG_DATA"
    else
        printf '%-9s stopped  port %-6s pid %-8s data %s\n' postgres "$PGPORT" - "$PG_DATA"
        all=3
    fi
    if pid="$(broker_pid)"; then
        printf '%-9s running  port %-6s pid %-8s data %s (log %s)\n' broker "$KAFKA_PORT" "$pid" "$TANSU_STORAGE" "$TANSU_LOG"
    else
        printf '%-9s stopped  port %-6s pid %-8s data %s (log %s)\n' broker "$KAFKA_PORT" - "$TANSU_STORAGE" "$TANSU_LOG"
        all=3
    fi
    return "$all"
}

cmd_logs() {
    local which="all" follow=() arg files=()
    for arg in "$@"; do
        case "$arg" in
            postgres | pg) which=postgres ;;
            broker | tansu | kafka) which=broker ;;
            -f | --follow) follow=(-F) ;;
            *) die "usage: stack.sh logs [postgres|broker] [-f]" ;;
        esac
    done
    pg_dir
    if [[ "$which" != broker ]]; then files+=("$PG_LOG"); fi
    if [[ "$which" != postgres ]]; then files+=("$TANSU_LOG"); fi
    local f existing=()
    for f in "${files[@]}"; do
        if [[ -f "$f" ]]; then existing+=("$f"); else log "no log yet at $f"; fi
    done
    ((${#existing[@]} > 0)) || return 0
    tail -n "$LOG_LINES" "${follow[@]}" "${existing[@]}"
}

cmd_reset() {
    stop_broker
    stop_postgres
    pg_dir
    [[ -n "$RUN_DIR" && "$RUN_DIR" != / ]] || die "refusing to delete RUN_DIR='$RUN_DIR'"
    if [[ "$PG_DIR" != "$RUN_DIR"/* && -d "$PG_DIR" ]]; then
        log "deleting $PG_DIR"
        rm -rf -- "$PG_DIR"
    fi
    log "deleting $RUN_DIR"
    rm -rf -- "$RUN_DIR"
}

usage() {
    sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

main() {
    local action="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$action" in
        start | stop | restart-broker | kill9-postgres | reset)
            # One stack.sh at a time (parallel test runs may all call `start`). Daemons
            # are started with this descriptor closed (close_extra_fds).
            mkdir -p "$RUN_DIR"
            exec 8>"$RUN_DIR/.lock"
            flock 8
            ;;
    esac
    case "$action" in
        start)
            if [[ "$SKIP_INSTALL" != 1 ]]; then INSTALL_QUIET=1 "$HERE/install.sh" || die "install.sh failed"; fi
            start_postgres
            start_broker
            cmd_status || true
            ;;
        stop)
            stop_broker
            stop_postgres
            ;;
        status) cmd_status ;;
        logs) cmd_logs "$@" ;;
        restart-broker)
            stop_broker
            start_broker
            ;;
        kill9-postgres)
            pg_dir
            local pid
            pid="$(pg_pid)" || die "PostgreSQL is not running"
            kill -KILL "$pid"
            while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
            log "PostgreSQL's postmaster killed with SIGKILL (pid $pid)"
            ;;
        reset) cmd_reset ;;
        -h | --help | help) usage ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
}

main "$@"
