#!/bin/bash
# Faults of the pipelined hand-off (docs/PROTOCOL.md "Asynchronous
# hand-off"). Each ends with the boundary redone through the coordinator and
# the same token ids, or a clear error naming the stage; never a compute on
# stale data, never a server thread stuck past its deadline, and other
# sessions keep being served:
#   - fences, the latch, hostile peers, registered graphs and hand-offs
#     against running servers (tests/integration/pipeline_cases.c);
#   - a 2-stage pipelined prefill (ubatch 7) whose peer link (a relay) dies
#     mid-prefill, and one whose relay stalls (the copy outlives its
#     deadline, the destination's fence its own): the in-process ids, the
#     redo said and counted;
#   - the same with one reset on the peer path while another session keeps
#     the destination busy (hand-offs queued behind the failed one arrive
#     after the redo began: the owner's PEER_FENCE keeps them out);
#   - the decode ring's link (last stage -> stage 1) cut or dead
#     mid-decode: the step redone with the token through the coordinator,
#     the same ids;
#   - the owner's PEER_FENCE and REVOKE_GRANT stop a write that is still
#     arriving (a slow relay): nothing lands after the reply;
#   - the destination dies mid-run: exit 1 naming stage 2 within 3 s (from
#     the closed connection, not a fence deadline); the source still
#     serves, and its threads come back to the baseline (no sender stuck);
#   - the coordinator dies mid-run: the servers' fenced runs are abandoned
#     at once, so they stop (SIGTERM) within 3 s although fence_timeout is
#     60 s.
# Servers run with seccomp on (unless BATON_ASAN=1).
source "$(dirname "$0")/lib.sh"
need_model
CASES="$BUILD_DIR/tests/pipeline_cases"
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree and"

make_keys

# --- the protocol's cases ---
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 1500ms --max-graphs-per-session 8 --log-rate 1000" start_server f
"$CASES" fences "$PORT_f" "$PID_f" "$K" "$P" 1500 >"$TMP/fences.out" 2>&1 || {
    cat "$TMP/fences.out"
    fail "fences"
}
cat "$TMP/fences.out"
grep -q "GRAPH_RUN: fence 3 (seq 77) cannot land" "$TMP/batond.f.log" ||
    fail "the log does not name the 4th fence (fence 3, seq 77)"
# a write still arriving (through a slow relay) when its grant's owner
# voids it: no byte lands after the owner's reply
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS" start_server mw
for how in fence revoke; do
    start_relay "slow$how" --to "$PORT_mw" --mode slow --chunk 8192 --delay-ms 100 \
        --mark-after 32768 --mark-file "$TMP/mark.$how"
    rport_var="RPORT_slow$how"
    "$CASES" midwrite "$PORT_mw" "${!rport_var}" "$TMP/mark.$how" "$K" "$P" "$how" \
        >"$TMP/mw.$how.out" 2>&1 || {
        cat "$TMP/mw.$how.out"
        fail "midwrite $how"
    }
    cat "$TMP/mw.$how.out"
done
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 4s" start_server hd
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:$PORT_hd" start_server hs
"$CASES" handoff "$PORT_hs" "$PORT_hd" "$K" 4000 >"$TMP/handoff.out" 2>&1 || {
    cat "$TMP/handoff.out"
    fail "handoff"
}
cat "$TMP/handoff.out"

"$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 24 --servers local --quiet \
    --ids-file "$TMP/local.json" 2>/dev/null || fail "in-process run"
want=$(field "$TMP/local.json" 'j["generated"]')

BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 2s" start_server d
# HELLO + AUTH 128 bytes, then PEER_WRITEs of 7 tokens (24 + 40 + 1792 +
# 16 = 1872 bytes): 6000 bytes fall in the 4th of the prompt's 8 ubatches
start_relay die --to "$PORT_d" --mode die --after 6000
start_relay stall --to "$PORT_d" --mode stall --after 6000
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer-timeout 1s --peer 127.0.0.1:$RPORT_die --peer 127.0.0.1:$RPORT_stall" start_server s
for mode in die stall; do
    rport_var="RPORT_$mode"
    if ! "$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 24 --key "$K" --ubatch 7 \
        --servers "127.0.0.1:$PORT_s,127.0.0.1:$PORT_d@127.0.0.1:${!rport_var}" --quiet \
        --ids-file "$TMP/$mode.json" --stats-json "$TMP/$mode.stats" 2>"$TMP/$mode.err"; then
        cat "$TMP/$mode.err"
        fail "$mode: the run failed"
    fi
    [ "$(field "$TMP/$mode.json" 'j["generated"]')" = "$want" ] ||
        fail "$mode: ids $(field "$TMP/$mode.json" 'j["generated"]'), want $want"
    grep -q "stage 1 -> 2: the hand-off of a step did not land" "$TMP/$mode.err" ||
        fail "$mode: no redo said: $(cat "$TMP/$mode.err")"
    echo "ok: relay $mode mid-prefill: the steps redone through the coordinator, the in-process ids"
done
kill -0 "$RPID_die" 2>/dev/null && fail "the die relay is still alive"

# --- one reset on the peer path while another session keeps the
# destination busy: the hand-offs queued behind the failed one arrive late,
# and must not land after the redo's SET through the coordinator
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS" start_server d4
start_relay cut --to "$PORT_d4" --mode cut --after 6000
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:$RPORT_cut" start_server s4
"$CASES" hog "$PORT_d4" "$K" 60 2>"$TMP/hog.err" &
hog_pid=$!
PIDS+=("$hog_pid")
sleep 0.3
"$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 24 --key "$K" --ubatch 7 \
    --servers "127.0.0.1:$PORT_s4,127.0.0.1:$PORT_d4@127.0.0.1:$RPORT_cut" --quiet \
    --ids-file "$TMP/cut.json" 2>"$TMP/cut.err" || {
    cat "$TMP/cut.err"
    fail "cut: the run failed"
}
kill "$hog_pid" 2>/dev/null
wait "$hog_pid" 2>/dev/null || true
[ "$(field "$TMP/cut.json" 'j["generated"]')" = "$want" ] ||
    fail "cut: ids $(field "$TMP/cut.json" 'j["generated"]'), want $want"
grep -q "stage 1 -> 2: the hand-off of a step did not land" "$TMP/cut.err" ||
    fail "cut: no redo said: $(cat "$TMP/cut.err")"
echo "ok: one reset on the peer path, destination busy: redone through the coordinator, the in-process ids"
grep -q "fence 0 (seq [0-9]*) passed its deadline (fence_timeout)\|cannot land" "$TMP/batond.d.log" ||
    fail "the destination logged no failed fence"

# --- the decode ring's link (stage 3 -> stage 1, through a relay) is cut
# mid-decode, or dies: the step redone with the token through the
# coordinator, the ring tried again (a fresh link) or left; the same ids
for mode in cut die; do
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 2s" start_server "g1$mode"
    g1_var="PORT_g1$mode"
    # HELLO + AUTH 128 bytes, then 84 bytes per token (header 24, PEER_WRITE
    # 40, the token 4, tag 16): 618 bytes end inside the 6th write's tag,
    # after its header was taken (a cut inside the header leaves the seq
    # unused, and the source's retry on a fresh link may land it)
    start_relay "ring$mode" --to "${!g1_var}" --mode "$mode" --after 618
    rv="RPORT_ring$mode"
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer-timeout 1s --peer 127.0.0.1:${!rv}" start_server "g3$mode"
    g3_var="PORT_g3$mode"
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:${!g3_var}" start_server "g2$mode"
    g2_var="PORT_g2$mode"
    pid_var="PID_g1$mode"
    kill -TERM "${!pid_var}"
    wait "${!pid_var}" 2>/dev/null || true
    BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 2s --port ${!g1_var} --peer 127.0.0.1:${!g2_var}" \
        start_server "g1$mode"
    if ! "$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 24 --key "$K" --ubatch 7 \
        --servers "127.0.0.1:${!g1_var}@127.0.0.1:${!rv},127.0.0.1:${!g2_var},127.0.0.1:${!g3_var}" \
        --quiet --ids-file "$TMP/ring$mode.json" 2>"$TMP/ring$mode.err"; then
        cat "$TMP/ring$mode.err"
        fail "ring $mode: the run failed"
    fi
    [ "$(field "$TMP/ring$mode.json" 'j["generated"]')" = "$want" ] ||
        fail "ring $mode: ids $(field "$TMP/ring$mode.json" 'j["generated"]'), want $want"
    grep -q "plan: decode ring: stage 3 -> 1" "$TMP/ring$mode.err" &&
        grep -q "stage 3 -> 1: the hand-off of a step did not land" "$TMP/ring$mode.err" ||
        fail "ring $mode: no ring, or no redo said: $(cat "$TMP/ring$mode.err")"
    echo "ok: the decode ring's link $mode mid-decode: the step redone through the coordinator, the in-process ids"
done

# --- the destination dies mid-run ---
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS" start_server d2
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --peer 127.0.0.1:$PORT_d2" start_server s2
sleep 0.2
tasks0=$(ls "/proc/$PID_s2/task" | wc -l)
"$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 4000 --ctx 4096 --ignore-eos --key "$K" \
    --servers "127.0.0.1:$PORT_s2,127.0.0.1:$PORT_d2" >"$TMP/dies.out" 2>"$TMP/dies.err" &
run_pid=$!
for _ in $(seq 200); do [ "$(wc -c <"$TMP/dies.out")" -gt 200 ] && break; sleep 0.025; done
kill -KILL "$PID_d2"
t0=$(date +%s%N)
rc=0
wait "$run_pid" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$rc" = 1 ] || fail "destination died: exit $rc: $(cat "$TMP/dies.err")"
# noticed from the closed connection, not after a fence's deadline
[ "$ms" -lt 3000 ] || fail "destination died: baton took $ms ms to notice"
grep -q "^baton run: stage 2 (127.0.0.1:$PORT_d2): .* failed: " "$TMP/dies.err" ||
    fail "destination died: no line naming stage 2: $(cat "$TMP/dies.err")"
"$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 24 --key "$K" --servers "127.0.0.1:$PORT_s2" \
    --quiet --ids-file "$TMP/after.json" 2>"$TMP/after.err" || fail "the source no longer serves"
[ "$(field "$TMP/after.json" 'j["generated"]')" = "$want" ] || fail "the source's next client: ids"
tasks1=
for _ in $(seq 100); do
    tasks1=$(ls "/proc/$PID_s2/task" | wc -l)
    [ "$tasks1" = "$tasks0" ] && break
    sleep 0.05
done
[ "$tasks1" = "$tasks0" ] || fail "the source's threads: $tasks1, baseline $tasks0"
echo "ok: the destination died mid-run: exit 1 naming stage 2 after $ms ms; the source serves on, threads back to $tasks0"

# --- the coordinator dies mid-run: the servers' fenced runs end at once
# (the client went away), so a stop (SIGTERM drains) takes no fence deadline
BATOND_EXTRA="${BATOND_EXTRA:-} --fence-timeout 60s" start_chain s3 d3
"$BATON" run --model "$MODEL" --prompt "$PROMPT" -n 4000 --ctx 4096 --ignore-eos --key "$K" \
    --servers "127.0.0.1:$PORT_s3,127.0.0.1:$PORT_d3" >"$TMP/coord.out" 2>/dev/null &
run_pid=$!
for _ in $(seq 200); do [ "$(wc -c <"$TMP/coord.out")" -gt 200 ] && break; sleep 0.025; done
kill -KILL "$run_pid"
wait "$run_pid" 2>/dev/null || true
sleep 0.3
t0=$(date +%s%N)
stop_server s3
stop_server d3
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 3000 ] || fail "the servers took $ms ms to stop after the coordinator died"
echo "ok: the coordinator died mid-run: its servers stop in $ms ms (fence_timeout 60 s)"
echo "PASS"
