#!/bin/bash
# A stage server that dies or goes silent mid-run ends `baton run` with a
# non-zero exit, within its deadline, and a message naming that stage.
source "$(dirname "$0")/lib.sh"
need_model

start_server a
start_server b
start_server c
SERVERS=127.0.0.1:$PORT_a,127.0.0.1:$PORT_b,127.0.0.1:$PORT_c

# 1. killed: stop stage 2 once generation has started, then kill it.
"$BATON" run --model "$MODEL" --servers "$SERVERS" --split 1,1,1 --prompt "Once upon a time" \
    -n 2000 --ctx 2048 --ignore-eos --timeout 5000 >"$TMP/kill.out" 2>"$TMP/kill.err" &
run=$!
for _ in $(seq 400); do
    [ -s "$TMP/kill.out" ] && break
    sleep 0.01
done
kill -STOP "$PID_b"
kill -KILL "$PID_b"
start=$SECONDS
rc=0
wait "$run" || rc=$?
[ "$rc" -ne 0 ] || fail "run exited 0 although stage 2 was killed (out: $(wc -c <"$TMP/kill.out") bytes)"
[ $((SECONDS - start)) -le 10 ] || fail "run took longer than its deadline after the kill"
grep -q "^baton run: stage 2 (127.0.0.1:$PORT_b)" "$TMP/kill.err" || { cat "$TMP/kill.err" >&2; fail "message does not name stage 2"; }
# a closed connection says what may have closed it (no notice tells a stop from a death)
if grep -q "^baton run: stage 2 (127.0.0.1:$PORT_b): .*E_IO" "$TMP/kill.err"; then
    grep -q "E_IO (connection error or closed); the server closed the connection: it was stopped or it died (its log says which" \
        "$TMP/kill.err" || fail "E_IO without its hint: $(cat "$TMP/kill.err")"
fi
echo "ok: killed stage named: $(grep '^baton run: stage 2' "$TMP/kill.err" | head -1)"

# 2. silent: stage 3 stops answering (SIGSTOP); the deadline ends the run.
"$BATON" run --model "$MODEL" --servers "127.0.0.1:$PORT_a,127.0.0.1:$PORT_c" --split 1,1 \
    --prompt "Once upon a time" -n 2000 --ctx 2048 --ignore-eos --timeout 1500 >"$TMP/stop.out" 2>"$TMP/stop.err" &
run=$!
for _ in $(seq 400); do
    [ -s "$TMP/stop.out" ] && break
    sleep 0.01
done
kill -STOP "$PID_c"
start=$SECONDS
rc=0
wait "$run" || rc=$?
kill -CONT "$PID_c"
[ "$rc" -ne 0 ] || fail "run exited 0 although stage 2 went silent"
[ $((SECONDS - start)) -le 6 ] || fail "silent stage: run did not end within its deadline"
grep -q "^baton run: stage 2 (127.0.0.1:$PORT_c).*E_TIMEOUT" "$TMP/stop.err" || { cat "$TMP/stop.err" >&2; fail "message does not name the silent stage"; }
# ... and the deadline that passed is named, with the option that sets it
grep -qxF "baton run: stage 2 (127.0.0.1:$PORT_c) timed out: either it did not answer within --timeout 1500 ms (the deadline of every server call; a larger --timeout gives a slow server more time), or it stopped waiting for the rest of a request this side was still sending (its frame deadline, policy frame_timeout, default 10s: a slow link needs a larger one)" \
    "$TMP/stop.err" || { cat "$TMP/stop.err" >&2; fail "no --timeout hint for the silent stage"; }
echo "ok: silent stage named: $(grep '^baton run: stage 2' "$TMP/stop.err" | head -1)"
echo "PASS"
