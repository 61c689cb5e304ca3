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
    if [ -n "${BATON_KEEP_TMP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup_all EXIT

# BATOND_EXTRA may hold extra batond flags. Sanitizer runs (make test-asan
# sets BATON_ASAN=1) need --no-seccomp: their runtimes make system calls
# outside policy/seccomp.list (LeakSanitizer at exit). Plain runs keep the
# sandbox on, as batond does by default.
if [ "${BATON_ASAN:-}" = "1" ]; then
    BATOND_EXTRA="${BATOND_EXTRA:-} --no-seccomp"
fi
# wait_port_file NAME PID: waits up to 5 s, while PID lives, for the port
# file $TMP/port.NAME; succeeds once it is there.
wait_port_file() {
    for _ in $(seq 200); do
        [ -s "$TMP/port.$1" ] && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.025
    done
    [ -s "$TMP/port.$1" ]
}

# start_server NAME: starts batond, sets PORT_<NAME> and PID_<NAME>.
start_server() {
    local name=$1
    rm -f "$TMP/port.$name" # a restart under the same name: wait for its own port file
    # shellcheck disable=SC2086
    "$BATOND" --host 127.0.0.1 --port 0 --port-file "$TMP/port.$name" --threads 1 \
        ${BATOND_EXTRA:-} 2>"$TMP/batond.$name.log" &
    local pid=$!
    PIDS+=("$pid")
    if ! wait_port_file "$name" "$pid"; then
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

# start_py_listener NAME BODY [ARG...]: runs the Python code BODY in the
# background with `s`, a socket listening on 127.0.0.1 at an ephemeral port
# (backlog 8), and sys.argv[1:] = ARG...; the port is written (atomically)
# to $TMP/port.NAME before BODY runs. Sets PORT_<NAME> and PID_<NAME>; the
# process is stopped on exit, by PID, like the servers.
start_py_listener() {
    local name=$1 body=$2
    shift 2
    python3 -c "import os, socket, sys
port_file = sys.argv.pop(1)
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(8)
with open(port_file + '.tmp', 'w') as f:
    f.write('%d\n' % s.getsockname()[1])
os.rename(port_file + '.tmp', port_file)
$body" "$TMP/port.$name" "$@" &
    local pid=$!
    PIDS+=("$pid")
    wait_port_file "$name" "$pid" || fail "the listener $name did not start"
    printf -v "PORT_$name" '%s' "$(cat "$TMP/port.$name")"
    printf -v "PID_$name" '%s' "$pid"
}

# hold_port NAME: a socket bound to an ephemeral port of 127.0.0.1 that
# never listens, so a connect there is refused at once and no other process
# (a parallel test's server, or a connect's own source port) can take the
# port meanwhile, as it could the port of a stopped listener. Sets
# PORT_<NAME> and PID_<NAME>; stopped on exit, by PID.
hold_port() {
    local name=$1
    python3 -c "import os, signal, socket, sys
s = socket.socket()
s.bind(('127.0.0.1', 0))
with open(sys.argv[1] + '.tmp', 'w') as f:
    f.write('%d\n' % s.getsockname()[1])
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
signal.pause()" "$TMP/port.$name" &
    local pid=$!
    PIDS+=("$pid")
    wait_port_file "$name" "$pid" || fail "the holder of port $name did not start"
    printf -v "PORT_$name" '%s' "$(cat "$TMP/port.$name")"
    printf -v "PID_$name" '%s' "$pid"
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

# start_relay NAME ARGS...: tests/integration/peer_relay (built as
# $BUILD_DIR/tests/peer_relay) with ARGS, its port written to
# $TMP/port.rNAME; sets RPORT_<NAME> and RPID_<NAME>; stopped on exit.
start_relay() {
    local name=$1
    shift
    rm -f "$TMP/port.r$name"
    "$BUILD_DIR/tests/peer_relay" --port-file "$TMP/port.r$name" "$@" 2>>"$TMP/relay.$name.log" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do [ -s "$TMP/port.r$name" ] && break; sleep 0.025; done
    [ -s "$TMP/port.r$name" ] || fail "relay $name did not start"
    printf -v "RPORT_$name" '%s' "$(cat "$TMP/port.r$name")"
    printf -v "RPID_$name" '%s' "$pid"
}

# make_keys: a client key $K and a peer key $P in $TMP; KEYS holds the
# batond flags for both.
make_keys() {
    K="$TMP/client.key"
    P="$TMP/peer.key"
    "$BATON" keygen -o "$K" 2>/dev/null
    "$BATON" keygen -o "$P" 2>/dev/null
    KEYS="--key $K --peer-key $P"
}

# start_chain NAME...: keyed batond NAME1 -> NAME2 -> ... (each allow-lists
# the next; started from the last), with the keys of make_keys.
start_chain() {
    local names=("$@") i next=""
    for ((i = ${#names[@]} - 1; i >= 0; i--)); do
        if [ -n "$next" ]; then
            local port_var="PORT_$next"
            BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:${!port_var}" start_server "${names[$i]}"
        else
            BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS" start_server "${names[$i]}"
        fi
        next=${names[$i]}
    done
}

# start_ring NAME...: like start_chain, and the last server also
# allow-lists the first (the decode ring: the last stage hands each token to
# stage 1). The first server starts without an allow-list, the others after
# it in reverse order (each naming the next, the last the first), then the
# first is started again on its port, naming the second.
start_ring() {
    local names=("$@") i n=$#
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS" start_server "${names[0]}"
    local port0_var="PORT_${names[0]}" pid0_var="PID_${names[0]}"
    local port0=${!port0_var}
    for ((i = n - 1; i >= 1; i--)); do
        local next_var="PORT_${names[$(((i + 1) % n))]}"
        BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:${!next_var}" start_server "${names[$i]}"
    done
    kill -TERM "${!pid0_var}"
    wait "${!pid0_var}" 2>/dev/null || true
    local second_var="PORT_${names[1]}"
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --port $port0 --peer 127.0.0.1:${!second_var}" \
        start_server "${names[0]}"
}

# field FILE EXPR: a Python expression over the JSON document j in FILE
# (an --ids-file or --stats-json), printed.
field() {
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
