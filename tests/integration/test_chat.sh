#!/bin/bash
# --chat (model/chat.h): `baton tokenize --chat` gives the published ids of
# a Qwen 2 (chatml) and a Llama 3 layout on llama.cpp's vocab GGUFs, with
# text in the message never a control token; `baton run --chat` generates
# from exactly those ids (a synthetic qwen2 model with the real Qwen 2
# vocabulary and template), prints the laid-out prompt, and does so for
# each line of a --prompt-file; a model without a template, an unknown
# --chat-template and options without --chat are clear errors (1 / 2).
source "$(dirname "$0")/lib.sh"
V="$MODEL_DIR/vocab"
QW="$V/ggml-vocab-qwen2.gguf"
L3="$V/ggml-vocab-llama-bpe.gguf"
if [ ! -f "$QW" ] || [ ! -f "$L3" ]; then
    [ "${CI:-}" = "true" ] && fail "$QW or $L3 missing under CI"
    echo "SKIP: $V/ggml-vocab-{qwen2,llama-bpe}.gguf not found" >&2
    exit 77
fi

# expect WANT ARGS...: baton tokenize ARGS prints WANT and exits 0
expect() {
    local want=$1 got
    shift
    got=$("$BATON" tokenize "$@") || fail "tokenize $*: exit $?"
    [ "$got" = "$want" ] || fail "tokenize $*: want '$want', got '$got'"
}
# status WANT_RC PATTERN ARGS...: baton ARGS exits WANT_RC, stderr matching PATTERN
status() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$BATON" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "baton $*: exit $rc, want $want ($(cat "$TMP/err"))"
    grep -q -- "$pat" "$TMP/err" || fail "baton $*: no '$pat' in: $(cat "$TMP/err")"
}

# Qwen 2: <|im_start|> 151644, <|im_end|> 151645, system 8948, user 872,
# assistant 77091, "\n" 198; no BOS
expect "151644 8948 198 3430 9814 13 151645 198 151644 872 198 9707 151645 198 151644 77091 198" \
    -m "$QW" --chat --system "Be brief." "Hello"
# the message's <|im_end|> is text (27 91 318 6213 91 29 without --chat's
# layout: "<", "|", "im", "_end", "|", ">"), one 151645 from the template
QI="151644 872 198 9707 82639 318 6213 91 29 1052 151645 198 151644 77091 198"
expect "$QI" -m "$QW" --chat "Hello <|im_end|> there"
# Llama 3 (llama.cpp's file has no template: named): BOS 128000,
# <|start_header_id|> 128006, <|end_header_id|> 128007, <|eot_id|> 128009
expect "128000 128006 882 128007 271 9906 128009 128006 78191 128007 271" \
    -m "$L3" --chat --chat-template llama3 " Hello "
printf 'Hello' >"$TMP/msg"
expect "128006 882 128007 271 9906 128009 128006 78191 128007 271" \
    -m "$L3" --no-bos --chat --chat-template llama3 -f "$TMP/msg"
echo "ok: tokenize --chat"

status 2 "no key 'tokenizer.chat_template'.*--chat-template" tokenize -m "$L3" --chat hi
# a layout whose control tokens the vocabulary lacks: its markers would be text
status 2 "has no token <|im_start|>, which the chatml layout needs" \
    tokenize -m "$V/ggml-vocab-gpt-2.gguf" --chat --chat-template chatml hi
status 2 "has no token <|user|>, which the phi3 layout needs" \
    tokenize -m "$QW" --chat --chat-template phi3 hi
expect "58 38604 60 23105 46581 38604 60" -m "$V/ggml-vocab-gpt-2.gguf" --chat \
    --chat-template llama2 hi # [INST] is text by design
status 2 "not chatml, llama3, llama2 or phi3" tokenize -m "$QW" --chat --chat-template vicuna hi
status 2 "--system needs --chat" tokenize -m "$QW" --system S hi
status 2 "not with --no-parse-special" tokenize -m "$QW" --chat --no-parse-special hi
echo "ok: tokenize --chat errors"

# a qwen2-shaped model with the real vocabulary and template
M="$TMP/qwen2.gguf"
"$BATON" gen-model --arch qwen2 --layers 2 --dim 64 --ff 128 --heads 2 --type q8_0 \
    --vocab-from "$QW" -o "$M" >/dev/null 2>&1 || fail "gen-model"
"$BATON" run --model "$M" --chat -p "Hello <|im_end|> there" -n 3 --ids-file "$TMP/ids.json" \
    >"$TMP/out" 2>"$TMP/err" || fail "run --chat: $(cat "$TMP/err")"
grep -q "^chat: template chatml (the model's tokenizer.chat_template)$" "$TMP/err" ||
    fail "no template line: $(cat "$TMP/err")"
python3 - "$TMP/ids.json" "$QI" "$TMP/out" <<'PY' || fail "run --chat ids or text"
import json, sys
got = json.load(open(sys.argv[1]))["prompt"]
want = [int(x) for x in sys.argv[2].split()]
assert got == want, (got, want)
out = open(sys.argv[3], "rb").read()
head = b"<|im_start|>user\nHello <|im_end|> there<|im_end|>\n<|im_start|>assistant\n"
assert out.startswith(head), out[:120]
PY
echo "ok: run --chat prompt ids are tokenize --chat's"

printf 'one\ntwo\n' >"$TMP/prompts"
"$BATON" run --model "$M" --chat --system S --prompt-file "$TMP/prompts" --parallel 2 -n 2 \
    --split 1,1 >"$TMP/out" 2>"$TMP/err" || fail "run --chat --prompt-file: $(cat "$TMP/err")"
for n in 1 2; do
    grep -q "^\[$n\] <|im_start|>system$" "$TMP/out" || fail "[$n] not laid out: $(cat "$TMP/out")"
done
grep -q "^\[2\] two<|im_end|>$" "$TMP/out" || fail "prompt 2's message: $(cat "$TMP/out")"
echo "ok: run --chat --prompt-file lays out every prompt"

L3M="$TMP/llama3.gguf"
"$BATON" gen-model --layers 1 --dim 64 --ff 128 --heads 2 --type q8_0 --vocab-from "$L3" \
    -o "$L3M" >/dev/null 2>&1 || fail "gen-model llama"
status 2 "$L3M: no key 'tokenizer.chat_template'" run --model "$L3M" --chat -p hi -n 1
"$BATON" run --model "$L3M" --chat --chat-template llama3 -p hi -n 1 --quiet \
    --ids-file "$TMP/ids3.json" >/dev/null 2>"$TMP/err" || fail "run llama3: $(cat "$TMP/err")"
grep -q '"prompt": \[128000, 128006, 882, 128007, 271, 6151, 128009, 128006, 78191, 128007, 271\]' \
    "$TMP/ids3.json" || fail "llama3 prompt ids: $(cat "$TMP/ids3.json")"
status 2 "--chat-template 'x' is not" run --model "$M" --chat --chat-template x -p hi
status 2 "has no token <|start_header_id|>, which the llama3 layout needs" \
    run --model "$M" --chat --chat-template llama3 -p hi
status 2 "--system needs --chat" run --model "$M" --system S -p hi
status 2 "not --prompt-ids" run --model "$M" --chat --prompt-ids 1,2
echo "ok: run --chat errors"
