# Shared helpers for integration tests (sourced). Starts batond processes on
# loopback ephemeral ports and stops exactly those, by PID, on exit.
set -euo pipefail

: "${BATOND:?BATOND must point at the batond binary}"
: "${BATON:?BATON must point at the baton binary}"
MODEL_DIR=${MODEL_DIR:-}
TMP=$(mktemp -d)
PIDS=()

cleanup_all() {
    local p
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup_all EXIT

# BATOND_EXTRA may hold extra batond flags. Sanitizer runs (make test-asan
# sets BATON_ASAN=1) need --no-seccomp: their runtimes make system calls
# outside policy/seccomp.list (LeakSanitizer at exit). Plain runs keep the
# sandbox on, as batond does by default.
if [ "${BATON_ASAN:-}" = "1" ]; then
    BATOND_EXTRA="${BATOND_EXTRA:-} --no-seccomp"
fi
# start_server NAME: starts batond, sets PORT_<NAME> and PID_<NAME>.
start_server() {
    local name=$1 i
    # shellcheck disable=SC2086
    "$BATOND" --host 127.0.0.1 --port 0 --port-file "$TMP/port.$name" --threads 1 \
        ${BATOND_EXTRA:-} 2>"$TMP/batond.$name.log" &
    local pid=$!
    PIDS+=("$pid")
    for i in $(seq 200); do
        [ -s "$TMP/port.$name" ] && break
        if ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.025
    done
    if [ ! -s "$TMP/port.$name" ]; then
        echo "FAIL: batond $name did not start" >&2
        cat "$TMP/batond.$name.log" >&2
        exit 1
    fi
    printf -v "PORT_$name" '%s' "$(cat "$TMP/port.$name")"
    printf -v "PID_$name" '%s' "$pid"
}

# stop_server NAME: SIGTERM to that batond, which must drain and exit 0.
stop_server() {
    local pid_var="PID_$1" rc=0
    kill -TERM "${!pid_var}"
    wait "${!pid_var}" || rc=$?
    [ "$rc" -eq 0 ] || fail "batond $1 exited $rc after SIGTERM: $(tail -5 "$TMP/batond.$1.log")"
}

# need_model: sets MODEL or skips (exit 77), failing under CI=true.
need_model() {
    MODEL="$MODEL_DIR/stories260K.gguf"
    if [ ! -f "$MODEL" ]; then
        if [ "${CI:-}" = "true" ]; then
            echo "FAIL: $MODEL missing under CI" >&2
            exit 1
        fi
        echo "SKIP: $MODEL not found" >&2
        exit 77
    fi
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
