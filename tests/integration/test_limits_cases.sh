#!/usr/bin/env bash
# Semantic limits of issue 3 against a real batond (seccomp on): message
# length, unknown command, graph nodes, compute budget, stale handle,
# session and total quotas, NOT_OWNED across sessions, and clients that
# disconnect in the middle of SET_TENSOR, GET_TENSOR and GRAPH_COMPUTE
# (tests/integration/limits_cases.c). None may abort the server. Ephemeral
# loopback port; the server is stopped by its PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"

cat >"$TMP/cases.policy" <<'POLICY'
max_message_bytes = 1M
max_graph_nodes = 16
max_graph_flops = 1000
session_memory_bytes = 1M
total_memory_bytes = 3M
POLICY
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/cases.policy"
start_server a
log="$TMP/batond.a.log"

timeout 120 "$BUILD_DIR/tests/limits_cases" "$PORT_a" "$PID_a" semantic ||
    { cat "$log" >&2; fail "limits_cases semantic reported failures"; }
kill -0 "$PID_a" 2>/dev/null || fail "batond died"
grep -q "GRAPH_COMPUTE: E_LIMIT" "$log" || fail "no log line for the E_LIMIT reply"
grep -q "ALLOC_BUFFER: E_QUOTA" "$log" || fail "no log line for the E_QUOTA reply"

stop_server a
echo "PASS"
