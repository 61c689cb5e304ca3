#!/usr/bin/env bash
# Connection caps under a flood (issues 3 and 15): 200 silent connections
# against a batond with a 1 s handshake deadline, a lobby of 8
# unauthenticated connections, 3 per address, and 12 connections in all
# (tests/integration/limits_flood.c has the checks), then one client that
# sends a byte per second is cut off at its deadline. Error and connection log
# lines are rate-limited, each on its own budget. The server runs with seccomp
# on, on an ephemeral loopback port, and is stopped by its PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"

cat >"$TMP/flood.policy" <<'POLICY'
# test policy: small caps and deadlines
max_connections = 12
max_unauthenticated = 8
max_unauthenticated_per_ip = 3
handshake_timeout = 1s
frame_timeout = 3s
log_rate = 5
POLICY
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/flood.policy"
start_server a
log="$TMP/batond.a.log"

timeout 120 "$BUILD_DIR/tests/limits_flood" "$PORT_a" "$PID_a" 1000 8 3 12 ||
    { cat "$log" >&2; fail "limits_flood reported failures"; }

kill -0 "$PID_a" 2>/dev/null || fail "batond died during the flood"
grep -q "evicted 127.0.0.[0-9]*:[0-9]*: unauthenticated connection limit reached" "$log" ||
    fail "no log line for an evicted unauthenticated connection"
grep -q "no HELLO in time" "$log" || fail "no log line for a handshake deadline"
# refusals are rate-limited: 5 lines a second at most, the rest counted
grep -Eq "^batond: \([0-9]+ error log lines suppressed\)" "$log" || fail "error log lines were not rate-limited"
# so are connection open/close lines, on their own budget
grep -Eq "^batond: \([0-9]+ connection log lines suppressed\)" "$log" ||
    fail "connection log lines were not rate-limited"
opened=$(grep -c "connection from" "$log" || true)
[ "$opened" -lt 100 ] || fail "$opened connection-open lines for a flood of 200 (not rate-limited)"

stop_server a
echo "PASS"
