#!/bin/bash
# Direct path fallback (docs/PROTOCOL.md "Direct path"): with a test relay
# (tests/integration/peer_relay.c) on the peer-facing path of a 2-stage run
# of stories260K, a destination not on the source's allow-list, a relay that
# is down, one killed mid-run and one that stalls each give "not done" (or,
# for a hand-off already queued, a run that fails its fence and is redone
# through the coordinator); the run finishes on the hub path with the
# reference token ids, and the source keeps serving other clients. After a
# copy that is not done the coordinator tries the direct path again after
# 1, 2, 4, ... 64 steps. Then 200 copies that cannot be done leave the
# source's descriptor and thread counts at their baseline, and a stale
# cached link (relay restarted) is retried at once. Servers run with
# seccomp on (unless BATON_ASAN=1).
source "$(dirname "$0")/lib.sh"
need_model
CASES="$BUILD_DIR/tests/peer_cases"
REF_IDS='[432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432]'

make_keys

# the destination waits at most 2 s for a hand-off that a dead or stalled
# relay never delivers (its fence), then the step is redone through the hub
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --fence-timeout 2s" start_server c
# per stage-1 -> stage-2 hand-off towards the destination: HELLO + AUTH
# (128 bytes), the prefill's PEER_WRITE (1360), then 336 per decode step,
# so 4000 bytes fall in the 8th decode step
start_relay die --to "$PORT_c" --mode die --after 4000
start_relay stall --to "$PORT_c" --mode stall --after 4000 --mark-after 4000 --mark-file "$TMP/stalled"
start_relay fwd --to "$PORT_c"
# dies inside the link-opening copy (past HELLO + AUTH, 128 bytes)
start_relay die0 --to "$PORT_c" --mode die --after 140
# allowed ports where nobody listens (held, so no other process takes them)
hold_port down
hold_port down2
# an allowed port that takes connections and never answers
start_py_listener silent 'import time
held = []
while True:
    held.append(s.accept()[0])'
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --log-rate 100000 --peer-timeout 1s --peer 127.0.0.1:$RPORT_die \
--peer 127.0.0.1:$RPORT_stall --peer 127.0.0.1:$RPORT_fwd --peer 127.0.0.1:$PORT_down \
--peer 127.0.0.1:$PORT_down2 --peer 127.0.0.1:$PORT_silent --peer 127.0.0.1:$RPORT_die0" start_server a
A=127.0.0.1:$PORT_a
C=127.0.0.1:$PORT_c


# run_arm NAME SERVERS: a 2-stage run with --p2p on; ids must be the reference
run_arm() {
    local name=$1 servers=$2
    if ! "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 48 --key "$K" \
        --servers "$servers" --split 1,1 --p2p on --ids-file "$TMP/$name.json" \
        --stats-json "$TMP/$name.stats" --quiet >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        cat "$TMP/$name.err" >&2
        fail "arm $name exited non-zero"
    fi
    [ "$(field "$TMP/$name.json" 'j["generated"]')" = "$REF_IDS" ] ||
        fail "$name: generated $(field "$TMP/$name.json" 'j["generated"]')"
    grep -q "plan: stage 1 -> 2 direct" "$TMP/$name.err" || fail "$name: no direct path planned"
}
# steps NAME KEY: the decode window's total of stage 1's KEY
steps() {
    field "$TMP/$1.stats" "round(j['per_step']['stages'][0]['$2'] * j['decode_steps'])"
}

# not on the allow-list: C's own port is not on A's list. The link's
# opening, then steps 1, 3, 7, 15, 31 try the direct path (the back-off
# doubles): 5 of them in the 47 decode steps
run_arm notlisted "$A,$C"
[ "$(steps notlisted copies_not_done)" = 5 ] && [ "$(steps notlisted copies_done)" = 0 ] ||
    fail "notlisted: copies done $(steps notlisted copies_done), not done $(steps notlisted copies_not_done)"
[ "$(steps notlisted hidden_gets)" = 47 ] || fail "notlisted: the hub path was not used"
grep -q "direct copy: destination not on the source's allow-list" "$TMP/notlisted.err" ||
    fail "notlisted: no reason given"
# said when the link was to open, before the first step: no link is open
! grep -q "peer links open" "$TMP/notlisted.err" || fail "notlisted: $(grep 'links open' "$TMP/notlisted.err")"
# A's log names the destination its allow-list lacks
grep -qE "^batond: session [0-9]+ GRAPH_RUN hand-off to $C: not done \(destination not on the allow-list\)\$" \
    "$TMP/batond.a.log" || fail "notlisted: A's log does not name $C: $(tail -5 "$TMP/batond.a.log")"
# the link's opening (one COPY_TENSOR_TO) was the first try: the prefill
# (step 0) goes through the hub without trying again (a link whose write
# timed out would cost its peer_timeout twice before the first token)
[ "$(grep -c "COPY_TENSOR_TO $C: not done" "$TMP/batond.a.log")" = 1 ] &&
    [ "$(grep -c "GRAPH_RUN hand-off to $C: not done" "$TMP/batond.a.log")" = 5 ] ||
    fail "notlisted: tries: $(grep -c "$C: not done" "$TMP/batond.a.log") (want 1 + 5)"
echo "ok: not on the allow-list -> not done, hub path, reference ids"

# --max-peer-links 0: a source that holds the peer key and has C on its
# allow-list still opens no link, so every copy is "not done" (no peer link,
# E_LIMIT) and goes through the coordinator
BATOND_EXTRA="${BATOND_EXTRA:-} $KEYS --max-peer-links 0 --peer 127.0.0.1:$PORT_c" start_server z
run_arm nolinks "127.0.0.1:$PORT_z,$C"
[ "$(steps nolinks copies_not_done)" = 5 ] && [ "$(steps nolinks copies_done)" = 0 ] ||
    fail "nolinks: copies done $(steps nolinks copies_done), not done $(steps nolinks copies_not_done)"
[ "$(steps nolinks hidden_gets)" = 47 ] || fail "nolinks: the hub path was not used"
grep -qxF "baton run: stage 1 -> 2: direct copy: no peer link available (E_LIMIT)" "$TMP/nolinks.err" ||
    fail "nolinks: no reason given: $(cat "$TMP/nolinks.err")"
echo "ok: --max-peer-links 0 -> not done (no peer link), hub path, reference ids"

# the relay is down
run_arm down "$A,$C@127.0.0.1:$PORT_down"
[ "$(steps down copies_not_done)" = 5 ] || fail "down: $(steps down copies_not_done) not done"
[ "$(steps down hidden_gets)" = 47 ] || fail "down: the hub path was not used"
grep -q "not done (connect failed" "$TMP/batond.a.log" ||
    fail "down: no connect failure logged: $(grep "not done" "$TMP/batond.a.log" | head -5)"
grep -q "not done (destination in backoff" "$TMP/batond.a.log" ||
    fail "down: no backoff: $(grep "not done" "$TMP/batond.a.log" | head -5)"
echo "ok: relay down -> not done (connect failed, then backoff), reference ids"

# the peer address takes the connection and never answers: the handshake
# times out, which is not said to be a matter of peer keys
run_arm silent "$A,$C@127.0.0.1:$PORT_silent"
grep -qxF "baton run: stage 1 -> 2: direct copy: handshake failed (or no peer support) (E_TIMEOUT)" \
    "$TMP/silent.err" &&
    grep -qF "reached 127.0.0.1:$PORT_silent, which did not finish the peer handshake" \
        "$TMP/silent.err" && ! grep -q "peer key" "$TMP/silent.err" ||
    fail "silent: $(grep -v '^plan\|^upload\|^model' "$TMP/silent.err")"
echo "ok: a peer address that never answers -> handshake timed out, said so, reference ids"

# the link fails inside the copy that opens it: said at setup, slot 0's
# grant voided (the write may have been under way), the hub path from the
# first step, reference ids
run_arm die0 "$A,$C@127.0.0.1:$RPORT_die0"
grep -qxF "baton run: stage 1 -> 2: direct copy: peer link failed (E_IO)" "$TMP/die0.err" &&
    ! grep -q "peer links open" "$TMP/die0.err" &&
    [ "$(field "$TMP/die0.stats" 'j["per_step"]["redone_steps"]')" = 0 ] ||
    fail "die0: $(grep -v '^plan\|^upload\|^model' "$TMP/die0.err")"
echo "ok: a link that fails while it opens -> said at setup, hub path, reference ids"

# the relay is killed mid-run
run_arm die "$A,$C@127.0.0.1:$RPORT_die"
kill -0 "$RPID_die" 2>/dev/null && fail "die: the relay is still alive"
# every decode step went either direct (done) or through the hub
d=$(steps die copies_done)
nd=$(steps die copies_not_done)
hub=$(steps die hidden_gets)
[ "$d" -ge 1 ] && [ "$nd" -ge 1 ] && [ $((d + hub)) = 47 ] || fail "die: done $d, not done $nd, hub $hub"
echo "ok: relay killed mid-run -> $d done, then $nd not done ($hub steps through the hub), reference ids"

# the relay stalls; meanwhile another client runs on the source alone
run_arm stall "$A,$C@127.0.0.1:$RPORT_stall" &
stall_pid=$!
for _ in $(seq 400); do [ -e "$TMP/stalled" ] && break; sleep 0.025; done
[ -e "$TMP/stalled" ] || fail "stall: the relay never stalled"
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 48 --key "$K" --servers "$A" \
    --ids-file "$TMP/other.json" --quiet >/dev/null 2>"$TMP/other.err" || {
    cat "$TMP/other.err" >&2
    fail "another client of the source failed while a copy stalled"
}
[ "$(field "$TMP/other.json" 'j["generated"]')" = "$REF_IDS" ] || fail "other client: wrong ids"
wait "$stall_pid" || fail "stall arm failed"
d=$(steps stall copies_done)
nd=$(steps stall copies_not_done)
hub=$(steps stall hidden_gets)
[ "$d" -ge 1 ] && [ "$nd" -ge 1 ] && [ $((d + hub)) = 47 ] || fail "stall: done $d, not done $nd, hub $hub"
grep -q "not done (link failed: E_TIMEOUT" "$TMP/batond.a.log" || fail "stall: no write timeout logged"
echo "ok: relay stalls -> $d done, then $nd not done, reference ids; another client served meanwhile"

# 200 copies that cannot be done (not allowed; a port never dialled before,
# where nobody listens; the stalled relay): descriptors and threads back to
# baseline
"$CASES" flood "$PORT_a" "$PID_a" "$K" 200 "$PORT_down2" "$RPORT_stall" >"$TMP/flood.out" 2>&1 || {
    cat "$TMP/flood.out" >&2
    fail "flood"
}
cat "$TMP/flood.out"

# a stale cached link is retried once, at once
"$CASES" retry "$PORT_a" "$RPORT_fwd" "$PORT_c" "$K" "$TMP/step" "$TMP/go" >"$TMP/retry.out" 2>&1 &
retry_pid=$!
for _ in $(seq 400); do [ -e "$TMP/step" ] && break; sleep 0.025; done
[ -e "$TMP/step" ] || fail "retry: no first copy"
kill -KILL "$RPID_fwd"
wait "$RPID_fwd" 2>/dev/null || true
start_relay fwd2 --to "$PORT_c" --port "$RPORT_fwd"
touch "$TMP/go"
wait "$retry_pid" || {
    cat "$TMP/retry.out" >&2
    fail "retry"
}
cat "$TMP/retry.out"
kill -0 "$PID_a" && kill -0 "$PID_c" || fail "a server died"
# a clean stop of the source (under ASan: LeakSanitizer checks links and
# sessions at exit)
stop_server a
echo "PASS"
