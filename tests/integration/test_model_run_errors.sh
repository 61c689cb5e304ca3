#!/bin/bash
# Where the errors of `baton run` and `baton bench` go, and what they say:
#   - run: an error after text was streamed to stdout starts its own line
#     (stdout gets the text's "\n" first), so on a terminal it does not
#     continue the text ("Once upon a timebaton run: ...");
#   - bench: a later repetition that fails prints its error lines (they are
#     not lost with its model/plan/upload/summary chatter) and which
#     repetition it was; a first repetition's error, already on stderr as
#     it happened, is not followed by a "repetition 1 failed";
#   - run: ALLOC_BUFFER of the KV cache refused with E_LIMIT (the server's
#     table of buffers is full) is reported as the server said it, not as a
#     KV cache too large for --ctx.
source "$(dirname "$0")/lib.sh"
need_model
HOG="$BUILD_DIR/tests/buffer_hog"
[ -x "$HOG" ] || fail "$HOG not built"

# want_fail CODE OUT-FILE ERR-FILE CMD...: the exit status, stdout and stderr kept
want_fail() {
    local want=$1 out=$2 err=$3 rc=0
    shift 3
    "$@" >"$out" 2>"$err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$err")"
}
has_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in: $(cat "$1")"; }

# --- run: the streamed prompt's line is ended before the error ---
# a compute budget of 1000 FLOPs: the prefill graph (after the prompt is
# written to stdout) is refused
BATOND_EXTRA="${BATOND_EXTRA:-} --max-graph-flops 1000" start_server flops
flops=127.0.0.1:$PORT_flops
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" --servers "$flops" \
    --prompt "Once upon a time" -n 4
printf 'Once upon a time\n' >"$TMP/want.out"
cmp -s "$TMP/want.out" "$TMP/run.out" ||
    fail "stdout is not the prompt and a newline: $(od -c "$TMP/run.out")"
[ "$(tail -n 2 "$TMP/run.err" | head -n 1)" = "baton run: stage 1 ($flops): step failed: E_LIMIT (limit exceeded)" ] ||
    fail "stderr: $(cat "$TMP/run.err")"
# ... and says what the user can lower
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: a step's scratch and compute on the server grow with the context (the default --ctx 512) and the ubatch (--ubatch 512), its nodes with the stage's layers (--split); batond --print-policy shows the server's limits" ] ||
    fail "last stderr line: $(cat "$TMP/run.err")"
# stdout and stderr to one file, as a terminal shows them: two lines
rc=0
"$BATON" run --model "$MODEL" --servers "$flops" --prompt "Once upon a time" -n 4 \
    >"$TMP/both" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "run on the 1000-FLOP server: exit $rc"
has_line "$TMP/both" "Once upon a time"
has_line "$TMP/both" "baton run: stage 1 ($flops): step failed: E_LIMIT (limit exceeded)"
# --quiet streams nothing, so nothing is added to stdout
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" --servers "$flops" \
    --prompt "Once upon a time" -n 4 --quiet
[ ! -s "$TMP/run.out" ] || fail "--quiet wrote to stdout: $(od -c "$TMP/run.out")"

# --- bench: a later repetition's errors reach stderr ---
# a relay to a batond that takes one connection (repetition 1's) and then
# stops listening: repetition 2 cannot connect
start_server b
python3 - "$PORT_b" "$TMP/port.once" <<'PY' &
import os, socket, sys, threading
up = int(sys.argv[1])
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
down, _ = s.accept()
s.close()
upc = socket.create_connection(("127.0.0.1", up))
def pump(a, b):
    while True:
        d = a.recv(65536)
        if not d:
            break
        b.sendall(d)
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
t = threading.Thread(target=pump, args=(upc, down), daemon=True)
t.start()
pump(down, upc)
t.join()
PY
PIDS+=("$!")
for _ in $(seq 200); do [ -s "$TMP/port.once" ] && break; sleep 0.025; done
[ -s "$TMP/port.once" ] || fail "the one-connection relay did not start"
once=127.0.0.1:$(cat "$TMP/port.once")
want_fail 1 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" --servers "$once" \
    -p 4 -n 2 --reps 3
[ "$(grep -c "^summary:" "$TMP/b.err")" -eq 1 ] || fail "repetition 1 did not run: $(cat "$TMP/b.err")"
[ "$(tail -n 2 "$TMP/b.err")" = "baton bench: stage 1 ($once): connect failed: E_IO (connection error or closed); is batond running and listening there?
baton bench: repetition 2 of 3 failed; repetition 1 ran" ] ||
    fail "bench, repetition 2 refused: $(cat "$TMP/b.err")"
[ "$(grep -c "^plan:" "$TMP/b.err")" -eq 1 ] || fail "repetition 2's plan lines printed: $(cat "$TMP/b.err")"
[ ! -s "$TMP/b.out" ] || fail "a table after a failed repetition: $(cat "$TMP/b.out")"

# a first repetition's error is the last line: no "repetition 1 failed"
stop_server b
want_fail 1 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" \
    --servers "127.0.0.1:$PORT_b" -p 4 -n 2 --reps 3 --timeout 5000
[ "$(tail -n 1 "$TMP/b.err")" = "baton bench: stage 1 (127.0.0.1:$PORT_b): connect failed: E_IO (connection error or closed); is batond running and listening there?" ] ||
    fail "bench, repetition 1 refused: $(cat "$TMP/b.err")"
! grep -q "repetition" "$TMP/b.err" || fail "a repetition line after repetition 1's error: $(cat "$TMP/b.err")"

# --- run: E_LIMIT at the KV cache's ALLOC_BUFFER is not blamed on --ctx ---
# another session holds every buffer the server has but one, which the
# weights take
start_server hog
"$HOG" "$PORT_hog" "$TMP/hog.ready" &
PIDS+=("$!")
for _ in $(seq 400); do [ -s "$TMP/hog.ready" ] && break; sleep 0.025; done
[ -s "$TMP/hog.ready" ] || fail "buffer_hog did not fill the table"
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_hog" --prompt x -n 2 --ctx 64
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: stage 1 (127.0.0.1:$PORT_hog): ALLOC_BUFFER (KV cache) failed: E_LIMIT (limit exceeded)" ] ||
    fail "KV cache E_LIMIT: $(cat "$TMP/run.err")"
! grep -q "needs .* of KV cache" "$TMP/run.err" || fail "E_LIMIT blamed on the KV cache size"
echo PASS
