#!/bin/bash
# baton inspect and baton run on the real model file and on broken copies:
# right facts, valid JSON, clear errors naming the file, exit codes.
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

# a truncated copy: clear error naming the file, exit 1, for inspect and run
head -c 14000 "$MODEL" >"$TMP/trunc.gguf"
rc=0; "$BATON" inspect "$TMP/trunc.gguf" >/dev/null 2>"$TMP/trunc.err" || rc=$?
[ "$rc" -eq 1 ] || fail "inspect on a truncated file exited $rc"
grep -q "trunc.gguf" "$TMP/trunc.err" || fail "error does not name the file: $(cat "$TMP/trunc.err")"
rc=0; "$BATON" run --model "$TMP/trunc.gguf" --prompt hi >/dev/null 2>"$TMP/run_trunc.err" || rc=$?
[ "$rc" -eq 1 ] || fail "run on a truncated file exited $rc"
grep -q "trunc.gguf" "$TMP/run_trunc.err" || fail "run error does not name the file"

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
rc=0; "$BATON" run --model "$MODEL" --prompt x --servers 127.0.0.1:1 --timeout 2000 >/dev/null 2>"$TMP/conn.err" || rc=$?
[ "$rc" -eq 1 ] || fail "unreachable server exited $rc"
grep -q "stage 1 (127.0.0.1:1): connect failed" "$TMP/conn.err" || fail "connect message: $(cat "$TMP/conn.err")"
"$BATON" run --help | grep -q -- "--servers" || fail "run --help"
"$BATON" --help | grep -q inspect || fail "baton --help"
echo PASS
