#!/bin/bash
# The context a run asks for, on the real model (llama.context_length 2048;
# 5 layers of K and V, 8 x 4 floats per position each: 1280 bytes per
# position):
#   - a --ctx whose KV cache a server cannot hold names --ctx, the positions
#     and the bytes of that stage, in baton run and baton bench: before the
#     weights go where the server's largest buffer is smaller, and at the
#     allocation where the server refuses it (a session quota);
#   - ... named as the user gave it: "--ctx N", "the default --ctx 512" (run
#     without --ctx), "-p A + -n B (a KV cache of N positions)" (bench
#     without --ctx);
#   - baton bench refuses a -p + -n past llama.context_length unless --ctx
#     asks for that context, and a -p + -n past its --ctx; baton run a
#     prompt + -n past its context; each says which --ctx would do;
#   - a model without a usable llama.context_length is said to have none,
#     with the 2048 assumed, in run's note and bench's refusal;
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
allows="the in-process stages \\(3/4 of this machine's memory, shared by every stage\\) allow at most [0-9]+\\.[0-9] [KMGTPE]iB in one buffer"
for cmd in run bench; do
    args=(--model "$MODEL" --servers local --ctx 4000000000)
    if [ "$cmd" = run ]; then args+=(--prompt "Once upon a time" -n 4); else args+=(-p 4 -n 2 --reps 1); fi
    want_fail 1 "$TMP/kv.err" "$BATON" "$cmd" "${args[@]}"
    has_match "$TMP/kv.err" "baton $cmd: --ctx 4000000000 needs 4\.7 TiB of KV cache on stage 1 \(local, 5 layers\); $allows"
    # what shrinks it, without the server list of batond stages: the largest
    # --ctx that fits (f16, 2.4 TiB, would not)
    has_match "$TMP/kv.err" "baton $cmd: to fit: --ctx [0-9]{7,8} or less"
    ! grep -q "^upload:" "$TMP/kv.err" || fail "baton $cmd: weights uploaded before the KV check"
done
# --ctx 4294967295 (2^32 - 1, the largest it takes): the search for the
# largest --ctx that fits ends (its midpoint wrapped to 0 there and spun)
for cmd in run bench; do
    args=(--model "$MODEL" --servers local --ctx 4294967295)
    if [ "$cmd" = run ]; then args+=(--prompt x -n 2); else args+=(-p 4 -n 2 --reps 1); fi
    want_fail 1 "$TMP/kv.err" timeout 60 "$BATON" "$cmd" "${args[@]}"
    has_match "$TMP/kv.err" "baton $cmd: to fit: --ctx [0-9]{7,8} or less"
done
# split: the stage's own layers (3 of 5: 3.072e12 bytes)
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers local --split 1,1 \
    --ctx 4000000000 --prompt x -n 2
has_match "$TMP/kv.err" "baton run: --ctx 4000000000 needs 2\.8 TiB of KV cache on stage 1 \(local, 3 layers\); $allows"

# a batond whose session may hold 8 MiB: --ctx 8000 (9.8 MiB) is more than
# its largest buffer; --ctx 6000 (7680000 bytes) is not, but with the 1.1
# MiB of weights (and the I/O buffers, graphs and scratch arena) it is past
# the quota, refused before the upload. The hint names the largest --ctx
# that fits: 5209 positions (5210 is refused, 5209 runs: below)
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 8M" start_server q8
q8=127.0.0.1:$PORT_q8
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q8" --ctx 8000 --prompt x -n 2
has_line "$TMP/kv.err" "baton run: --ctx 8000 needs 9.8 MiB of KV cache on stage 1 ($q8, 5 layers); the server allows at most 8.0 MiB in one buffer (its memory for one session, batond --session-memory-bytes)"
has_line "$TMP/kv.err" "baton run: to fit: --ctx 5209 or less, --kv-type f16 (half the bytes), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q8" --ctx 5210 --prompt x -n 2
has_line "$TMP/kv.err" "baton run: to fit: --ctx 5209 or less, --kv-type f16 (half the bytes), --ubatch 2 or less, fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
# (the prompt's 3 tokens in steps of 2 and 1 need a smaller scratch arena)
"$BATON" run --model "$MODEL" --servers "$q8" --ctx 5210 --ubatch 2 --prompt x -n 2 --quiet \
    2>"$TMP/ok.err" || fail "--ctx 5210 --ubatch 2, named as fitting: $(cat "$TMP/ok.err")"
"$BATON" run --model "$MODEL" --servers "$q8" --ctx 5209 --prompt x -n 2 --quiet 2>"$TMP/ok.err" ||
    fail "--ctx 5209, named as fitting, on the 8 MiB server: $(cat "$TMP/ok.err")"
# a --ctx that is already the prompt + -n: the hint names the prompt and -n
ids7000=$(python3 -c 'print(",".join(["5"] * 7000))')
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q8" --ctx 8000 \
    --prompt-ids "$ids7000" -n 1000
has_line "$TMP/kv.err" "baton run: to fit: a shorter prompt and a smaller -n (at most 4227 positions fit, the prompt's and -n's together), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
# an f16 cache is not offered f16 again
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q8" --ctx 16000 --kv-type f16 \
    --prompt x -n 2
has_line "$TMP/kv.err" "baton run: to fit: --ctx 9670 or less, fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
! grep -q "^upload:" "$TMP/kv.err" || fail "weights uploaded before the KV check"
for cmd in run bench; do
    args=(--model "$MODEL" --servers "$q8" --ctx 6000)
    if [ "$cmd" = run ]; then args+=(--prompt x -n 2); else args+=(-p 4 -n 2 --reps 1); fi
    want_fail 1 "$TMP/kv.err" "$BATON" "$cmd" "${args[@]}"
    # (run's prompt "x" is 3 tokens, bench's 4: their steps differ a little)
    if [ "$cmd" = run ]; then step="605.0 KiB"; n=3; fit=5209; else step="793.7 KiB"; n=4; fit=5090; fi
    has_match "$TMP/kv.err" "baton $cmd: --ctx 6000 needs 7\.3 MiB of KV cache on stage 1 \($q8, 5 layers\); with the stage's 1\.1 MiB of weights, 2\.3 KiB of I/O buffers and $step for its graphs and a step's scratch arena \(the prompt's $n tokens in one step; --ubatch sets fewer\), that is (9[0-9]{6}) bytes in all \(buffers in whole pages\), more than the 8388608 bytes \(8\.0 MiB\) the server allows one session \(batond --session-memory-bytes\)"
    ! grep -q "^upload:" "$TMP/kv.err" || fail "baton $cmd: weights uploaded before the session check"
    has_line "$TMP/kv.err" "baton $cmd: to fit: --ctx $fit or less, --kv-type f16 (half the bytes), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
done
# without --ctx, the message names what set the context: run's default,
# bench's -p + -n (+ 8 positions); a session of 1800 KiB holds the weights,
# I/O buffers and graphs but not the KV cache of 512 positions
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 1800K" start_server q1800k
q1800k=127.0.0.1:$PORT_q1800k
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$q1800k" --prompt x -n 2
has_line "$TMP/kv.err" "baton run: the default --ctx 512 needs 640.0 KiB of KV cache on stage 1 ($q1800k, 5 layers); with the stage's 1.1 MiB of weights, 2.3 KiB of I/O buffers and 90.5 KiB for its graphs and a step's scratch arena (the prompt's 3 tokens in one step; --ubatch sets fewer), that is 1923552 bytes in all (buffers in whole pages), more than the 1843200 bytes (1.8 MiB) the server allows one session (batond --session-memory-bytes)"
has_line "$TMP/kv.err" "baton run: to fit: --ctx 451 or less, --kv-type f16 (half the bytes), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
want_fail 1 "$TMP/kv.err" "$BATON" bench --model "$MODEL" --servers "$q1800k" -p 4 -n 500 --reps 1
has_match "$TMP/kv.err" "baton bench: -p 4 \+ -n 500 \(a KV cache of 512 positions: -p \+ -n \+ 8, or the model's context length if less\) needs 640\.0 KiB of KV cache on stage 1 \($q1800k, 5 layers\); with the stage's 1\.1 MiB of weights, 2\.3 KiB of I/O buffers and 107\.7 KiB for its graphs and a step's scratch arena \(the prompt's 4 tokens in one step; --ubatch sets fewer\), that is 19[0-9]{5} bytes in all \(buffers in whole pages\), more than the 1843200 bytes \(1\.8 MiB\) the server allows one session \(batond --session-memory-bytes\)"
has_line "$TMP/kv.err" "baton bench: to fit: a smaller -p or -n (-p + -n at most 433: a KV cache of 441 positions), --kv-type f16 (half the bytes), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
! grep -q -- "--ctx" "$TMP/kv.err" || fail "bench without --ctx names --ctx: $(cat "$TMP/kv.err")"
# 441 positions (-p 4 + -n 429 + 8) run on it
"$BATON" bench --model "$MODEL" --servers "$q1800k" -p 4 -n 429 --reps 1 >/dev/null 2>"$TMP/ok.err" ||
    fail "bench -p 4 -n 429, named as fitting: $(cat "$TMP/ok.err")"
# a prefill step of 512 tokens: its scratch arena alone is past a 2 MiB
# session with the weights, whatever the context
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 2M" start_server q2m
q2m=127.0.0.1:$PORT_q2m
want_fail 1 "$TMP/kv.err" "$BATON" bench --model "$MODEL" --servers "$q2m" -p 900 -n 40 --reps 1
has_line "$TMP/kv.err" "baton bench: stage 1 ($q2m, 5 layers) needs 1.1 MiB of weights, 6.2 KiB of I/O buffers and 1.4 MiB for its graphs and a step's scratch arena (the default --ubatch 512) with a KV cache of one position: more than the 2.0 MiB the server allows one session (batond --session-memory-bytes)"
has_line "$TMP/kv.err" "baton bench: to fit: fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
! grep -q "^upload:" "$TMP/kv.err" || fail "bench -p 900: weights uploaded before the session check"
# the same server runs a context it can hold
"$BATON" run --model "$MODEL" --servers "$q8" --ctx 512 --prompt x -n 2 --quiet 2>"$TMP/ok.err" ||
    fail "--ctx 512 on the 8 MiB server: $(cat "$TMP/ok.err")"
# two stages: every stage is checked before any weights go up, and the
# --ctx named fits both (stage 1 of 3 layers on 1 MiB, stage 2 of 2 on 600
# KiB); one more position does not
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 1M" start_server q1m
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 600K" start_server q600k
two=127.0.0.1:$PORT_q1m,127.0.0.1:$PORT_q600k
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$two" --ctx 4000 \
    --prompt "Once upon a time" -n 8 --p2p off
has_line "$TMP/kv.err" "baton run: --ctx 4000 needs 2.9 MiB of KV cache on stage 1 (127.0.0.1:$PORT_q1m, 3 layers); the server allows at most 1.0 MiB in one buffer (its memory for one session, batond --session-memory-bytes)"
has_line "$TMP/kv.err" "baton run: --ctx 4000 needs 2.0 MiB of KV cache on stage 2 (127.0.0.1:$PORT_q600k, 2 layers); the server allows at most 600.0 KiB in one buffer (its memory for one session, batond --session-memory-bytes)"
has_line "$TMP/kv.err" "baton run: to fit: --ctx 104 or less, fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
! grep -q "^upload:" "$TMP/kv.err" || fail "two stages: weights uploaded before every stage was checked"
"$BATON" run --model "$MODEL" --servers "$two" --ctx 104 --prompt "Once upon a time" -n 8 --p2p off \
    --quiet 2>"$TMP/ok.err" || fail "--ctx 104, named as fitting both stages: $(cat "$TMP/ok.err")"
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "$two" --ctx 105 \
    --prompt "Once upon a time" -n 8 --p2p off
# a --ctx that fits but not the prompt + -n: the hint says -n must shrink
# too (a session of 1238404 bytes holds 6 positions beside the rest)
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 1238404" start_server q1238k
want_fail 1 "$TMP/kv.err" "$BATON" run --model "$MODEL" --servers "127.0.0.1:$PORT_q1238k" \
    --ctx 100 --prompt "Once upon a time" -n 8
has_line "$TMP/kv.err" "baton run: to fit: --ctx 6 or less with -n 1 or less (the prompt takes 5 of its positions), fewer layers on stage 1 (--split, or one more server in --servers), or a batond with a larger --session-memory-bytes"
"$BATON" run --model "$MODEL" --servers "127.0.0.1:$PORT_q1238k" --ctx 6 --prompt "Once upon a time" \
    -n 1 --quiet 2>"$TMP/ok.err" || fail "--ctx 6 -n 1, named as fitting: $(cat "$TMP/ok.err")"

# bench: -p + -n past llama.context_length is a usage error, found before
# the model loads, naming both, the context length and the --ctx to give
# (unchecked, this ran for hours: the timeout makes that a failure here)
want_fail 2 "$TMP/p.err" timeout 60 "$BATON" bench --model "$MODEL" -p 100000
has_line "$TMP/p.err" "baton bench: -p 100000 + -n 64 = 100064 positions exceed the model's context length (llama.context_length 2048); lower -p or -n, or give --ctx 100064 or more to run past it"
! grep -q "^model:" "$TMP/p.err" || fail "bench -p 100000: the model was loaded"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" -p 2000 -n 49
has_line "$TMP/p.err" "baton bench: -p 2000 + -n 49 = 2049 positions exceed the model's context length (llama.context_length 2048); lower -p or -n, or give --ctx 2049 or more to run past it"
# (a long --timeout: these prefill 2000+ tokens in-process; on a loaded host one
# step of 512 can pass the default 30 s deadline)
# exactly the context length runs, with no note (the KV cache is capped at 2048)
"$BATON" bench --model "$MODEL" -p 2000 -n 48 --reps 1 --timeout 600000 >"$TMP/b.out" 2>"$TMP/b.err" ||
    fail "bench -p 2000 -n 48: $(cat "$TMP/b.err")"
grep -q "^bench: .*prompt 2000, generated 48, reps 1" "$TMP/b.out" || fail "bench line: $(cat "$TMP/b.out")"
! grep -q "note:" "$TMP/b.err" || fail "a context note at -p + -n = 2048: $(cat "$TMP/b.err")"
# --ctx runs past it (with run's note); a --ctx below -p + -n is a usage error
"$BATON" bench --model "$MODEL" -p 2100 -n 2 --ctx 2102 --reps 1 --timeout 600000 >/dev/null 2>"$TMP/b.err" ||
    fail "bench -p 2100 -n 2 --ctx 2102: $(cat "$TMP/b.err")"
has_line "$TMP/b.err" "baton bench: note: a context of 2102 positions is more than the model was trained for (llama.context_length 2048); text past that may degrade"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" -p 100 -n 10 --ctx 50
has_line "$TMP/p.err" "baton bench: -p 100 + -n 10 = 110 positions exceed --ctx 50; lower -p or -n, or give --ctx 110 or more"
want_fail 2 "$TMP/p.err" "$BATON" bench --model "$MODEL" --ctx 0
has_line "$TMP/p.err" "baton bench: --ctx: '0' is too small (at least 1)"

# run: a prompt (BOS + 4 tokens) + -n past the context, default or given
want_fail 2 "$TMP/p.err" "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 600
has_line "$TMP/p.err" "baton run: prompt (5 tokens) + -n 600 = 605 exceeds the default --ctx 512; give --ctx 605 or more"
# ... and where the --ctx it would take is past the model's own context, it says so
want_fail 2 "$TMP/p.err" "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 3000
has_line "$TMP/p.err" "baton run: prompt (5 tokens) + -n 3000 = 3005 exceeds the default --ctx 512; give --ctx 3005 or more (more than the model was trained for: llama.context_length 2048)"
want_fail 2 "$TMP/p.err" "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 10 --ctx 8
has_line "$TMP/p.err" "baton run: prompt (5 tokens) + -n 10 = 15 exceeds the context --ctx 8; give --ctx 15 or more"

# a model without llama.context_length (the key renamed, same length) or
# with an unusable one (its type made f32; its value 0): 2048 is assumed,
# and said to be
ctx_model() { # ctx_model OUT MODE: a copy of the model, its context key changed
    python3 - "$MODEL" "$1" "$2" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"llama.context_length"
at = data.find(key)
assert at > 0 and data.count(key) == 1
end = at + len(key)
assert struct.unpack_from("<I", data, end) == (4,)  # GGUF u32, value 2048
assert struct.unpack_from("<I", data, end + 4) == (2048,)
if sys.argv[3] == "missing":
    data[at:end] = b"llama.context_lengtX"
elif sys.argv[3] == "f32":
    struct.pack_into("<I", data, end, 6)  # GGUF f32: the same 4 bytes follow
else:
    struct.pack_into("<I", data, end + 4, 0)
open(sys.argv[2], "wb").write(data)
PY
}
for mode in missing f32 zero; do
    ctx_model "$TMP/ctx-$mode.gguf" "$mode"
    if [ "$mode" = missing ]; then what="no llama.context_length"; else what="no usable llama.context_length"; fi
    "$BATON" run --model "$TMP/ctx-$mode.gguf" --prompt hi -n 2 --ctx 3000 --quiet 2>"$TMP/n.err" ||
        fail "run --ctx 3000 on the $mode model: $(cat "$TMP/n.err")"
    has_line "$TMP/n.err" "baton run: note: a context of 3000 positions is more than the model was trained for (the model has $what; 2048 assumed); text past that may degrade"
    want_fail 2 "$TMP/p.err" "$BATON" bench --model "$TMP/ctx-$mode.gguf" -p 2000 -n 49
    has_line "$TMP/p.err" "baton bench: -p 2000 + -n 49 = 2049 positions exceed the model's context length (the model has $what; 2048 assumed); lower -p or -n, or give --ctx 2049 or more to run past it"
done

# bench --timeout: run's parser and bounds ...
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 86400001
has_line "$TMP/t.err" "baton bench: --timeout: '86400001' is too large (at most 86400000)"
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 1s
has_line "$TMP/t.err" "baton bench: --timeout: '1s' is not an integer"
want_fail 2 "$TMP/t.err" "$BATON" bench --model "$MODEL" --timeout 0
has_line "$TMP/t.err" "baton bench: --timeout: '0' is too small (at least 1)"
# ... and its meaning: a server that accepts and never answers fails the
# run after --timeout 300 ms, not the default 30 s
start_py_listener silent '
held = []
while True:
    held.append(s.accept()[0])'
silent=127.0.0.1:$PORT_silent
t0=$(date +%s%N)
want_fail 1 "$TMP/t.err" "$BATON" bench --model "$MODEL" --servers "$silent" -p 4 -n 2 --reps 1 \
    --timeout 300
ms=$((($(date +%s%N) - t0) / 1000000))
has_line "$TMP/t.err" "baton bench: stage 1 ($silent): connect failed: E_TIMEOUT (deadline passed)"
[ "$(tail -n 1 "$TMP/t.err")" = "baton bench: stage 1 ($silent) timed out: it took the TCP connection but sent no batond HELLO reply within --timeout 300 ms: is it a batond port? (a busy batond gets more time from a larger --timeout)" ] ||
    fail "bench --timeout 300: no --timeout hint: $(cat "$TMP/t.err")"
[ "$ms" -lt 10000 ] || fail "bench --timeout 300 took $ms ms"
# a port where something else answers (an HTTP server's reply to the HELLO):
# the protocol error says so at once, not after --timeout
start_py_listener http '
while True:
    c = s.accept()[0]
    c.recv(100)
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    c.close()'
want_fail 1 "$TMP/t.err" "$BATON" bench --model "$MODEL" --servers "127.0.0.1:$PORT_http" -p 4 -n 2 \
    --reps 1
has_line "$TMP/t.err" "baton bench: stage 1 (127.0.0.1:$PORT_http): connect failed: E_PROTO (protocol violation); what answered there does not speak batond's protocol: is it a batond port?"
# a listener whose accept queue is full (it never accepts): no TCP
# connection at all, and the message says so (not "it took the connection")
start_py_listener full '
s.listen(0)
held = []
for _ in range(3):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(s.getsockname())
    except BlockingIOError:
        pass
    held.append(c)
import time
time.sleep(120)'
want_fail 1 "$TMP/t.err" "$BATON" bench --model "$MODEL" --servers "127.0.0.1:$PORT_full" -p 4 -n 2 \
    --reps 1 --timeout 300
[ "$(tail -n 1 "$TMP/t.err")" = "baton bench: stage 1 (127.0.0.1:$PORT_full) timed out: no TCP connection within --timeout 300 ms: is the host up and the port open?" ] ||
    fail "full accept queue: $(cat "$TMP/t.err")"
want_fail 1 "$TMP/t.err" "$BATON" info --servers "127.0.0.1:$PORT_http"
has_line "$TMP/t.err" "baton info: 127.0.0.1:$PORT_http: connect failed: E_PROTO (protocol violation); what answered there does not speak batond's protocol: is it a batond port?"
# a port that takes the connection and closes it at once: said as a closed
# handshake, with the batond question, by bench and info alike
start_py_listener closer '
while True:
    s.accept()[0].close()'
want_fail 1 "$TMP/t.err" "$BATON" bench --model "$MODEL" --servers "127.0.0.1:$PORT_closer" -p 4 \
    -n 2 --reps 1
has_match "$TMP/t.err" "baton bench: stage 1 \(127\.0\.0\.1:$PORT_closer\): connect failed: E_IO \(.*\); the connection closed during the handshake: is it a batond port \(or a batond that was stopping\)\?"
want_fail 1 "$TMP/t.err" "$BATON" info --servers "127.0.0.1:$PORT_closer"
has_match "$TMP/t.err" "baton info: 127\.0\.0\.1:$PORT_closer: connect failed: E_IO \(.*\); the connection closed during the handshake: is it a batond port \(or a batond that was stopping\)\?"

# the help texts say so
"$BATON" bench --help >"$TMP/help"
grep -q -- "--timeout MS  deadline of every server call (default 30000)" "$TMP/help" ||
    fail "bench --help: no --timeout"
grep -q -- "--ctx N       KV cache positions" "$TMP/help" || fail "bench --help: no --ctx"
grep -q "llama.context_length" "$TMP/help" || fail "bench --help: no context length rule"
# the context and ubatch used are in the bench line and the JSON, and the
# JSON stays valid for a model path with a quote and a backslash
odd="$TMP/a\"b\\c.gguf"
cp "$MODEL" "$odd"
"$BATON" bench --model "$odd" -p 4 -n 2 --reps 1 --json "$TMP/b.json" >"$TMP/b.out" 2>/dev/null ||
    fail "bench of $odd failed"
grep -qF "bench: $odd, servers local, split (equal), prompt 4, generated 2, reps 1, threads 1, ctx 14, ubatch 4, pipeline on, p2p on (not used: in-process stages), slots 2" \
    "$TMP/b.out" || fail "bench line: $(cat "$TMP/b.out")"
python3 - "$TMP/b.json" "$odd" <<'PY' || fail "bench JSON: $(cat "$TMP/b.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == sys.argv[2], d["model"]
assert d["ctx"] == 14 and d["ubatch"] == 4 and d["prompt"] == 4 and d["slots"] == 2, d
PY
# an output file that is the model, or an empty path, is refused before the
# model is read (it used to be overwritten, or fail after the whole run)
cp "$MODEL" "$TMP/own.gguf"
want_fail 1 "$TMP/o.err" "$BATON" bench --model "$TMP/own.gguf" -p 4 -n 2 --reps 1 \
    --json "$TMP/own.gguf"
has_line "$TMP/o.err" "baton bench: --json $TMP/own.gguf and --model $TMP/own.gguf are the same file; write it elsewhere"
for opt in --ids-file --stats-json; do
    want_fail 1 "$TMP/o.err" "$BATON" run --model "$TMP/own.gguf" --prompt x -n 2 "$opt" "$TMP/own.gguf"
    has_line "$TMP/o.err" "baton run: $opt $TMP/own.gguf and --model $TMP/own.gguf are the same file; write it elsewhere"
done
# ... or the client key (a fresh-user walkthrough: --ids-file K replaced the key)
"$BATON" keygen -o "$TMP/own.key" 2>/dev/null || fail "keygen"
cp -p "$TMP/own.key" "$TMP/own.key.orig"
for opt in --ids-file --stats-json --logits-out; do
    want_fail 1 "$TMP/o.err" "$BATON" run --model "$MODEL" --servers local --key "$TMP/own.key" \
        --prompt x -n 2 "$opt" "$TMP/own.key"
    has_line "$TMP/o.err" "baton run: $opt $TMP/own.key and --key $TMP/own.key are the same file; write it elsewhere"
done
want_fail 1 "$TMP/o.err" env BATON_KEY_FILE="$TMP/own.key" "$BATON" run --model "$MODEL" --servers local \
    --prompt x -n 2 --ids-file "$TMP/own.key"
has_line "$TMP/o.err" "baton run: --ids-file $TMP/own.key and BATON_KEY_FILE $TMP/own.key are the same file; write it elsewhere"
want_fail 1 "$TMP/o.err" "$BATON" bench --model "$MODEL" --servers local --key "$TMP/own.key" -p 4 -n 2 \
    --reps 1 --json "$TMP/own.key"
has_line "$TMP/o.err" "baton bench: --json $TMP/own.key and --key $TMP/own.key are the same file; write it elsewhere"
cmp -s "$TMP/own.key" "$TMP/own.key.orig" || fail "the key file was changed"
cmp -s "$MODEL" "$TMP/own.gguf" || fail "the model file was changed"
# (an empty path is a usage error, exit 2; it was exit 1)
want_fail 2 "$TMP/o.err" "$BATON" bench --model "$MODEL" -p 4 -n 2 --reps 1 --json ''
has_line "$TMP/o.err" "baton bench: --json: an empty path (see \`baton bench --help\`)"
for opt in --stats-json --ids-file --logits-out; do
    want_fail 2 "$TMP/o.err" "$BATON" run --model "$MODEL" --prompt x -n 2 "$opt" ''
    has_line "$TMP/o.err" "baton run: $opt: an empty path (see \`baton run --help\`)"
done
# an empty --key (--key "$UNSET") is a usage error in run, bench and info as
# in batond, not a run without a key (an empty BATON_KEY_FILE still is none)
want_fail 2 "$TMP/o.err" "$BATON" run --model "$MODEL" --prompt x -n 2 --key ''
has_line "$TMP/o.err" "baton run: --key: an empty path (see \`baton run --help\`)"
want_fail 2 "$TMP/o.err" "$BATON" bench --model "$MODEL" -p 4 -n 2 --reps 1 --key ''
has_line "$TMP/o.err" "baton bench: --key: an empty path (see \`baton bench --help\`)"
want_fail 2 "$TMP/o.err" "$BATON" info --servers local --key ''
has_line "$TMP/o.err" "baton info: --key: an empty path (see \`baton info --help\`)"
# ... and an empty --model (it was "baton run: : cannot open", exit 1)
want_fail 2 "$TMP/o.err" "$BATON" run --model '' --prompt x -n 2
has_line "$TMP/o.err" "baton run: --model: an empty path (see \`baton run --help\`)"
want_fail 2 "$TMP/o.err" "$BATON" bench --model '' -p 4 -n 2 --reps 1
has_line "$TMP/o.err" "baton bench: --model: an empty path (see \`baton bench --help\`)"
BATON_KEY_FILE='' "$BATON" run --model "$MODEL" --prompt x -n 2 >/dev/null 2>"$TMP/o.err" ||
    fail "run with an empty BATON_KEY_FILE: $(cat "$TMP/o.err")"
# a stray word is named, not taken for a missing --model
want_fail 2 "$TMP/o.err" "$BATON" bench --model "$MODEL" extra
has_line "$TMP/o.err" "baton bench: unexpected argument 'extra' (see --help)"
echo PASS
