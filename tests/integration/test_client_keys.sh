#!/usr/bin/env bash
# Several client keys, each with limits of its own (issue 15; policy
# `client` lines): team-a (3 connections) and team-b (2 connections, a
# 1 GFLOP graph budget, 16 MiB per session). tests/integration/fair_compute.c
# `keys` checks that each key holder can exhaust only its own share:
# connections, graph budget, session memory, and the compute device (team-b's
# step waits about one turn while team-a's three sessions compute). Also:
# a key that is none of them gets E_AUTH; two client lines with the same key
# are refused at start; the log names the key of each session.
# Loopback, seccomp on, the server stopped by PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"

for k in a b c; do "$BATON" keygen -o "$TMP/$k.key" 2>/dev/null; done
cat >"$TMP/keys.policy" <<POLICY
client = team-a $TMP/a.key max_connections=3
client = team-b $TMP/b.key max_connections=2 max_graph_flops=1G session_memory_bytes=16M
POLICY
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/keys.policy" start_server a
log="$TMP/batond.a.log"
grep -q "authentication required (named client keys), frames MAC'd" "$log" ||
    fail "no startup line saying the keys are required: $(cat "$log")"
grep -q "client key team-b: 2 connections, 16777216 bytes a session, 1000000000 FLOP a graph, 4 peer links" "$log" ||
    fail "no startup line with team-b's limits"
if [ "${BATON_ASAN:-}" = "1" ]; then
    # a sanitizer build computes about a hundred times slower: the limits
    # only (the fairness figures are judged in the plain build)
    "$BATON" info --servers "127.0.0.1:$PORT_a" --key "$TMP/a.key" >/dev/null ||
        fail "team-a's key is not accepted"
else
    timeout 300 "$BUILD_DIR/tests/fair_compute" keys "$PORT_a" "$TMP/a.key" "$TMP/b.key" \
        >"$TMP/keys.out" 2>&1 || {
        cat "$TMP/keys.out" >&2
        tail -30 "$log" >&2
        fail "client key limits"
    }
    cat "$TMP/keys.out"
    grep -q "authenticated (client role, key team-a)" "$log" || fail "no log line names team-a"
    grep -q "authenticated (client role, key team-b)" "$log" || fail "no log line names team-b"
    grep -q "refused 127.0.0.1:[0-9]*: connection limit of key team-a reached" "$log" ||
        fail "no log line for team-a's refused connection"
fi
rc=0
"$BATON" info --servers "127.0.0.1:$PORT_a" --key "$TMP/c.key" >/dev/null 2>"$TMP/c.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "E_AUTH" "$TMP/c.err" || fail "a key of no client line: rc $rc, $(cat "$TMP/c.err")"
stop_server a

# the same key on two client lines: refused at start, naming both
cat >"$TMP/dup.policy" <<POLICY
client = one $TMP/a.key
client = two $TMP/a.key
POLICY
rc=0
"$BATOND" --host 127.0.0.1 --port 0 --policy "$TMP/dup.policy" 2>"$TMP/dup.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "client two: $TMP/a.key holds the same key as the client line $TMP/a.key" "$TMP/dup.err" ||
    fail "duplicate client key: rc $rc, $(cat "$TMP/dup.err")"
echo "PASS"
