#!/usr/bin/env bash
# Keeps one service process running, as compose's `restart: unless-stopped` does: starts it, and
# whenever it ends (a crash, kill -9, or its own exit after the broker lost its state) starts it
# again, after RESTART_DELAY seconds, doubled while it keeps dying within 10 s of its start (at most
# RESTART_DELAY_MAX). SIGTERM or SIGINT ends the supervision: the service gets SIGTERM and the
# supervisor waits for it to stop.
#
#   supervise.sh NAME PID_FILE LOG_FILE -- COMMAND [ARG...]
#
# PID_FILE holds the service's own pid (what `services.sh kill9` hits); every start and exit is one
# line in LOG_FILE, prefixed "[supervisor]".
set -uo pipefail
name="$1" pid_file="$2" log_file="$3"
shift 3
[[ "${1:-}" == "--" ]] && shift
RESTART_DELAY="${RESTART_DELAY:-1}"
RESTART_DELAY_MAX="${RESTART_DELAY_MAX:-10}"

say() { printf '[supervisor] %s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$name" "$*" >>"$log_file"; }

stopping=0
child=""
on_stop() {
    stopping=1
    [[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null
}
trap on_stop TERM INT

delay="$RESTART_DELAY"
while :; do
    started=$SECONDS
    "$@" >>"$log_file" 2>&1 </dev/null &
    child=$!
    echo "$child" >"$pid_file"
    say "started (pid $child)"
    # `wait` returns early when a signal arrives; wait again until the child is really gone.
    rc=0
    while :; do
        wait "$child"
        rc=$?
        kill -0 "$child" 2>/dev/null || break
    done
    if ((stopping)); then
        say "stopped (exit $rc)"
        rm -f "$pid_file"
        exit 0
    fi
    ((SECONDS - started >= 10)) && delay="$RESTART_DELAY"
    pause="$delay"
    delay=$((delay * 2 > RESTART_DELAY_MAX ? RESTART_DELAY_MAX : delay * 2))
    say "exited with status $rc; restarting in ${pause}s"
    sleep "$pause" &
    wait $! || true
    ((stopping)) && { rm -f "$pid_file"; exit 0; }
done
