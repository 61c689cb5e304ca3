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
status 2 "not chatml, llama3, llama2, phi3, gemma, mistral-v3, mistral-v3-tekken, mistral-v7 or mistral-v7-tekken" tokenize -m "$QW" --chat --chat-template vicuna hi
# gemma's turn markers are control tokens: not on Qwen 2's vocabulary
status 2 "has no token <start_of_turn>, which the gemma layout needs" \
    tokenize -m "$QW" --chat --chat-template gemma hi
# a Mistral template in a file whose vocabulary lacks its control tokens
python3 "$SRC_DIR/tests/integration/gguf_edit.py" "$QW" "$TMP/mistral.gguf" \
    --set tokenizer.chat_template str "{{ '[SYSTEM_PROMPT]' + s }}{{ '[INST]' + c + '[/INST]' }}" ||
    fail "gguf_edit"
status 2 "has no token \[INST\], which the mistral-v7-tekken layout needs .*recognized in tokenizer.chat_template" \
    tokenize -m "$TMP/mistral.gguf" --chat hi
status 2 "has no token \[SYSTEM_PROMPT\], which the mistral-v7-tekken layout needs" \
    tokenize -m "$TMP/mistral.gguf" --chat --system S hi
# a Gemma template (recognized) in such a file
python3 "$SRC_DIR/tests/integration/gguf_edit.py" "$QW" "$TMP/gemma.gguf" \
    --set tokenizer.chat_template str "{{ '<start_of_turn>' + role + '\\n' }}" || fail "gguf_edit"
status 2 "has no token <start_of_turn>, which the gemma layout needs .*recognized in tokenizer.chat_template" \
    tokenize -m "$TMP/gemma.gguf" --chat hi
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

# --interactive: a conversation read from standard input, one message a
# line (as --prompt-file's: a byte order mark skipped, a line ending at LF,
# CR LF or a CR alone, blank lines (spaces and tabs) skipped, a last line
# without its end taken), each
# turn's prompt the conversation so far: the turns before (the last reply
# without its end-of-generation token) kept as they were, then the reply's
# turn closed and the message laid out; only the new tokens prefilled.
printf '\xef\xbb\xbfHello there\r\n \t\n\nHow are you?\rBye' >"$TMP/msgs"
# conv NAME ARGS...: a conversation over $TMP/msgs, ids into $TMP/NAME.json
conv() {
    local name=$1
    shift
    "$BATON" run --model "$M" --chat -i -n 4 --ids-file "$TMP/$name.json" "$@" \
        <"$TMP/msgs" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        fail "conversation $name: exit $?: $(cat "$TMP/$name.err")"
}
conv c1
python3 - "$TMP/c1.json" "$TMP/c1.out" "$TMP/c1.err" <<'PY' || fail "conversation c1: $(cat "$TMP/c1.err")"
import json, re, sys
seqs = json.load(open(sys.argv[1]))["sequences"]
assert len(seqs) == 3, len(seqs)
# Qwen 2: <|im_start|> 151644, <|im_end|> 151645, <|endoftext|> 151643
# (end-of-generation), user 872, assistant 77091, "\n" 198
msg = [[9707, 1052], [4340, 525, 498, 30], [1359, 68]]  # Hello there / How are you? / Bye
opn, tail = [151644, 872, 198], [151645, 198, 151644, 77091, 198]
assert seqs[0]["prompt"] == opn + msg[0] + tail, seqs[0]["prompt"]
prefilled = len(seqs[0]["prompt"])
for k in (1, 2):
    prev = seqs[k - 1]["prompt"] + seqs[k - 1]["generated"]
    fed = len(prev) - 1  # the last generated token was never fed back
    if prev[-1] in (151643, 151645):
        prev = prev[:-1]
    assert seqs[k]["prompt"] == prev + [151645, 198] + opn + msg[k] + tail, (k, seqs[k]["prompt"])
    prefilled += len(seqs[k]["prompt"]) - fed
for s in seqs:
    assert 1 <= len(s["generated"]) <= 4
lines = open(sys.argv[2], "rb").read().split(b"\n")
assert len(lines) == 4 and lines[3] == b"", lines  # a line per reply
err = open(sys.argv[3]).read()
m = re.search(r"a conversation of 3 turns, (\d+) prompt tokens prefilled", err)
assert m and int(m.group(1)) == prefilled, (prefilled, err)
PY
# fresh NAME ARGS...: every turn's reply in $TMP/NAME.json is the one its
# whole prompt gives in a fresh run with ARGS (with SEED set, turn N's with
# --seed SEED + N - 1)
fresh() {
    local name=$1 k
    shift
    for k in 0 1 2; do
        local seed=()
        [ -z "${SEED:-}" ] || seed=(--seed $((SEED + k)))
        "$BATON" run --model "$M" -n 4 --quiet --ids-file "$TMP/fresh.json" "$@" "${seed[@]}" \
            --prompt-ids "$(field "$TMP/$name.json" \
                "','.join(map(str, j['sequences'][$k]['prompt']))")" 2>"$TMP/err" ||
            fail "fresh run of $name's turn $((k + 1)): $(cat "$TMP/err")"
        [ "$(field "$TMP/fresh.json" 'j["generated"]')" = \
            "$(field "$TMP/$name.json" "j['sequences'][$k]['generated']")" ] ||
            fail "$name: turn $((k + 1))'s reply differs from a fresh run of its prompt"
    done
}
fresh c1
echo "ok: run --chat --interactive: turns, ids, prefill from the KV cache"

# the same ids on 2 in-process stages, and over 2 batond: the direct path
# with the decode ring, and the hub path
make_keys
start_ring a b
SRV="127.0.0.1:$PORT_a,127.0.0.1:$PORT_b"
conv c2 --split 1,1
# 4 input slots: a graph for each power of two up to the ubatch on each
conv c4 --split 1,1 --slots 4 --ctx 2048 --ubatch 1024
grep -q "plan: a conversation's ubatch is 128, not --ubatch 1024" "$TMP/c4.err" ||
    fail "c4: no ubatch line: $(cat "$TMP/c4.err")"
conv cring --servers "$SRV" --key "$K"
conv chub --servers "$SRV" --key "$K" --p2p off
for n in c2 c4 cring chub; do
    cmp -s "$TMP/c1.json" "$TMP/$n.json" || fail "conversation $n: ids differ from in-process"
done

# sampled: the N-th turn's seed is --seed + N - 1, as the N-th prompt's of a file
SAMPLE=(--temp 0.8 --top-k 40 --top-p 0.95 --seed 7)
conv s1 "${SAMPLE[@]}"
conv sring "${SAMPLE[@]}" --servers "$SRV" --key "$K"
cmp -s "$TMP/s1.json" "$TMP/sring.json" || fail "sampled conversation: ids differ over batond"
SEED=7 fresh s1 --temp 0.8 --top-k 40 --top-p 0.95
echo "ok: run --chat --interactive: the same ids split, hub, direct and ring, sampled"

# a conversation that fills --ctx: the reply cut (said), the next message
# refused, exit 1; no input: no turn, exit 0
rc=0
"$BATON" run --model "$M" --chat -i -n 4 --ctx 12 --ids-file "$TMP/full.json" <"$TMP/msgs" \
    >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "--ctx 12 conversation: exit $rc, want 1: $(cat "$TMP/err")"
grep -q "the conversation with this message is .* tokens: --ctx 12 holds no more" "$TMP/err" ||
    fail "no context-full message: $(cat "$TMP/err")"
grep -q "(the reply was cut where the conversation filled --ctx 12)" "$TMP/err" ||
    fail "no cut-reply note: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq 1 ] || fail "--ctx 12: want one reply line: $(cat "$TMP/out")"
# the turns so far are summed up and written
grep -q "a conversation of 1 turn," "$TMP/err" || fail "--ctx 12: no summary: $(cat "$TMP/err")"
[ "$(field "$TMP/full.json" 'len(j["sequences"])')" = 1 ] || fail "--ctx 12: ids of 1 turn"
"$BATON" run --model "$M" --chat -i </dev/null >"$TMP/out" 2>"$TMP/err" ||
    fail "empty conversation: exit $?: $(cat "$TMP/err")"
grep -q "a conversation of 0 turns" "$TMP/err" || fail "empty conversation: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "empty conversation wrote: $(cat "$TMP/out")"
status 2 "--interactive is a conversation with a chat model: it needs --chat" run --model "$M" -i
status 2 "not with --prompt" run --model "$M" --chat -i -p hi
status 2 "--keepalive needs --interactive" run --model "$M" --chat -p hi --keepalive 5
status 2 "not with --interactive" run --model "$M" --chat -i --logits-out "$TMP/l.bin"
status 2 "not with --interactive" run --model "$M" --chat -i --stats
# a NUL byte in a message: refused as --prompt-file refuses it; the turns
# before it are summed up
rc=0
printf 'Hi\na\0b\n' | "$BATON" run --model "$M" --chat -i -n 2 >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "a NUL in a message: exit $rc, want 1: $(cat "$TMP/err")"
grep -q "a message holds a NUL byte" "$TMP/err" || fail "NUL: $(cat "$TMP/err")"
grep -q "a conversation of 1 turn," "$TMP/err" || fail "NUL: no summary: $(cat "$TMP/err")"
echo "ok: run --chat --interactive: a full context, no input, errors"

# while the user types, --keepalive keeps the connection inside the
# server's idle timeout (3 s here), also while a line comes in slowly (a
# byte each 1.2 s: the keepalive is due 2 s after the last request, not 2 s
# after the last byte); without it the server closes the connection
printf 'idle_timeout = 3s\n' >"$TMP/idle.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/idle.policy" start_server idle
# slow KEEPALIVE: a message, then "Bye" a byte at a time over 4.8 s
slow() {
    {
        printf 'Hello there\n'
        for c in B y e '\n'; do
            sleep 1.2
            printf '%b' "$c"
        done
    } | "$BATON" run --model "$M" --chat -i -n 2 --keepalive "$1" \
        --servers "127.0.0.1:$PORT_idle" >"$TMP/slow.out" 2>"$TMP/slow.err"
}
slow 2 || fail "--keepalive 2 over a 3 s idle timeout: exit $?: $(cat "$TMP/slow.err")"
grep -q "a conversation of 2 turns" "$TMP/slow.err" || fail "keepalive: $(cat "$TMP/slow.err")"
rc=0
slow 60 || rc=$?
[ "$rc" -eq 1 ] || fail "--keepalive 60 over a 3 s idle timeout: exit $rc, want 1"
grep -q "its idle timeout passed while this conversation waited" "$TMP/slow.err" ||
    fail "keepalive 60: no hint: $(cat "$TMP/slow.err")"
echo "ok: run --chat --interactive --keepalive"

# a server lost during a later turn: said, exit 1, and the turns before it
# are still summed up and written
start_server d1
start_server d2
{
    printf 'Hello there\n'
    # turn 1 has ended once its reply's line has (its first token's text may
    # come out while its last step still runs: slow under ASan)
    for _ in $(seq 800); do
        [ "$(wc -l <"$TMP/drop.out" 2>/dev/null || echo 0)" -ge 1 ] && break
        sleep 0.025
    done
    kill -KILL "$PID_d2"
    sleep 0.3
    printf 'Bye\n'
} | "$BATON" run --model "$M" --chat -i -n 2 --keepalive 60 --ids-file "$TMP/drop.json" \
    --servers "127.0.0.1:$PORT_d1,127.0.0.1:$PORT_d2" >"$TMP/drop.out" 2>"$TMP/drop.err" && rc=0 || rc=$?
[ "$rc" -eq 1 ] || fail "a server lost in turn 2: exit $rc, want 1: $(cat "$TMP/drop.err")"
grep -q "stage 2 (127.0.0.1:$PORT_d2)" "$TMP/drop.err" || fail "drop: $(cat "$TMP/drop.err")"
grep -q "a conversation of 1 turn," "$TMP/drop.err" || fail "drop: no summary: $(cat "$TMP/drop.err")"
[ "$(field "$TMP/drop.json" 'len(j["sequences"])')" = 1 ] || fail "drop: want the ids of 1 turn"
# ... and its figures are that turn's alone
want=$(field "$TMP/drop.json" \
    '"%d prompt tokens prefilled" % len(j["sequences"][0]["prompt"])')
grep -q "1 turn, $want .* generated $(field "$TMP/drop.json" \
    'len(j["sequences"][0]["generated"])') token" "$TMP/drop.err" ||
    fail "drop: the summary counts more than turn 1 ($want): $(cat "$TMP/drop.err")"
echo "ok: run --chat --interactive: a server lost in a later turn"
