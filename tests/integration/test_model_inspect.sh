#!/bin/bash
# baton inspect and baton run on the real model file and on broken copies:
# right facts, valid JSON, clear errors naming the file, exit codes; run's
# and bench's output files and --servers list checked before the model
# loads, integer options (too large, not an integer, too small), messages
# that start with the command typed, run's hub plan lines, and demo.sh's
# message for a missing model.
source "$(dirname "$0")/lib.sh"
need_model

"$BATON" inspect "$MODEL" >"$TMP/inspect.txt" || fail "inspect exited non-zero"
grep -q "GGUF v3, 1185376 bytes, alignment 32, data at offset 14176" "$TMP/inspect.txt" || fail "inspect header line"
grep -q "llama.block_count = 5 (u32)" "$TMP/inspect.txt" || fail "block_count"
grep -q "token_embd.weight  *f32  *64 x 512" "$TMP/inspect.txt" || fail "token_embd row"
grep -q "^total: 1171200 tensor bytes, 292800 elements" "$TMP/inspect.txt" || fail "total line"

"$BATON" inspect --json "$MODEL" >"$TMP/inspect.json" || fail "inspect --json exited non-zero"
python3 - "$TMP/inspect.json" <<'PY' || fail "inspect --json content"
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
assert "token_embd.weight" in s and "llama.embedding_length" in s, s[:200]
PY

# usage errors: exit 2, the error and a pointer to --help, as run's (no
# page of usage text)
rc=0; "$BATON" inspect --bogus "$MODEL" >/dev/null 2>"$TMP/bogus.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/bogus.err")" = "baton inspect: unrecognized option '--bogus'
(see \`baton inspect --help\`)" ] || fail "inspect --bogus: rc $rc: $(cat "$TMP/bogus.err")"
rc=0; "$BATON" inspect "$MODEL" "$MODEL" >/dev/null 2>"$TMP/two.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/two.err")" = "baton inspect: more than one FILE ('$MODEL')
(see \`baton inspect --help\`)" ] || fail "inspect with two FILEs: rc $rc: $(cat "$TMP/two.err")"
rc=0; "$BATON" inspect >/dev/null 2>"$TMP/nofile.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/nofile.err")" = "baton inspect: missing FILE
(see \`baton inspect --help\`)" ] || fail "inspect without FILE: rc $rc: $(cat "$TMP/nofile.err")"

# a long option by a prefix, the file before the options (as getopt takes them)
rc=0; "$BATON" inspect "$MODEL" --che >"$TMP/pre.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] && grep -q "every value is finite" "$TMP/pre.out" ||
    fail "inspect FILE --che: rc $rc: $(cat "$TMP/pre.out")"
rc=0; "$BATON" inspect --js --check "$MODEL" >/dev/null 2>"$TMP/pre.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/pre.err")" = "baton inspect: --json and --check do not go together" ] ||
    fail "inspect --js --check: rc $rc: $(cat "$TMP/pre.err")"

# a truncated copy: clear error naming the file, exit 1, for inspect and run
head -c 14000 "$MODEL" >"$TMP/trunc.gguf"
rc=0; "$BATON" inspect "$TMP/trunc.gguf" >/dev/null 2>"$TMP/trunc.err" || rc=$?
[ "$rc" -eq 1 ] || fail "inspect on a truncated file exited $rc"
grep -q "trunc.gguf" "$TMP/trunc.err" || fail "error does not name the file: $(cat "$TMP/trunc.err")"
rc=0; "$BATON" run --model "$TMP/trunc.gguf" --prompt hi >/dev/null 2>"$TMP/run_trunc.err" || rc=$?
[ "$rc" -eq 1 ] || fail "run on a truncated file exited $rc"
grep -q "^baton run: $TMP/trunc.gguf: " "$TMP/run_trunc.err" ||
    fail "run error does not start with 'baton run: ' and the file: $(cat "$TMP/run_trunc.err")"
# a FIFO as the model: refused at once as not a regular file (opening it
# must not wait for a writer), by every command that reads a GGUF
mkfifo "$TMP/fifo.gguf"
# (the middle field: what the message starts with after "baton ")
for c in "inspect $TMP/fifo.gguf|inspect:|: not a regular file (E_IO)" \
    "run --model $TMP/fifo.gguf --prompt hi|run:|: not a regular file" \
    "bench --model $TMP/fifo.gguf -p 1 -n 2|bench:|: not a regular file" \
    "quantize $TMP/fifo.gguf $TMP/fq.gguf q8_0|quantize:|: not a regular file" \
    "gen-model --layers 1 --dim 64 --ff 64 --heads 4 --vocab-from $TMP/fifo.gguf -o $TMP/fg.gguf|gen-model: --vocab-from|: not a regular file"; do
    IFS='|' read -r args cmd tail <<<"$c"
    rc=0
    # shellcheck disable=SC2086
    timeout 10 "$BATON" $args >/dev/null 2>"$TMP/fifo.err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qxF "baton $cmd $TMP/fifo.gguf$tail" "$TMP/fifo.err" ||
        fail "a FIFO as the model ($cmd): rc $rc: $(cat "$TMP/fifo.err")"
done
# a missing model: named, after the command typed (not a bare "baton: ")
rc=0; "$BATON" run --model "$TMP/none.gguf" --prompt hi >/dev/null 2>"$TMP/run_none.err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton run: $TMP/none.gguf: cannot open: No such file or directory" \
    "$TMP/run_none.err" || fail "run on a missing model: rc $rc: $(cat "$TMP/run_none.err")"

# a malformed --servers list is a usage error found before the model is
# read: the model path here does not exist, and the message names the entry
want_usage() { # want_usage ERR-FILE EXACT-LINE CMD...
    local err=$1 line=$2 rc=0
    shift 2
    "$@" >/dev/null 2>"$err" || rc=$?
    [ "$rc" -eq 2 ] && grep -qxF -- "$line" "$err" && ! grep -q "cannot open\|^model:" "$err" ||
        fail "$*: rc $rc (want 2), stderr: $(cat "$err") (want: $line)"
}
for cmd in run bench; do
    args=(--model "$TMP/none.gguf")
    [ "$cmd" = run ] && args+=(--prompt x)
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'nohostport' (want host:port or host:port@peerhost:peerport)" \
        "$BATON" "$cmd" "${args[@]}" --servers nohostport
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'host:99999' (the port must be 1..65535)" \
        "$BATON" "$cmd" "${args[@]}" --servers 127.0.0.1:1,host:99999
    want_usage "$TMP/sv.err" "baton $cmd: --servers: entry 2 of 'a:1,,b:2' is empty (want host:port,host:port,... or local)" \
        "$BATON" "$cmd" "${args[@]}" --servers a:1,,b:2
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'a:1@nohost' (want host:port or host:port@peerhost:peerport)" \
        "$BATON" "$cmd" "${args[@]}" --servers a:1@nohost
    want_usage "$TMP/sv.err" "baton $cmd: --split has 3 parts but --servers names 2 servers" \
        "$BATON" "$cmd" "${args[@]}" --servers a:1,b:2 --split 1,1,1
    # hosts that cannot be meant (an adversarial review: these reached the
    # name lookup, and a second '@' made a run fall back to the hub path)
    hostmsg="a host may hold only letters, digits, '.', '-' and '_'; an IPv6 address goes in brackets, as in [::1]:7340"
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'a:1 b:2' ($hostmsg)" \
        "$BATON" "$cmd" "${args[@]}" --servers "a:1 b:2"
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'h:1@h:2@junk:3' ($hostmsg)" \
        "$BATON" "$cmd" "${args[@]}" --servers "h:1@h:2@junk:3"
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint '[127.0.0.1]]:5' (a bracketed host must be an IPv6 address: hex digits, ':', '.' and a %zone of letters and digits)" \
        "$BATON" "$cmd" "${args[@]}" --servers "[127.0.0.1]]:5"
    want_usage "$TMP/sv.err" "baton $cmd: --split '1e308,1,1': want up to 64 positive plain decimals like 1,1,1 or 0.5,2, each at most 1000000" \
        "$BATON" "$cmd" "${args[@]}" --servers local --split 1e308,1,1
    BATON_SERVERS=a:1,b:0 want_usage "$TMP/sv.err" "baton $cmd: BATON_SERVERS: bad endpoint 'b:0' (the port must be 1..65535)" \
        "$BATON" "$cmd" "${args[@]}"
done
# baton info names where the list came from, as run and bench do (it said
# --servers for a bad BATON_SERVERS)
BATON_SERVERS=a:1,b:0 want_usage "$TMP/sv.err" "baton info: BATON_SERVERS: bad endpoint 'b:0' (the port must be 1..65535)" \
    "$BATON" info
BATON_SERVERS=a:1,,b want_usage "$TMP/sv.err" "baton info: BATON_SERVERS: entry 2 of 'a:1,,b' is empty (want host:port,host:port,... or local)" \
    "$BATON" info
BATON_SERVERS=a:1 want_usage "$TMP/sv.err" "baton info: --servers: bad endpoint 'b:0' (the port must be 1..65535)" \
    "$BATON" info --servers a:1,b:0
# a port of more than 5 digits (leading zeros) is refused by run, bench and
# info alike (info refused it only when it came to connect, after the others)
for cmd in run bench info; do
    args=(); [ "$cmd" = info ] || args=(--model "$MODEL" --prompt x)
    [ "$cmd" = bench ] && args=(--model "$MODEL")
    want_usage "$TMP/sv.err" "baton $cmd: --servers: bad endpoint 'a:007341' (the port must be 1..65535)" \
        "$BATON" "$cmd" "${args[@]}" --servers a:1,a:007341
done
# more entries than stages a run can have (once past the end of the plan's arrays)
many=127.0.0.1:1; for _ in $(seq 64); do many+=,127.0.0.1:1; done
want_usage "$TMP/sv.err" "baton run: --servers: more than 64 servers (the most stages a run can have)" \
    "$BATON" run --model "$MODEL" --prompt x --servers "$many"

# integer options: too large (also past 2^64), not an integer, too small
want_usage "$TMP/int.err" "baton run: -n: '99999999999999999999' is too large (at most 4294967295)" \
    "$BATON" run --model "$MODEL" --prompt x -n 99999999999999999999
want_usage "$TMP/int.err" "baton run: -n: '4294967296' is too large (at most 4294967295)" \
    "$BATON" run --model "$MODEL" --prompt x -n 4294967296
want_usage "$TMP/int.err" "baton run: -n: '12x' is not an integer" \
    "$BATON" run --model "$MODEL" --prompt x -n 12x
want_usage "$TMP/int.err" "baton run: -n: '0' is too small (at least 1)" \
    "$BATON" run --model "$MODEL" --prompt x -n 0
want_usage "$TMP/int.err" "baton run: --ctx: '-5' is too small (at least 1)" \
    "$BATON" run --model "$MODEL" --prompt x --ctx -5
want_usage "$TMP/int.err" "baton run: --timeout: '86400001' is too large (at most 86400000)" \
    "$BATON" run --model "$MODEL" --prompt x --timeout 86400001
want_usage "$TMP/int.err" "baton run: --threads: '65' is too large (at most 64)" \
    "$BATON" run --model "$MODEL" --prompt x --threads 65
want_usage "$TMP/int.err" "baton run: --seed: '18446744073709551616' is too large (at most 18446744073709551615)" \
    "$BATON" run --model "$MODEL" --prompt x --seed 18446744073709551616
want_usage "$TMP/int.err" "baton bench: --reps: '101' is too large (at most 100)" \
    "$BATON" bench --model "$MODEL" --reps 101
want_usage "$TMP/int.err" "baton bench: -p: '99999999999999999999' is too large (at most 1048576)" \
    "$BATON" bench --model "$MODEL" -p 99999999999999999999
want_usage "$TMP/int.err" "baton bench: -n: '1' is too small (at least 2)" \
    "$BATON" bench --model "$MODEL" -n 1
want_usage "$TMP/int.err" "baton bench: --threads: 'two' is not an integer" \
    "$BATON" bench --model "$MODEL" --threads two

# decimal options: plain decimals in the range --help gives (--top-p took
# [1e-6, 1] while --help said (0, 1]; hex floats were taken)
notdec="is not a decimal number (digits with an optional '.' and exponent, as 0.25 or 25e-2)"
for v in 0x1p-2 0x1 inf nan " 1" +1 1e 1,5 ""; do
    want_usage "$TMP/f.err" "baton run: --top-p: '$v' $notdec" \
        "$BATON" run --model "$MODEL" --prompt x --temp 0.5 --top-p "$v"
    want_usage "$TMP/f.err" "baton run: --temp: '$v' $notdec" "$BATON" run --model "$MODEL" --prompt x --temp "$v"
done
want_usage "$TMP/f.err" "baton run: --temp: '100.5' is not in [0, 100]" "$BATON" run --model "$MODEL" --prompt x --temp 100.5
want_usage "$TMP/f.err" "baton run: --temp: '-0.1' is not in [0, 100]" "$BATON" run --model "$MODEL" --prompt x --temp -0.1
want_usage "$TMP/f.err" "baton run: --temp: '1e999' is not in [0, 100]" "$BATON" run --model "$MODEL" --prompt x --temp 1e999
want_usage "$TMP/f.err" "baton run: --top-p: '0' is not in (0, 1]" "$BATON" run --model "$MODEL" --prompt x --temp 0.5 --top-p 0
want_usage "$TMP/f.err" "baton run: --top-p: '1.0000001' is not in (0, 1]" "$BATON" run --model "$MODEL" --prompt x --temp 0.5 --top-p 1.0000001
want_usage "$TMP/f.err" "baton run: --top-p: '1e-50' is not in (0, 1] as a 32-bit float (0)" \
    "$BATON" run --model "$MODEL" --prompt x --temp 0.5 --top-p 1e-50
# the edges of the ranges run
for arg in "--temp 100 --top-p 1" "--temp 0.5 --top-p 1e-7" "--temp 5e-1 --top-p .9"; do
    # shellcheck disable=SC2086
    "$BATON" run --model "$MODEL" --prompt x -n 2 --quiet $arg 2>"$TMP/f.err" || fail "$arg: $(cat "$TMP/f.err")"
done
"$BATON" run --help >"$TMP/help.out"
grep -q -- "--temp T  *sampling temperature, 0..100 (default 0: greedy)" "$TMP/help.out" &&
    grep -q -- "--top-p P  *nucleus sampling mass in (0, 1]" "$TMP/help.out" || fail "--help: --temp / --top-p ranges"

# usage errors and limits
rc=0; "$BATON" run --model "$MODEL" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "run without --prompt exited $rc"
rc=0; "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 10 --ctx 8 >/dev/null 2>"$TMP/ctx.err" || rc=$?
[ "$rc" -eq 2 ] || fail "prompt + n beyond --ctx exited $rc"
grep -q "exceeds the context --ctx 8" "$TMP/ctx.err" || fail "ctx message: $(cat "$TMP/ctx.err")"
rc=0; "$BATON" run --model "$MODEL" --prompt x --servers local --split 1,1,1,1,1,1 >/dev/null 2>"$TMP/split.err" || rc=$?
[ "$rc" -eq 2 ] || fail "6 stages for 5 layers exited $rc"
rc=0; "$BATON" run --model "$MODEL" --prompt x --servers 127.0.0.1:1,127.0.0.1:2 --split 1,1,1 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "split/servers count mismatch exited $rc"
# a port nothing listens on (bound and closed again: port 1 may be taken)
CLOSED=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rc=0; "$BATON" run --model "$MODEL" --prompt x --servers 127.0.0.1:$CLOSED --timeout 2000 >/dev/null 2>"$TMP/conn.err" || rc=$?
[ "$rc" -eq 1 ] || fail "unreachable server exited $rc"
grep -q "^baton run: stage 1 (127.0.0.1:$CLOSED): connect failed: E_IO .*; is batond running and listening there?" "$TMP/conn.err" ||
    fail "connect message: $(cat "$TMP/conn.err")"
rc=0; "$BATON" bench --model "$MODEL" --servers 127.0.0.1:$CLOSED -p 4 -n 2 --reps 1 >/dev/null 2>"$TMP/conn.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "^baton bench: stage 1 (127.0.0.1:$CLOSED): connect failed: E_IO " "$TMP/conn.err" ||
    fail "bench connect message: rc $rc: $(cat "$TMP/conn.err")"
# a host name that cannot resolve (.invalid, RFC 6761) is called that, not
# just "malformed field" (a fresh-user review)
rc=0; timeout 30 "$BATON" run --model "$MODEL" --prompt x --servers nosuchhost.invalid:7340 \
    >/dev/null 2>"$TMP/conn.err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton run: stage 1 (nosuchhost.invalid:7340): connect failed: the host name does not resolve" \
    "$TMP/conn.err" || fail "unresolvable host: rc $rc: $(cat "$TMP/conn.err")"
# a bad key file is reported before the model is read, under the name it
# came by (a fresh-user review: after the model, and always as --key)
rc=0; BATON_KEY_FILE="$TMP/nosuch.key" "$BATON" run --model "$TMP/none.gguf" --prompt x \
    >/dev/null 2>"$TMP/key.err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton run: BATON_KEY_FILE: $TMP/nosuch.key: no such key file" "$TMP/key.err" ||
    fail "run with a missing BATON_KEY_FILE: rc $rc: $(cat "$TMP/key.err")"
rc=0; "$BATON" bench --model "$TMP/none.gguf" --key "$TMP/nosuch.key" >/dev/null 2>"$TMP/key.err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton bench: --key: $TMP/nosuch.key: no such key file" "$TMP/key.err" ||
    fail "bench with a missing --key: rc $rc: $(cat "$TMP/key.err")"
# a context past the model's llama.context_length (2048 here) runs, with a note
"$BATON" run --model "$MODEL" --prompt hi -n 2 --ctx 3000 >/dev/null 2>"$TMP/ctx.err" ||
    fail "run --ctx 3000: $(cat "$TMP/ctx.err")"
grep -qx "baton run: note: a context of 3000 positions is more than the model was trained for (llama.context_length 2048); text past that may degrade" \
    "$TMP/ctx.err" || fail "no context note: $(cat "$TMP/ctx.err")"
"$BATON" run --model "$MODEL" --prompt hi -n 2 >/dev/null 2>"$TMP/ctx.err"
grep -q "note: a context" "$TMP/ctx.err" && fail "a context note at the default --ctx"
# a split the model cannot take is a usage error in bench as in run (exit 2)
rc=0; "$BATON" bench --model "$MODEL" --servers local --split 1,1,1,1,1,1 -p 4 -n 2 --reps 1 \
    >/dev/null 2>"$TMP/split.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "^baton bench: cannot split .*: more stages than layers (give at most one stage per layer)$" "$TMP/split.err" ||
    fail "bench with an impossible split: rc $rc: $(cat "$TMP/split.err")"
# six servers for five layers: refused before any connection (nothing listens on port 9 here)
s6=127.0.0.1:9,127.0.0.1:9,127.0.0.1:9,127.0.0.1:9,127.0.0.1:9,127.0.0.1:9
rc=0; "$BATON" run --model "$MODEL" --servers "$s6" --prompt hi -n 2 >/dev/null 2>"$TMP/split.err" ||
    rc=$?
[ "$rc" -eq 2 ] && grep -qx "baton run: cannot split 5 layers into 6 stages with --split (default): more stages than layers (give at most one server per layer)" "$TMP/split.err" ||
    fail "run with six servers for five layers: rc $rc: $(cat "$TMP/split.err")"
# proportions that leave a stage without a layer say so
rc=0; "$BATON" run --model "$MODEL" --split 1000,1 --prompt hi -n 2 >/dev/null 2>"$TMP/split.err" ||
    rc=$?
[ "$rc" -eq 2 ] && grep -q "^baton run: cannot split .* --split 1000,1: the proportions leave a stage without a layer (give each stage a larger share)$" "$TMP/split.err" ||
    fail "run with a split that starves a stage: rc $rc: $(cat "$TMP/split.err")"
# (into a file first: `grep -q` on a pipe may exit before baton has written
# all its help, which then dies of SIGPIPE and fails the pipeline)
"$BATON" run --help >"$TMP/help.out" && grep -q -- "--servers" "$TMP/help.out" || fail "run --help"
"$BATON" --help >"$TMP/help.out" && grep -q inspect "$TMP/help.out" || fail "baton --help"

# --report-gap writes into --ids-file: without it, a usage error
rc=0; "$BATON" run --model "$MODEL" --prompt x --report-gap >/dev/null 2>"$TMP/gap.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--report-gap needs --ids-file" "$TMP/gap.err" ||
    fail "--report-gap without --ids-file: rc $rc: $(cat "$TMP/gap.err")"
# output files that cannot be created are refused before the model is loaded
for opt in --stats-json --ids-file; do
    rc=0
    "$BATON" run --model "$MODEL" --prompt x -n 2 "$opt" "$TMP/nodir/out.json" >"$TMP/o.out" 2>"$TMP/o.err" || rc=$?
    [ "$rc" -eq 1 ] || fail "$opt in a missing directory exited $rc"
    grep -qx "baton run: $opt $TMP/nodir/out.json: cannot create a file in $TMP/nodir: No such file or directory" \
        "$TMP/o.err" || fail "$opt message: $(cat "$TMP/o.err")"
    grep -q "^model:" "$TMP/o.err" && fail "$opt: the model was loaded before the check"
    [ ! -s "$TMP/o.out" ] || fail "$opt: text was generated"
done
mkdir "$TMP/adir"
rc=0; "$BATON" run --model "$MODEL" --prompt x --stats-json "$TMP/adir" >/dev/null 2>"$TMP/o.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "adir: is a directory" "$TMP/o.err" || fail "--stats-json DIR: rc $rc: $(cat "$TMP/o.err")"
# a writable --stats-json is not left behind by the check when the run fails
rc=0; "$BATON" run --model "$MODEL" --prompt x --stats-json "$TMP/s.json" --ctx 1 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/s.json" ] || fail "--stats-json check left a file (rc $rc)"
rc=0; "$BATON" bench --model "$MODEL" --json "$TMP/nodir/b.json" >/dev/null 2>"$TMP/b.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "baton bench: --json $TMP/nodir/b.json: cannot create" "$TMP/b.err" &&
    ! grep -q "^model:" "$TMP/b.err" || fail "bench --json in a missing directory: rc $rc: $(cat "$TMP/b.err")"
# an output no one can create, though access() lets root write there
# (/proc): refused before the model loads, too (it used to fail after the
# whole run, in words that did not name the option)
for c in "run --prompt x -n 2 --stats-json|baton run: --stats-json" "run --prompt x -n 2 --ids-file|baton run: --ids-file" \
         "bench -p 4 -n 2 --reps 1 --json|baton bench: --json"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" ${c%%|*} /proc/nope.json --model "$MODEL" >"$TMP/o.out" 2>"$TMP/o.err" || rc=$?
    [ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/o.err")" -eq 1 ] &&
        grep -qxE "${c#*|} /proc/nope\.json: cannot create a file in /proc: [A-Za-z ]+" "$TMP/o.err" &&
        [ ! -s "$TMP/o.out" ] || fail "${c%%|*} /proc/nope.json: rc $rc: $(cat "$TMP/o.err")"
done
# --ids-file and --stats-json naming one file: refused before the run
rc=0; "$BATON" run --model "$MODEL" --prompt x -n 2 --ids-file "$TMP/same.json" \
    --stats-json "$TMP/same.json" >/dev/null 2>"$TMP/o.err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/same.json" ] &&
    [ "$(cat "$TMP/o.err")" = "baton run: --ids-file and --stats-json are the same file ($TMP/same.json); one would overwrite the other" ] ||
    fail "--ids-file = --stats-json: rc $rc: $(cat "$TMP/o.err")"
# a FIFO with a reader gets the whole output: the check does not open it
# (an open and close would end the reader's input before the write)
mkfifo "$TMP/ids.fifo"
timeout 60 cat "$TMP/ids.fifo" >"$TMP/ids.fromfifo" &
reader=$!
rc=0; timeout 60 "$BATON" run --model "$MODEL" --prompt x -n 2 --quiet --ids-file "$TMP/ids.fifo" \
    >/dev/null 2>"$TMP/o.err" || rc=$?
wait "$reader" || true
[ "$rc" -eq 0 ] && grep -q '"prompt"' "$TMP/ids.fromfifo" ||
    fail "--ids-file FIFO with a reader: rc $rc: $(cat "$TMP/o.err") / $(cat "$TMP/ids.fromfifo")"
# an existing output is opened, not truncated, by the check
echo keep >"$TMP/keep.json"
rc=0; "$BATON" run --model "$MODEL" --prompt x --ids-file "$TMP/keep.json" --ctx 1 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/keep.json")" = keep ] || fail "--ids-file check changed the file (rc $rc)"
# one that opens but cannot be written (/dev/full) fails at the end, and
# the message names the option
for c in "run --prompt x -n 2 --quiet --stats-json|baton run: --stats-json" \
         "run --prompt x -n 2 --quiet --ids-file|baton run: --ids-file" \
         "bench -p 4 -n 2 --reps 1 --json|baton bench: --json"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" ${c%%|*} /dev/full --model "$MODEL" >/dev/null 2>"$TMP/o.err" || rc=$?
    [ "$rc" -eq 1 ] && [ "$(tail -n 1 "$TMP/o.err")" = "${c#*|} /dev/full: cannot write: No space left on device" ] ||
        fail "${c%%|*} /dev/full: rc $rc: $(cat "$TMP/o.err")"
done
# a command that succeeds but whose stdout could not be written exits 1 and says so
for c in "run --prompt x -n 2 --model $MODEL|baton run" \
         "bench -p 4 -n 2 --reps 1 --model $MODEL|baton bench" "--help|baton" "run --help|baton run" \
         "inspect $MODEL|baton inspect" "tokenize --model $MODEL Once|baton tokenize"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" ${c%%|*} >/dev/full 2>"$TMP/o.err" || rc=$?
    [ "$rc" -eq 1 ] && grep -q "^${c#*|}: standard output: cannot write: " "$TMP/o.err" ||
        fail "${c%%|*} >/dev/full: rc $rc: $(cat "$TMP/o.err")"
done
# generated text that cannot be written stops the run at once (no summary
# line, which comes after the last token), naming the reason; so do the
# prefixed lines of --parallel
printf 'Once\nA cat\n' >"$TMP/two.txt"
for c in "run --prompt Once -n 64 --ignore-eos" "run --prompt-file $TMP/two.txt --parallel 2 -n 8"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" $c --model "$MODEL" >/dev/full 2>"$TMP/o.err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qx "baton run: standard output: cannot write: No space left on device" \
        "$TMP/o.err" && ! grep -q "^summary:" "$TMP/o.err" ||
        fail "$c >/dev/full: rc $rc: $(cat "$TMP/o.err")"
done
# a prompt whose ids outnumber its bytes (a vocabulary without "\u2581" pieces:
# every space falls back to 3 byte tokens) is tokenized whole, alone or in a
# prompt file (a break-it review: "cannot tokenize the prompt: limit exceeded")
python3 - "$MODEL" "$TMP/nosp.gguf" <<'PY'
import sys
src = open(sys.argv[1], "rb").read()
at = src.index(b"token_embd.weight")  # the tensor table follows the metadata
open(sys.argv[2], "wb").write(src[:at].replace("\u2581".encode(), b"~~~") + src[at:])
PY
T="x x x x x x x x x x x x x x x x x x x x"
n=$("$BATON" tokenize -m "$TMP/nosp.gguf" "$T" | wc -w)
[ "$n" -gt $((${#T} + 8)) ] || fail "the byte-fallback vocabulary gives only $n ids"
"$BATON" run -m "$TMP/nosp.gguf" --prompt "$T" -n 2 --quiet --ids-file "$TMP/nosp.json" 2>"$TMP/nosp.err" &&
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(len(j["prompt"]) != int(sys.argv[2]))' \
        "$TMP/nosp.json" "$n" || fail "run with $n prompt ids: $(cat "$TMP/nosp.err")"
printf '%s\n%s\n' "$T" "$T" >"$TMP/nosp.txt"
"$BATON" run -m "$TMP/nosp.gguf" --prompt-file "$TMP/nosp.txt" -n 2 --quiet 2>"$TMP/nosp.err" ||
    fail "prompt file with $n ids a prompt: $(cat "$TMP/nosp.err")"
# -n is checked against --ctx before any room is made for it: a usage error, not
# "out of memory" (a break-it review)
for _ in $(seq 200); do echo "a b"; done >"$TMP/p200.txt"
rc=0; "$BATON" run -m "$MODEL" --prompt-file "$TMP/p200.txt" -n 4294967295 2>"$TMP/p200.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "exceeds the default --ctx" "$TMP/p200.err" || fail "-n 2^32-1: rc $rc: $(cat "$TMP/p200.err")"
# -m FILE is --model FILE in run and bench (llama.cpp's short form, as tokenize takes it)
"$BATON" run -m "$MODEL" --prompt Once -n 4 --quiet --ids-file "$TMP/m_ids.json" 2>/dev/null &&
    "$BATON" run --model "$MODEL" --prompt Once -n 4 --quiet --ids-file "$TMP/model_ids.json" 2>/dev/null &&
    cmp -s "$TMP/m_ids.json" "$TMP/model_ids.json" || fail "run -m differs from run --model"
"$BATON" bench -m "$MODEL" -p 4 -n 2 --reps 1 >/dev/null 2>&1 || fail "bench -m"
# -p TEXT is --prompt TEXT in run (llama-cli's short form; in bench -p N counts tokens)
"$BATON" run -m "$MODEL" -p Once -n 4 --quiet --ids-file "$TMP/p_ids.json" 2>/dev/null &&
    cmp -s "$TMP/p_ids.json" "$TMP/model_ids.json" || fail "run -p differs from run --prompt"
# `baton help COMMAND` is `baton COMMAND --help`; an unknown one is a usage error
"$BATON" help run >"$TMP/help1.out" && "$BATON" run --help >"$TMP/help2.out" &&
    cmp -s "$TMP/help1.out" "$TMP/help2.out" || fail "baton help run differs from baton run --help"
rc=0; "$BATON" help nope >/dev/null 2>"$TMP/o.err" || rc=$?
[ "$rc" -eq 2 ] && grep -qx "baton: unknown command 'nope'" "$TMP/o.err" || fail "baton help nope: rc $rc"

# where the direct path is not planned, a plan line says so and why
"$BATON" run --model "$MODEL" --prompt x -n 2 --servers local --split 1,1,1 --quiet 2>"$TMP/hub.err" ||
    fail "local split run"
[ "$(grep -c '^plan: stage [12] -> [23] hub (in-process stages)$' "$TMP/hub.err")" -eq 2 ] ||
    fail "no hub plan lines: $(cat "$TMP/hub.err")"
"$BATON" run --model "$MODEL" --prompt x -n 2 --servers local --split 1,1 --p2p off --quiet 2>"$TMP/hub.err" ||
    fail "local --p2p off run"
grep -qx 'plan: stage 1 -> 2 hub (--p2p off)' "$TMP/hub.err" || fail "no --p2p off plan line: $(cat "$TMP/hub.err")"

# --check reads every value: a clean model passes; a NaN written into an f32
# matrix and an infinite binary16 scale in a q8_0 block are each named with
# their count and first element (the values a damaged file would turn into
# NaN logits and a silent token 0)
"$BATON" gen-model --layers 1 --dim 64 --ff 96 --heads 4 --vocab 300 --type f32 -o "$TMP/c.gguf" 2>/dev/null ||
    fail "gen-model f32"
"$BATON" quantize "$TMP/c.gguf" "$TMP/c8.gguf" q8_0 2>/dev/null || fail "quantize q8_0"
for f in c c8; do
    "$BATON" inspect --check "$TMP/$f.gguf" >"$TMP/chk.out" || fail "--check $f: $(cat "$TMP/chk.out")"
    grep -Eq "^$TMP/$f.gguf: 12 tensors, [0-9]+ values read: every value is finite\$" "$TMP/chk.out" ||
        fail "--check $f: $(cat "$TMP/chk.out")"
done
# poke FILE TENSOR ELEMENT_BYTE HEX: writes the bytes at that byte of the tensor's data
poke() {
    python3 - "$@" <<'PY'
import json, os, subprocess, sys
path, name, at, hexbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
j = json.loads(subprocess.run([os.environ["BATON"], "inspect", "--json", path],
                              capture_output=True, check=True).stdout)
t = [t for t in j["tensors"] if t["name"] == name][0]
with open(path, "r+b") as f:
    f.seek(j["data_offset"] + t["offset"] + at)
    f.write(bytes.fromhex(hexbytes))
PY
}
export BATON
# f32 attn_q: element 5 (byte 20) becomes a quiet NaN
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 0000c07f || fail "poke f32"
rc=0; "$BATON" inspect --check "$TMP/c.gguf" >"$TMP/chk.out" || rc=$?
[ "$rc" -eq 1 ] &&
    grep -qxF "$TMP/c.gguf: tensor \"blk.0.attn_q.weight\" (f32): 1 of 4096 values are NaN or infinite (the first at element 5)" "$TMP/chk.out" &&
    grep -Eq "^$TMP/c.gguf: 12 tensors, [0-9]+ values read: 1 tensor holds NaN or infinite values\$" "$TMP/chk.out" ||
    fail "--check NaN f32: rc $rc: $(cat "$TMP/chk.out")"
# quantize names the value it cannot convert (it said "malformed field or
# argument"); a finite value too large for a block's binary16 scale too.
# quant_fails TYPE LINE: quantizing c.gguf to TYPE exits 1, writes nothing
# and says LINE
quant_fails() {
    local rc=0
    "$BATON" quantize "$TMP/c.gguf" "$TMP/cq.gguf" "$1" 2>"$TMP/q.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/cq.gguf" ] && grep -qxF "$2" "$TMP/q.err" ||
        fail "quantize $1: rc $rc: $(cat "$TMP/q.err")"
}
quant_fails q4_0 "baton quantize: $TMP/c.gguf: tensor 'blk.0.attn_q.weight': element 5 is NaN, which q4_0 cannot hold (baton inspect --check names every tensor with NaN or infinite values)"
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 9976967e || fail "poke 1e38"
quant_fails Q8_0 "baton quantize: $TMP/c.gguf: tensor 'blk.0.attn_q.weight': element 5 (1e+38) is too large for q8_0: a block's scale would not fit binary16"
# ... and f16, which would have turned it into infinity without a word;
# 65504 (binary16's largest) converts
quant_fails f16 "baton quantize: $TMP/c.gguf: tensor 'blk.0.attn_q.weight': element 5 (1e+38) is beyond the range of f16 (largest finite value 65504); keep the model in f32 or choose a quantized type"
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 00e07f47 || fail "poke 65504"
"$BATON" quantize "$TMP/c.gguf" "$TMP/cq.gguf" f16 2>"$TMP/q.err" || fail "quantize f16 65504: $(cat "$TMP/q.err")"
# bf16 likewise past its largest finite value (2^128 - 2^120), here FLT_MAX,
# which would round to infinity; 1e38 converts, and --check reads BF16
rm -f "$TMP/cq.gguf"
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 ffff7f7f || fail "poke FLT_MAX"
quant_fails bf16 "baton quantize: $TMP/c.gguf: tensor 'blk.0.attn_q.weight': element 5 (3.40282e+38) is beyond the range of bf16 (largest finite value about 3.39e38); keep the model in f32 or choose a quantized type"
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 9976967e || fail "poke 1e38 again"
"$BATON" quantize "$TMP/c.gguf" "$TMP/cq.gguf" BF16 2>"$TMP/q.err" || fail "quantize bf16 1e38: $(cat "$TMP/q.err")"
"$BATON" inspect --check "$TMP/cq.gguf" >"$TMP/chk.out" || fail "--check bf16: $(cat "$TMP/chk.out")"
grep -Eq "^ +[0-9]+ +blk\.0\.attn_q\.weight +bf16 " <("$BATON" inspect "$TMP/cq.gguf") || fail "inspect: attn_q not bf16"
poke "$TMP/c.gguf" blk.0.attn_q.weight 20 0000c07f || fail "poke f32 again"
# q8_0 ffn_up (96 x 64: rows of 64 = 2 blocks of 34 bytes): the second
# block's scale (byte 34) becomes binary16 +inf: its 32 values are infinite
# or NaN (0 x inf), elements 32..63
poke "$TMP/c8.gguf" blk.0.ffn_up.weight 34 007c || fail "poke q8_0"
rc=0; "$BATON" inspect --check "$TMP/c8.gguf" >"$TMP/chk.out" || rc=$?
[ "$rc" -eq 1 ] &&
    grep -qxF "$TMP/c8.gguf: tensor \"blk.0.ffn_up.weight\" (q8_0): 32 of 6144 values are NaN or infinite (the first at element 32)" "$TMP/chk.out" ||
    fail "--check inf q8_0: rc $rc: $(cat "$TMP/chk.out")"
rc=0; "$BATON" inspect --check --json "$TMP/c8.gguf" >/dev/null 2>"$TMP/chk.err" || rc=$?
[ "$rc" -eq 2 ] && grep -qx "baton inspect: --json and --check do not go together" "$TMP/chk.err" ||
    fail "--check --json: rc $rc: $(cat "$TMP/chk.err")"
# a valid file whose first tensor declares ne[0] = 2^62 + 32 (q8_0) and
# ne[1] = 0: no values, but ne[0] x 4 bytes wraps to 128; the second tensor's
# 4096 values were read into that (heap overflow, abort) before --check
# dequantized a fixed chunk at a time. ne[0] = 2^40 f32 with ne[1] = 0 gave
# "out of memory". Each reads the second tensor's values, all finite.
python3 - "$TMP" <<'PY' || fail "write wide-empty files"
import struct, sys
def gguf(path, tensors, data):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    for name, ne, typ in tensors:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", typ, 0)
    open(path, "wb").write(out + b"\0" * (-len(out) % 32) + data)
block = struct.pack("<e", 1.0) + bytes(range(32))  # q8_0: scale 1, values 0..31
gguf(sys.argv[1] + "/wide0.gguf", [("a", [2**62 + 32, 0], 8), ("b", [4096, 1], 8)], block * 128)
gguf(sys.argv[1] + "/wide1.gguf", [("a", [2**40, 0], 0), ("b", [32, 1], 0)],
     struct.pack("<32f", *range(32)))
PY
for f in wide0:4096 wide1:32; do
    rc=0; "$BATON" inspect --check "$TMP/${f%:*}.gguf" >"$TMP/chk.out" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] &&
        grep -qxF "$TMP/${f%:*}.gguf: 2 tensors, ${f#*:} values read: every value is finite" "$TMP/chk.out" ||
        fail "--check ${f%:*}: rc $rc: $(cat "$TMP/chk.out")"
done

# empty tensors (ne[0] = 0, or ne[1] = 0 with ne[0] = 2^40): --check reads
# no values from them and skips none (it said "some skipped: no float
# reading"); quantize gives them the new type and no data (it said
# "inconsistent shape or strides" for ne[0] = 0, and refused [2^40, 0] as
# a 4096 GiB conversion, for the one row of floats it would never read)
python3 - "$TMP" <<'PY' || fail "write empty-tensor file"
import struct, sys
out = b"GGUF" + struct.pack("<IQQ", 3, 3, 0)
for name, ne, typ in (("a", [0, 4], 0), ("e", [2**40, 0], 0), ("b", [32, 1], 1)):
    out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
    out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", typ, 0)
data = struct.pack("<32e", *range(32))
open(sys.argv[1] + "/empty.gguf", "wb").write(out + b"\0" * (-len(out) % 32) + data)
PY
rc=0; "$BATON" inspect --check "$TMP/empty.gguf" >"$TMP/chk.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] &&
    [ "$(cat "$TMP/chk.out")" = "$TMP/empty.gguf: 3 tensors, 32 values read: every value is finite" ] ||
    fail "--check empty tensors: rc $rc: $(cat "$TMP/chk.out")"
for t in q8_0:34 f32:128; do
    rc=0; "$BATON" quantize "$TMP/empty.gguf" "$TMP/emptyq.gguf" "${t%:*}" 2>"$TMP/q.err" || rc=$?
    [ "$rc" -eq 0 ] && grep -qx "baton quantize: by type: ${t%:*} 3" "$TMP/q.err" ||
        fail "quantize empty tensors to ${t%:*}: rc $rc: $(cat "$TMP/q.err")"
    "$BATON" inspect --json "$TMP/emptyq.gguf" >"$TMP/emptyq.json" || fail "inspect ${t%:*} output"
    python3 - "$TMP/emptyq.json" "${t%:*}" "${t#*:}" <<'PY' || fail "quantize empty tensors to ${t%:*}: wrong tensors"
import json, sys
got = [(t["name"], t["type"], t["shape"], t["bytes"]) for t in json.load(open(sys.argv[1]))["tensors"]]
ty, nb = sys.argv[2], int(sys.argv[3])
want = [("a", ty, [0, 4], 0), ("e", ty, [2**40, 0], 0), ("b", ty, [32, 1], nb)]
assert got == want, got
PY
done

# scripts/demo.sh names the absolute path of a missing model
rc=0; (cd "$TMP" && MODEL=missing.gguf BUILD_DIR="$BUILD_DIR" "$SRC_DIR/scripts/demo.sh") >/dev/null 2>"$TMP/demo.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "MODEL=missing.gguf: no such file: $TMP/missing.gguf" "$TMP/demo.err" ||
    fail "demo.sh without the model: rc $rc: $(cat "$TMP/demo.err")"
mkdir -p "$TMP/modeldir"
rc=0; (cd "$TMP" && MODEL=modeldir BUILD_DIR="$BUILD_DIR" "$SRC_DIR/scripts/demo.sh") >/dev/null 2>"$TMP/demo.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "MODEL=modeldir: is a directory: $TMP/modeldir" "$TMP/demo.err" ||
    fail "demo.sh with a directory: rc $rc: $(cat "$TMP/demo.err")"
mkdir -p "$TMP/tree/repo/scripts"
cp "$SRC_DIR/scripts/demo.sh" "$TMP/tree/repo/scripts/"
rc=0; "$TMP/tree/repo/scripts/demo.sh" >/dev/null 2>"$TMP/demo.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "^demo: no model at $TMP/tree/shared/models/stories260K.gguf: " "$TMP/demo.err" ||
    fail "demo.sh without the default model: rc $rc: $(cat "$TMP/demo.err")"
echo PASS
