#!/bin/bash
# Where the errors of `baton run` and `baton bench` go, and what they say:
#   - run: an error after text was streamed to stdout starts its own line
#     (stdout gets the text's "\n" first), so on a terminal it does not
#     continue the text ("Once upon a timebaton run: ...");
#   - run: a SET_TENSOR over the server's max message size (small, and far
#     larger than the socket buffers) is E_LIMIT, with a line naming the
#     message's bytes and batond --max-message-bytes;
#   - bench: a later repetition that fails prints its error lines (they are
#     not lost with its model/plan/upload/summary chatter) and which
#     repetition it was, then the table of the repetitions that finished
#     (and no --json); a first repetition's error, already on stderr as
#     it happened, is not followed by a "repetition 1 failed";
#   - run: ALLOC_BUFFER of the KV cache refused with E_LIMIT (the server's
#     table of buffers is full) is reported as the server said it, not as a
#     KV cache too large for --ctx;
#   - run: ALLOC_BUFFER of the weights refused for memory (E_LIMIT: past
#     --total-memory-bytes; E_QUOTA: past --session-memory-bytes) names the
#     bytes and the limits; a full table of buffers (E_LIMIT) does not;
#   - run: connect refused at the server's connection limit says so;
#   - run: a limit met by an in-process stage names no batond flag;
#   - run with stdout or stderr closed: a server connection does not take
#     that descriptor, so the text and log lines do not go into it.
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
# a server with 3000000 bytes for all sessions, 1100000 of them held by
# another session (buffer_hog --bytes), leaves stories260K's session its
# buffers (weights, KV cache, I/O) and registered graphs, but not the
# prefill's scratch arena: the first GRAPH_RUN (after the prompt is written
# to stdout) is refused. Its own limit (the total) fits all of it, so the
# check before the upload lets it through.
BATOND_EXTRA="${BATOND_EXTRA:-} --total-memory-bytes 3000000" start_server quota
quota=127.0.0.1:$PORT_quota
"$HOG" "$PORT_quota" "$TMP/quota.ready" --bytes 1100000 &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$TMP/quota.ready" ] && break; sleep 0.05; done
[ "$(cat "$TMP/quota.ready")" = 1 ] || fail "buffer_hog --bytes did not hold its buffer"
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" --servers "$quota" \
    --prompt "Once upon a time" -n 4
printf 'Once upon a time\n' >"$TMP/want.out"
cmp -s "$TMP/want.out" "$TMP/run.out" ||
    fail "stdout is not the prompt and a newline: $(od -c "$TMP/run.out")"
[ "$(tail -n 3 "$TMP/run.err" | head -n 1)" = "baton run: stage 1 ($quota): GRAPH_RUN failed: E_QUOTA (memory quota exhausted)" ] ||
    fail "stderr: $(cat "$TMP/run.err")"
# ... and says what the user can lower, and what else the session's memory
# holds (no --ubatch was given: the step is the prompt's 5 tokens)
[ "$(tail -n 2 "$TMP/run.err" | head -n 1)" = "baton run: a step's scratch and compute on the server grow with the KV-cache cells (the default --ctx 512) and the tokens of a step (the prompt's 5 tokens in one step; --ubatch sets fewer), its nodes with the stage's layers (--split); the scratch arena is at most 1.0 GiB per session (fixed) and shares the session's memory (batond --session-memory-bytes) with the stage's weights and KV cache; batond --print-policy shows the server's other limits (session_memory_bytes, max_graph_flops, max_graph_nodes)" ] ||
    fail "hint line: $(cat "$TMP/run.err")"
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: stage 1's session holds 1.1 MiB of weights, 640.0 KiB of KV cache and 2.3 KiB of I/O buffers of the 2.9 MiB the server allows one session; its registered graphs and a step's scratch arena need more than the rest, or than other sessions leave free of the server's memory" ] ||
    fail "last stderr line: $(cat "$TMP/run.err")"
# batond's log names the limit, before the command's error line
grep -A1 -E "^batond: session [0-9]+: a graph's scratch arena of [0-9]+ bytes( \([0-9.]+ [KM]iB\))? does not fit the memory still free of all sessions \(total_memory_bytes\)\$" \
    "$TMP/batond.quota.log" | grep -qE "^batond: session [0-9]+ GRAPH_RUN: E_QUOTA\$" ||
    fail "batond's log does not name total_memory_bytes: $(cat "$TMP/batond.quota.log")"
# stdout and stderr to one file, as a terminal shows them: two lines
rc=0
"$BATON" run --model "$MODEL" --servers "$quota" --prompt "Once upon a time" -n 4 \
    >"$TMP/both" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "run on the server short of memory: exit $rc"
has_line "$TMP/both" "Once upon a time"
has_line "$TMP/both" "baton run: stage 1 ($quota): GRAPH_RUN failed: E_QUOTA (memory quota exhausted)"
# --quiet streams nothing, so nothing is added to stdout
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" --servers "$quota" \
    --prompt "Once upon a time" -n 4 --quiet
[ ! -s "$TMP/run.out" ] || fail "--quiet wrote to stdout: $(od -c "$TMP/run.out")"

# --- run: a compute budget of 1000 FLOPs refuses the graphs when they are
# registered, with the model's upload, before any text is streamed ---
BATOND_EXTRA="${BATOND_EXTRA:-} --max-graph-flops 1000" start_server flops
flops=127.0.0.1:$PORT_flops
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" --servers "$flops" \
    --prompt "Once upon a time" -n 4
[ ! -s "$TMP/run.out" ] || fail "text streamed before the graphs were accepted: $(od -c "$TMP/run.out")"
# register_refused WHO ENDPOINT GRAPHS-LIMIT POLICY-TEXT: run.err ends with
# the refusal, the line naming both limits a refused registration can come
# from, and where the server's limits are
register_refused() {
    [ "$(tail -n 4 "$TMP/run.err" | head -n 1)" = "baton run: stage 1 ($2): GRAPH_REGISTER failed: E_LIMIT (limit exceeded)" ] ||
        fail "$1 stderr: $(cat "$TMP/run.err")"
    tail -n 3 "$TMP/run.err" | head -n 1 | grep -qE "^baton run: stage 1's graph for a step of [0-9]+ tokens? has [0-9]+ nodes and [0-9]+ FLOPs \\(" ||
        fail "$1: no graph figures: $(cat "$TMP/run.err")"
    [ "$(tail -n 2 "$TMP/run.err" | head -n 1)" = "baton run: the run registers 2 graphs on stage 1 (2 step shapes x 1 input slot); a server keeps at most max_graphs_per_session of them ($3), and refuses a graph over its node or compute limits too" ] ||
        fail "$1 graphs line: $(cat "$TMP/run.err")"
    [ "$(tail -n 1 "$TMP/run.err")" = "baton run: a step's scratch and compute on the server grow with the KV-cache cells (the default --ctx 512) and the tokens of a step (the prompt's 5 tokens in one step; --ubatch sets fewer), its nodes with the stage's layers (--split); the scratch arena is at most 1.0 GiB per session (fixed); $4 (session_memory_bytes, max_graph_flops, max_graph_nodes)" ] ||
        fail "$1 last stderr line: $(cat "$TMP/run.err")"
}
register_refused flops "$flops" "batond --max-graphs-per-session, default 32" \
    "batond --print-policy shows the server's other limits"
flops_n=$(sed -n "s/^baton run: stage 1's graph for a step of [0-9]* tokens\{0,1\} has [0-9]* nodes and \([0-9]*\) FLOPs (batond's defaults, which its policy may lower: max_graph_nodes 8192, max_graph_flops 50000000000000)\$/\1/p" "$TMP/run.err")
[ -n "$flops_n" ] && [ "$flops_n" -gt 1000 ] || fail "no FLOPs over 1000: $(cat "$TMP/run.err")"
# batond's log names the limit, before the command's error line
grep -A1 -E "^batond: session [0-9]+: a graph of [0-9]+ FLOPs is over the compute budget of 1000 FLOPs a graph \(max_graph_flops\)\$" \
    "$TMP/batond.flops.log" | grep -qE "^batond: session [0-9]+ GRAPH_REGISTER: E_LIMIT\$" ||
    fail "batond's log does not name max_graph_flops: $(cat "$TMP/batond.flops.log")"
# ... and the graph count (max_graphs_per_session 0: not even one)
BATOND_EXTRA="${BATOND_EXTRA:-} --max-graphs-per-session 0" start_server nographs
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers 127.0.0.1:$PORT_nographs --prompt "Once upon a time" -n 4
grep -A1 -E "^batond: session [0-9]+: a graph to register past the 0 graphs a session may hold \(max_graphs_per_session\)\$" \
    "$TMP/batond.nographs.log" | grep -qE "^batond: session [0-9]+ GRAPH_REGISTER: E_LIMIT\$" ||
    fail "batond's log does not name max_graphs_per_session: $(cat "$TMP/batond.nographs.log")"

# --- run: the same refusal by an in-process stage names no batond flag it
# could not be given: 400 layers are more nodes than the default
# max_graph_nodes (8192) ---
"$BATON" gen-model --layers 400 --dim 32 --ff 32 --heads 2 -o "$TMP/deep.gguf" 2>/dev/null ||
    fail "gen-model of the 400-layer model"
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$TMP/deep.gguf" --servers local \
    --prompt "Once" -n 2
register_refused in-process local "32 for the in-process stages" \
    "the in-process stages run with batond's default limits, which batond --print-policy prints"
# ... and the refused graph's node count, over the limit it names
nodes=$(sed -n "s/^baton run: stage 1's graph for a step of 5 tokens has \([0-9]*\) nodes and [0-9]* FLOPs (the in-process stages' limits: max_graph_nodes 8192, max_graph_flops 50000000000000)\$/\1/p" "$TMP/run.err")
[ -n "$nodes" ] && [ "$nodes" -gt 8192 ] || fail "no node count over 8192: $(cat "$TMP/run.err")"
# ... split over two in-process stages (the second over the node limit), with
# the hidden state's message named, no batond flag either
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$TMP/deep.gguf" --servers local \
    --split 1,399 --prompt "Once" -n 2
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: in a split run a ubatch's hidden state (640 bytes) also goes in one message, which must fit the server's max message size" ] &&
    grep -qxF "baton run: stage 2 (local): GRAPH_REGISTER failed: E_LIMIT (limit exceeded)" "$TMP/run.err" ||
    fail "in-process split: $(cat "$TMP/run.err")"

# --- run: a SET_TENSOR over the server's max message size names the limit ---
# stories260K's largest tensor (token_embd, 512 x 64 f32) is one message of
# 88 + 16 + 131072 bytes; a synthetic model's (4096 x 512 f32, 8 MiB) is far
# more than the socket buffers hold, so the server's refusal arrives while
# the client is still sending: the client reads it all the same
"$BATON" gen-model --layers 1 --dim 512 --ff 512 --heads 8 --vocab 4096 -o "$TMP/wide.gguf" \
    2>/dev/null || fail "gen-model of the 8 MiB-token_embd model"
BATOND_EXTRA="${BATOND_EXTRA:-} --max-message-bytes 64K" start_server small
BATOND_EXTRA="${BATOND_EXTRA:-} --max-message-bytes 1M" start_server mid
# In a split run a ubatch's hidden state goes in one message too: with
# --ubatch 1024 (and a prompt at least that long: a ubatch is never longer
# than the prompt) it is 64 x 1024 x 4 = 262144 bytes, more than any
# weights chunk of stories260K, so the size named is 104 + 262144.
BATOND_EXTRA="${BATOND_EXTRA:-} --max-message-bytes 64K" start_server small2
long=$(for _ in $(seq 400); do printf 'Once upon a time '; done)
for c in "$MODEL|127.0.0.1:$PORT_small|131176|131176|short|" "$TMP/wide.gguf|127.0.0.1:$PORT_mid|8388712|8388712|short|" \
    "$MODEL|127.0.0.1:$PORT_small,127.0.0.1:$PORT_small2|131176|262248|long|--ctx 2400 --ubatch 1024"; do
    IFS='|' read -r m srv bytes need which extra <<<"$c"
    prompt="Once upon a time"
    [ "$which" = long ] && prompt=$long
    # shellcheck disable=SC2086
    want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$m" --servers "$srv" \
        --prompt "$prompt" -n 2 $extra
    [ "$(tail -n 2 "$TMP/run.err")" = "baton run: stage 1 (${srv%%,*}): SET_TENSOR (weights) failed: E_LIMIT (limit exceeded)
baton run: tensor 'token_embd.weight' went in a SET_TENSOR message of $bytes bytes, more than the server's max message size; batond --max-message-bytes $need covers every message this run sends (policy max_message_bytes, default 1G)" ] ||
        fail "SET_TENSOR over max_message_bytes ($m, $srv): $(cat "$TMP/run.err")"
done

# --- bench: a later repetition's errors reach stderr, its table is kept ---
# a relay to a batond that takes one connection (repetition 1's) and then
# stops listening: repetition 2 cannot connect
start_server b
start_py_listener once '
import threading
up = int(sys.argv[1])
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
t.join()' "$PORT_b"
once=127.0.0.1:$PORT_once
want_fail 1 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" --servers "$once" \
    -p 4 -n 2 --reps 3 --json "$TMP/b.json"
[ "$(grep -c "^summary:" "$TMP/b.err")" -eq 1 ] || fail "repetition 1 did not run: $(cat "$TMP/b.err")"
[ "$(tail -n 2 "$TMP/b.err")" = "baton bench: stage 1 ($once): connect failed: E_IO (Connection refused); is batond running and listening there?
baton bench: repetition 2 of 3 failed; repetition 1 ran" ] ||
    fail "bench, repetition 2 refused: $(cat "$TMP/b.err")"
[ "$(grep -c "^plan:" "$TMP/b.err")" -eq 1 ] || fail "repetition 2's plan lines printed: $(cat "$TMP/b.err")"
# the table of the repetition that finished, saying so; no JSON
[ "$(head -n 1 "$TMP/b.out")" = "bench: $MODEL, servers $once, split (equal), prompt 4, generated 2, reps 1 of 3 (repetition 2 failed), threads 1, ctx 14, ubatch 4, pipeline on, p2p on (not used), slots 2, ring on (not used)" ] ||
    fail "bench, repetition 2 refused: table header: $(cat "$TMP/b.out")"
for f in prefill decode ttft tpot load; do
    grep -qE "^  $f +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}  " "$TMP/b.out" ||
        fail "bench, repetition 2 refused: no $f figures: $(cat "$TMP/b.out")"
done
has_line "$TMP/b.out" "  per decode step (last repetition that finished, 1 steps):"
[ ! -e "$TMP/b.json" ] || fail "bench wrote --json after a failed repetition: $(cat "$TMP/b.json")"

# a first repetition's error is the last line: no "repetition 1 failed"
stop_server b
want_fail 1 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" \
    --servers "127.0.0.1:$PORT_b" -p 4 -n 2 --reps 3 --timeout 5000
[ "$(tail -n 1 "$TMP/b.err")" = "baton bench: stage 1 (127.0.0.1:$PORT_b): connect failed: E_IO (Connection refused); is batond running and listening there?" ] ||
    fail "bench, repetition 1 refused: $(cat "$TMP/b.err")"
! grep -q "repetition" "$TMP/b.err" || fail "a repetition line after repetition 1's error: $(cat "$TMP/b.err")"
# ... with --npl too (it printed "--npl 1, repetition 1 failed" after it)
want_fail 1 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" \
    --servers "127.0.0.1:$PORT_b" -p 4 -n 2 --reps 3 --npl 1,2 --timeout 5000
[ "$(tail -n 1 "$TMP/b.err")" = "baton bench: stage 1 (127.0.0.1:$PORT_b): connect failed: E_IO (Connection refused); is batond running and listening there?" ] ||
    fail "bench --npl, repetition 1 refused: $(cat "$TMP/b.err")"
! grep -q "repetition" "$TMP/b.err" ||
    fail "bench --npl: a repetition line after repetition 1's error: $(cat "$TMP/b.err")"
# ... and no table without a row: stdout stays empty, as without --npl (it
# printed the header and the column names of an empty table)
[ ! -s "$TMP/b.out" ] || fail "bench --npl, repetition 1 refused: stdout: $(cat "$TMP/b.out")"
# a first batch size that cannot be planned (more stages than layers, exit
# 2) likewise
want_fail 2 "$TMP/b.out" "$TMP/b.err" "$BATON" bench --model "$MODEL" -p 4 -n 2 --reps 1 \
    --npl 1,2 --split 1,1,1,1,1,1
[ ! -s "$TMP/b.out" ] || fail "bench --npl --split 1,1,1,1,1,1: stdout: $(cat "$TMP/b.out")"

# --- run: E_LIMIT at the KV cache's ALLOC_BUFFER is not blamed on --ctx ---
# another session holds every buffer the server has but one, which the
# weights take
# start_hog NAME [SPARE]: batond NAME with its buffer table filled by
# buffer_hog (SPARE buffers left; its default when not given)
start_hog() {
    start_server "$1"
    local port_var="PORT_$1"
    "$HOG" "${!port_var}" "$TMP/$1.ready" ${2:+"$2"} &
    PIDS+=("$!")
    for _ in $(seq 400); do [ -s "$TMP/$1.ready" ] && break; sleep 0.025; done
    [ -s "$TMP/$1.ready" ] || fail "buffer_hog did not fill the table of $1"
}
start_hog hog
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_hog" --prompt x -n 2 --ctx 64
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: stage 1 (127.0.0.1:$PORT_hog): ALLOC_BUFFER (KV cache) failed: E_LIMIT (limit exceeded)" ] ||
    fail "KV cache E_LIMIT: $(cat "$TMP/run.err")"
! grep -q "needs .* of KV cache" "$TMP/run.err" || fail "E_LIMIT blamed on the KV cache size"
# ... and a full table at the weights' ALLOC_BUFFER (no buffer spared) gets
# no hint about memory either
start_hog hog0 0
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_hog0" --prompt x -n 2 --ctx 64
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: stage 1 (127.0.0.1:$PORT_hog0): ALLOC_BUFFER (weights) failed: E_LIMIT (limit exceeded)" ] ||
    fail "weights E_LIMIT of a full table: $(cat "$TMP/run.err")"

# --- run: weights past a server's limit name the bytes and limits, before
# anything is uploaded ---
# stories260K's 48 tensors take 1171200 bytes (baton inspect's total), more
# than a server with 1 MiB for all sessions (E_LIMIT) or for one (E_QUOTA)
BATOND_EXTRA="${BATOND_EXTRA:-} --total-memory-bytes 1M" start_server tot
BATOND_EXTRA="${BATOND_EXTRA:-} --session-memory-bytes 1M" start_server sess
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_tot" --prompt x -n 2 --ctx 16
[ "$(tail -n 2 "$TMP/run.err")" = "baton run: stage 1 (127.0.0.1:$PORT_tot): its weights alone are more than a session may hold there (nothing was uploaded)
baton run: stage 1 needs 1.1 MiB (1171200 bytes, which the server rounds up to whole pages) for the weights of its 5 layers, more than the server's memory for all sessions, 1.0 MiB (batond --total-memory-bytes); fewer layers on the stage (--split) need less; batond --print-policy shows the server's limits" ] ||
    fail "weights over --total-memory-bytes: $(cat "$TMP/run.err")"
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_sess" --prompt x -n 2 --ctx 16
has_line "$TMP/run.err" "baton run: stage 1 (127.0.0.1:$PORT_sess): its weights alone are more than a session may hold there (nothing was uploaded)"
! grep -q "^upload:" "$TMP/run.err" || fail "weights over the session: uploaded: $(cat "$TMP/run.err")"
[ "$(tail -n 1 "$TMP/run.err" | sed -E 's/had [0-9.]+ [KMGTPE]iB free of [0-9.]+ [KMGTPE]iB/had F free of T/')" = \
    "baton run: stage 1 needs 1.1 MiB (1171200 bytes, which the server rounds up to whole pages) for the weights of its 5 layers; the server allows one session at most 1.0 MiB (batond --session-memory-bytes) and had F free of T for all sessions (batond --total-memory-bytes); fewer layers on the stage (--split) need less; batond --print-policy shows the server's limits" ] ||
    fail "weights over --session-memory-bytes: $(cat "$TMP/run.err")"

# --- run: connect refused at the server's connection limit (E_LIMIT) ---
# a raw connection takes the one slot: its HELLO makes it READY (this
# server has no key), so the next connection's HELLO is refused
BATOND_EXTRA="${BATOND_EXTRA:-} --max-connections 1" start_server one
python3 -c 'import os, socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
hello = b"BATN" + struct.pack("<BBHIIQ", 1, 0, 0, 1, 0, 48)
hello += struct.pack("<HHB3xQ", 1, 1, 1, 0) + bytes(32)
s.sendall(hello)
got = b""
while len(got) < 72:
    got += s.recv(72 - len(got))
open(sys.argv[2] + ".tmp", "w").close()
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(60)' "$PORT_one" "$TMP/slot.ready" &
PIDS+=("$!")
for _ in $(seq 400); do [ -e "$TMP/slot.ready" ] && break; sleep 0.025; done
[ -e "$TMP/slot.ready" ] || fail "the connection holding the slot did not connect"
want_fail 1 "$TMP/run.out" "$TMP/run.err" "$BATON" run --model "$MODEL" \
    --servers "127.0.0.1:$PORT_one" --prompt x -n 2
[ "$(tail -n 1 "$TMP/run.err")" = "baton run: stage 1 (127.0.0.1:$PORT_one): connect failed: E_LIMIT (limit exceeded); the server is at its connection limit (batond --max-connections, or the max_connections of this client key's client line), or newer connections still in their handshake pushed this one out of its lobby (--max-unauthenticated, --max-unauthenticated-per-ip); batond --print-policy shows them" ] ||
    fail "connect at the connection limit: $(cat "$TMP/run.err")"

# --- run: one server named twice: a warning, and the run still works ---
start_server dup
dup=127.0.0.1:$PORT_dup
"$BATON" run --model "$MODEL" --servers "$dup,$dup" --prompt "Once upon" -n 4 \
    >"$TMP/dup.out" 2>"$TMP/dup.err" || fail "a server named twice: $(cat "$TMP/dup.err")"
has_line "$TMP/dup.err" "baton run: warning: --servers names $dup for stage 1 and stage 2: those stages share that server's cores and memory"
[ "$(grep -c "warning:" "$TMP/dup.err")" -eq 1 ] || fail "the warning repeats: $(cat "$TMP/dup.err")"
has_line "$TMP/dup.err" "plan: stage 1 -> 2 hub ($dup does not offer the direct path: batond without --peer-key)"
# ... also under another name for the same address (where localhost is 127.0.0.1)
if [ "$(getent ahostsv4 localhost | awk 'NR == 1 { print $1 }')" = 127.0.0.1 ]; then
    "$BATON" run --model "$MODEL" --servers "localhost:$PORT_dup,$dup" --prompt "Once upon" -n 4 \
        >"$TMP/dup2.out" 2>"$TMP/dup2.err" || fail "a server under two names: $(cat "$TMP/dup2.err")"
    has_line "$TMP/dup2.err" "baton run: warning: --servers: stage 1 (localhost:$PORT_dup) and stage 2 ($dup) reach one server (127.0.0.1:$PORT_dup): those stages share its cores and memory"
fi
"$BATON" run --model "$MODEL" --servers "$dup" --prompt "Once upon" -n 4 >"$TMP/one.out" 2>"$TMP/one.err" ||
    fail "one stage: $(cat "$TMP/one.err")"
! grep -q "warning:" "$TMP/one.err" || fail "a warning without a repeated server: $(cat "$TMP/one.err")"
cmp -s "$TMP/dup.out" "$TMP/one.out" || fail "two stages on one server: other text: $(cat "$TMP/dup.out")"
# bench --json: the direct path was asked (the default) but not used (no peer key)
"$BATON" bench --model "$MODEL" --servers "$dup,$dup" -p 4 -n 2 --reps 1 --json "$TMP/dup.json" \
    >/dev/null 2>&1 || fail "bench over a server named twice"
[ "$(field "$TMP/dup.json" '(j["p2p"], j["p2p_used"], j["ring"])')" = "(True, False, False)" ] ||
    fail "bench --json p2p / p2p_used / ring: $(cat "$TMP/dup.json")"

# --- run with stdout or stderr closed (a break-it review: the first
# connection became fd 1 or 2, the text or the plan lines went into it, and
# the server answered E_MAGIC) ---
rc=0; "$BATON" run --model "$MODEL" --servers "$dup" --prompt "Once upon" -n 4 \
    >&- 2>"$TMP/closed1.err" || rc=$?
[ "$rc" -eq 1 ] || fail "stdout closed: exit $rc: $(cat "$TMP/closed1.err")"
has_line "$TMP/closed1.err" "baton run: standard output: cannot write: Bad file descriptor"
! grep -q "E_MAGIC" "$TMP/closed1.err" || fail "stdout closed: $(cat "$TMP/closed1.err")"
"$BATON" run --model "$MODEL" --servers "$dup" --prompt "Once upon" -n 4 >"$TMP/closed2.out" 2>&- ||
    fail "stderr closed: exit $?"
cmp -s "$TMP/closed2.out" "$TMP/one.out" ||
    fail "stderr closed: other text: $(cat "$TMP/closed2.out")"
# stdin closed: -f - fails as it did, reading nothing else
rc=0; "$BATON" tokenize --model "$MODEL" -f - <&- >/dev/null 2>"$TMP/closed3.err" || rc=$?
[ "$rc" -eq 1 ] || fail "stdin closed: exit $rc"
has_line "$TMP/closed3.err" "baton tokenize: -f -: Bad file descriptor"

# --- run: a one-token prompt past the context is "1 token" ---
want_fail 2 "$TMP/t.out" "$TMP/t.err" "$BATON" run --model "$MODEL" --servers local \
    --prompt-ids 1 -n 600
grep -q "^baton run: prompt (1 token) + -n 600 = 601 exceeds the default --ctx 512; " \
    "$TMP/t.err" ||
    fail "one-token prompt: $(cat "$TMP/t.err")"

# --- run, bench: "-n=4" (getopt hands "=4" to -n) says how to write it ---
want_fail 2 "$TMP/n.out" "$TMP/n.err" "$BATON" run --model "$MODEL" --servers local --prompt x -n=4
has_line "$TMP/n.err" "baton run: -n: '=4' is not an integer (write -n 4, without '=')"
want_fail 2 "$TMP/n.out" "$TMP/n.err" "$BATON" bench --model "$MODEL" --servers local -p=4
has_line "$TMP/n.err" "baton bench: -p: '=4' is not an integer (write -p 4, without '=')"
want_fail 2 "$TMP/n.out" "$TMP/n.err" "$BATON" run --model "$MODEL" --servers local --prompt x -n x4
has_line "$TMP/n.err" "baton run: -n: 'x4' is not an integer"
echo PASS
