#!/bin/bash
# The context a run asks for, on the real model (llama.context_length 2048;
# 5 layers of K and V, 8 x 4 floats per position each: 1280 bytes per
# position):
#   - a --ctx whose KV cache a server cannot hold names --ctx, the positions
#     and the bytes of that stage, in baton run and baton bench: before the
#     weights go where the server's largest buffer is smaller, and at the
#     allocation where the server refuses it (a session quota);
#   - baton bench refuses a -p + -n past llama.context_length unless --ctx
#     asks for that context, and a -p + -n past its --ctx;
#   - baton bench --timeout parses as run's and bounds every server call.
source "$(dirname "$0")/lib.sh"
need_model

# want_fail CODE ERR-FILE CMD...: the exit status, stderr kept in ERR-FILE
want_fail() {
    local want=$1 err=$2 rc=0
    shift 2
    "$@" >/dev/null 2>"$err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$err")"
}
# has_line FILE LINE / has_match FILE ERE: one whole line of stderr
has_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in: $(cat "$1")"; }
has_match() { grep -qxE -- "$2" "$1" || fail "no line matching '$2' in: $(cat "$1")"; }

# --ctx 4000000000: 5 layers * 2 * 4e9 * 128 bytes = 5.12e12 = 4.7 TiB, more
# than any in-process server grants (3/4 of RAM): said before the upload
allows='the server allows at most [0-9]+\.[0-9] [KMGTPE]iB in one buffer'
for cmd in run bench; do
    args=(--model "$MODEL" --servers local --ctx 4000000000)
    if [ "$cmd" = run ]; then args+=(--prompt "Once upon a time" -n 4); else args+=(-p 4 -n 2 --reps 1); fi
    want_fail 1 "$TMP/kv.err" "$BATON" "$cmd" "${args[@]}"
    has_match "$TMP/kv.err" "baton $cmd: --ctx 4000000000 needs 4\.7 TiB of KV cache on stage 1 \(local, 5 layers\); $allows"
    ! grep -q "^upload:" "$TMP/kv.err" || fail "baton $cmd: weights uploaded before the KV check"
done
# split: the stage's own layers (3 of 5: 3.072e12 bytes)
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers local --split 1,1 \
    --ctx 4000000000 --prompt x -n 2
has_match "$TMP/kv.err" "baton run: --ctx 4000000000 needs 2\.8 TiB of KV cache on stage 1 \(local, 3 layers\); $allows"

# a batond whose session may hold 8 MiB: --ctx 8000 (9.8 MiB) is more than
# its largest buffer; --ctx 6000 (7680000 bytes) is not, but with the 1.1
# MiB of weights it is past the quota, refused at the allocation
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 8M" start_server q8
q8=127.0.0.1:$PORT_q8
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q8" --ctx 8000 --prompt x -n 2
has_line "$TMP/kv.err" "baton run: --ctx 8000 needs 9.8 MiB of KV cache on stage 1 ($q8, 5 layers); the server allows at most 8.0 MiB in one buffer"
! grep -q "^upload:" "$TMP/kv.err" || fail "weights uploaded before the KV check"
for cmd in run bench; do
    args=(--model "$MODEL" --servers "$q8" --ctx 6000)
    if [ "$cmd" = run ]; then args+=(--prompt x -n 2); else args+=(-p 4 -n 2 --reps 1); fi
    want_fail 1 "$TMP/kv.err" "$BATON" "$cmd" "${args[@]}"
    has_line "$TMP/kv.err" "baton $cmd: --ctx 6000 needs 7.3 MiB of KV cache on stage 1 ($q8, 5 layers); the server refused it: E_QUOTA (memory quota exhausted), with 1.1 MiB of weights held"
done
# the same server runs a context it can hold
"$BATON" run --model "$MODEL" --servers "$q8" --ctx 512 --prompt x -n 2 --quiet 2>"$TMP/ok.err" ||
    fail "--ctx 512 on the 8 MiB server: $(cat "$TMP/ok.err")"

# bench: -p + -n past llama.context_length is a usage error, found before
# the model loads, naming both, the context length and the --ctx to give
# (unchecked, this ran for hours: the timeout makes that a failure here)
want_fail 2 "$TMP/p.err" timeout 60 "$BATON" bench --model "$MODEL" -p 100000
has_line "$TMP/p.err" "baton bench: -p 100000 + -n 64 = 100064 positions exceed the model's context length (llama.context_length 2048); lower -p or -n, or give --ctx 100064 or more to run past it"
! grep -q "^model:" "$TMP/p.err" || fail "bench -p 100000: the model was loaded"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" -p 2000 -n 49
has_line "$TMP/p.err" "baton bench: -p 2000 + -n 49 = 2049 positions exceed the model's context length (llama.context_length 2048); lower -p or -n, or give --ctx 2049 or more to run past it"
# exactly the context length runs, with no note (the KV cache is capped at 2048)
"$BATON" bench --model "$MODEL" -p 2000 -n 48 --reps 1 >"$TMP/b.out" 2>"$TMP/b.err" ||
    fail "bench -p 2000 -n 48: $(cat "$TMP/b.err")"
grep -q "^bench: .*prompt 2000, generated 48, reps 1" "$TMP/b.out" || fail "bench line: $(cat "$TMP/b.out")"
! grep -q "note:" "$TMP/b.err" || fail "a context note at -p + -n = 2048: $(cat "$TMP/b.err")"
# --ctx runs past it (with run's note); a --ctx below -p + -n is a usage error
"$BATON" bench --model "$MODEL" -p 2100 -n 2 --ctx 2102 --reps 1 >/dev/null 2>"$TMP/b.err" ||
    fail "bench -p 2100 -n 2 --ctx 2102: $(cat "$TMP/b.err")"
has_line "$TMP/b.err" "baton bench: note: a context of 2102 positions is more than the model was trained for (llama.context_length 2048); text past that may degrade"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" -p 100 -n 10 --ctx 50
has_line "$TMP/p.err" "baton bench: -p 100 + -n 10 = 110 positions exceed --ctx 50"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" --ctx 0
has_line "$TMP/p.err" "baton bench: --ctx: '0' is too small (at least 1)"

# bench --timeout: run's parser and bounds ...
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 86400001
has_line "$TMP/t.err" "baton bench: --timeout: '86400001' is too large (at most 86400000)"
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 1s
has_line "$TMP/t.err" "baton bench: --timeout: '1s' is not an integer"
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 0
has_line "$TMP/t.err" "baton bench: --timeout: '0' is too small (at least 1)"
# ... and its meaning: a server that accepts and never answers fails the
# run after --timeout 300 ms, not the default 30 s
python3 - "$TMP/port.silent" <<'PY' &
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
while True:
    held.append(s.accept()[0])
PY
PIDS+=("$!")
for _ in $(seq 200); do [ -s "$TMP/port.silent" ] && break; sleep 0.025; done
[ -s "$TMP/port.silent" ] || fail "the silent listener did not start"
silent=127.0.0.1:$(cat "$TMP/port.silent")
t0=$(date +%s%N)
want_fail 1 "$TMP/t.err" "$BATON" bench --model "$MODEL" --servers "$silent" -p 4 -n 2 --reps 1 \
    --timeout 300
ms=$((($(date +%s%N) - t0) / 1000000))
has_line "$TMP/t.err" "baton bench: stage 1 ($silent): connect failed: E_TIMEOUT (deadline passed)"
[ "$ms" -lt 10000 ] || fail "bench --timeout 300 took $ms ms"

# the help texts say so
"$BATON" bench --help >"$TMP/help"
grep -q -- "--timeout MS  deadline of every server call (default 30000)" "$TMP/help" ||
    fail "bench --help: no --timeout"
grep -q -- "--ctx N       KV cache positions" "$TMP/help" || fail "bench --help: no --ctx"
grep -q "llama.context_length" "$TMP/help" || fail "bench --help: no context length rule"
echo PASS
