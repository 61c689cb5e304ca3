#!/usr/bin/env bash
# Whom the lobby evicts (issue 15, src/server/lobby.c; the checks are in
# tests/integration/lobby_cases.c): in a full lobby of 4, a new connection
# evicts the oldest connection of the address that would hold the most with
# it, not the oldest overall; and when batond runs out of descriptors
# (prlimit --nofile=48:48, 36 READY connections, 100 silent strangers) the
# lobby evicts a stranger so that a new client still gets in at once.
# Loopback, seccomp on, servers stopped by PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"
command -v prlimit >/dev/null || { echo "SKIP: no prlimit"; exit 77; }

BATOND_EXTRA="${BATOND_EXTRA:-} --max-unauthenticated 4 --handshake-timeout 20s" start_server a
"$BUILD_DIR/tests/lobby_cases" victim "$PORT_a" >"$TMP/victim.out" 2>&1 || {
    cat "$TMP/victim.out" "$TMP/batond.a.log" >&2
    fail "lobby victim cases"
}
cat "$TMP/victim.out"
grep -q "evicted 127.0.0.6:[0-9]*: unauthenticated connection limit reached" "$TMP/batond.a.log" ||
    fail "no log line for the eviction"
stop_server a

REAL_BATOND=$BATOND
cat >"$TMP/batond-limited" <<WRAP
#!/bin/sh
exec prlimit --nofile=48:48 "$REAL_BATOND" "\$@"
WRAP
chmod +x "$TMP/batond-limited"
BATOND="$TMP/batond-limited" start_server b
grep -q "the descriptor limit (48) leaves room for" "$TMP/batond.b.log" ||
    fail "no log line for the lobby shrunk to the descriptor limit"
"$BUILD_DIR/tests/lobby_cases" emfile "$PORT_b" 36 >"$TMP/emfile.out" 2>&1 || {
    cat "$TMP/emfile.out" >&2
    tail -20 "$TMP/batond.b.log" >&2
    fail "lobby emfile case"
}
cat "$TMP/emfile.out"
grep -q "no descriptor left for a new connection" "$TMP/batond.b.log" ||
    fail "the descriptor case never evicted (did batond run out of descriptors?)"
kill -0 "$PID_b" || fail "batond died"
stop_server b
echo "PASS"
