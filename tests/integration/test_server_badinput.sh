#!/usr/bin/env bash
# Bad input against a real batond: each bad request gets its exact error
# status and the server keeps serving other clients (tests/integration/
# badinput.c); error replies are logged with command, session and status
# only; SIGTERM then drains and exits 0.
# The server runs on an ephemeral loopback port and is always stopped (by
# its PID) when this script exits.
set -euo pipefail

: "${BATOND:?}" "${BUILD_DIR:?}"
tmp=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; echo "--- batond log:" >&2; cat "$tmp/log" >&2 || true; exit 1; }

"$BATOND" --port 0 --port-file "$tmp/port" 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
    [ -s "$tmp/port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "batond exited before listening"
    sleep 0.1
done
[ -s "$tmp/port" ] || fail "no port file after 10 s"
port=$(cat "$tmp/port")

timeout 120 "$BUILD_DIR/tests/badinput" "$port" || fail "badinput reported failures"

# one log line per error reply: command, session and status name
grep -q "GET_TENSOR: E_NOT_OWNED" "$tmp/log" || fail "no log line for the NOT_OWNED reply"
grep -q "SET_TENSOR: E_TYPE" "$tmp/log" || fail "no log line for the E_TYPE reply"
grep -q "connection from 127.0.0.1:" "$tmp/log" || fail "no connection-open line"
grep -q "E_MAGIC, closing" "$tmp/log" || fail "no log line for the bad magic"
# never buffer contents: the secret pattern 0xC0.. would show up as text only
# if someone printed data; check the log has only batond lines
if grep -qv '^batond: ' "$tmp/log"; then fail "unexpected log output"; fi

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "batond exited $rc after SIGTERM"
grep -q "batond: stopped" "$tmp/log" || fail "no stop line"
echo "PASS"
