#!/usr/bin/env bash
# Fair compute between sessions (issue 15): one session's long graph (24
# products of 1.07 GFLOP) no longer holds batond's compute device while
# another session's small steps wait: with the default compute_slice
# (10 ms) the other session's longest wait stays under a quarter of the
# long graph's time, and the long graph's result bits do not change
# (tests/integration/fair_compute.c prints the waits). The same program
# against a batond whose slice (60 s) outlasts the graph must fail that
# check: the test can tell the two apart. Loopback, seccomp on, servers
# stopped by PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}"

if [ "${BATON_ASAN:-}" = "1" ]; then
    # a sanitizer build computes a hundred times slower: one short chain, for
    # the memory safety of the turns path only (its waits are not judged)
    start_server a
    rc=0
    timeout 300 "$BUILD_DIR/tests/fair_compute" "$PORT_a" 10 2 >"$TMP/turns.out" 2>&1 || rc=$?
    cat "$TMP/turns.out"
    [ "$(grep '^not ok' "$TMP/turns.out" | grep -vc "B's longest wait")" -eq 0 ] ||
        fail "fair_compute under the sanitizer (rc $rc)"
    stop_server a
    echo "PASS"
    exit 0
fi

start_server a
timeout 300 "$BUILD_DIR/tests/fair_compute" "$PORT_a" 10 >"$TMP/turns.out" 2>&1 || {
    cat "$TMP/turns.out" >&2
    cat "$TMP/batond.a.log" >&2
    fail "fair_compute with the default slice"
}
cat "$TMP/turns.out"
stop_server a

BATOND_EXTRA="${BATOND_EXTRA:-} --compute-slice 60s" start_server b
rc=0
timeout 300 "$BUILD_DIR/tests/fair_compute" "$PORT_b" 60000 >"$TMP/noturns.out" 2>&1 || rc=$?
grep "^#" "$TMP/noturns.out" || true
[ "$rc" -eq 1 ] && grep -q "^not ok .* B's longest wait" "$TMP/noturns.out" ||
    { cat "$TMP/noturns.out" >&2; fail "with a 60 s slice B's wait should have failed the check (rc $rc)"; }
# the slice is the only difference: every other check passed
[ "$(grep -c '^not ok' "$TMP/noturns.out")" -eq 1 ] ||
    { cat "$TMP/noturns.out" >&2; fail "with a 60 s slice other checks failed too"; }
stop_server b
echo "PASS"
