#!/usr/bin/env bash
# Deadlines of issue 3 against a real batond (seccomp on): a client that
# sends a byte a second before HELLO, inside a header or inside a payload
# is cut off at the handshake or frame deadline; a silent client at the
# idle timeout; a client that never reads its GET at the send deadline
# (tests/integration/limits_cases.c). Ephemeral loopback port; the server
# is stopped by its PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"

cat >"$TMP/deadlines.policy" <<'POLICY'
handshake_timeout = 2s
frame_timeout = 3s
send_timeout = 2s
idle_timeout = 2s
POLICY
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/deadlines.policy"
start_server a
log="$TMP/batond.a.log"

timeout 120 "$BUILD_DIR/tests/limits_cases" "$PORT_a" "$PID_a" deadlines ||
    { cat "$log" >&2; fail "limits_cases deadlines reported failures"; }
kill -0 "$PID_a" 2>/dev/null || fail "batond died"
grep -q "idle timeout" "$log" || fail "no log line for the idle timeout"
grep -q "E_TIMEOUT, closing" "$log" || fail "no log line for a frame deadline"

stop_server a
echo "PASS"
