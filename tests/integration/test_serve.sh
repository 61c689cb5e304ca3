#!/bin/bash
# baton serve (src/model/serve.c, serve_req.c; docs/USAGE.md "An HTTP
# server"): OpenAI-style completions over HTTP on loopback, each request a
# sequence in a KV-cache slot. Checks that every reply is the text baton run
# gives the same prompt alone (greedy and seeded sampling), whatever the
# other requests running beside it (more requests than slots: the queue and
# continuous batching), in-process and over 2 batond (direct path, hub path,
# two pipeline groups); that a chat request's prompt is its messages laid
# out in the model's template; that streamed replies carry the same text;
# that stop strings cut a reply just before the earliest (whole and streamed,
# completions and chat, against the same request without them);
# every refusal (400 naming the field, 401, 404, 405, 413, 503 when the
# queue is full or the server stops); a client that goes away mid-stream;
# SIGTERM (exit 0, requests in flight fail with 503); and usage errors.
source "$(dirname "$0")/lib.sh"
QW="$MODEL_DIR/vocab/ggml-vocab-qwen2.gguf"
if [ ! -f "$QW" ]; then
    [ "${CI:-}" = "true" ] && fail "$QW missing under CI"
    echo "SKIP: $QW not found" >&2
    exit 77
fi
CLIENT="python3 $(dirname "$0")/serve_client.py"
M="$TMP/qwen2.gguf"
"$BATON" gen-model --arch qwen2 --layers 2 --dim 64 --ff 128 --heads 2 --type q8_0 \
    --vocab-from "$QW" -o "$M" >/dev/null 2>&1 || fail "gen-model"

# serve NAME ARGS...: baton serve on 127.0.0.1, a free port; sets SPORT and
# SPID (stopped on exit, by PID); its log in $TMP/serve.NAME.log
serve() {
    local name=$1
    shift
    rm -f "$TMP/sport.$name"
    "$BATON" serve --model "$M" --listen 127.0.0.1:0 --port-file "$TMP/sport.$name" "$@" \
        >"$TMP/serve.$name.out" 2>"$TMP/serve.$name.log" &
    SPID=$!
    PIDS+=("$SPID")
    for _ in $(seq 600); do
        [ -s "$TMP/sport.$name" ] && break
        kill -0 "$SPID" 2>/dev/null || fail "serve $name exited: $(cat "$TMP/serve.$name.log")"
        sleep 0.05
    done
    [ -s "$TMP/sport.$name" ] || fail "serve $name did not listen: $(cat "$TMP/serve.$name.log")"
    SPORT=$(cat "$TMP/sport.$name")
    grep -q "^serve: listening on http://127.0.0.1:$SPORT " "$TMP/serve.$name.log" ||
        fail "no listening line: $(cat "$TMP/serve.$name.log")"
}
# stop_serve NAME: SIGTERM; it must exit 0 with its summary line
stop_serve() {
    local rc=0
    kill -TERM "$SPID"
    wait "$SPID" || rc=$?
    [ "$rc" -eq 0 ] || fail "serve $1 exited $rc after SIGTERM: $(tail -5 "$TMP/serve.$1.log")"
    grep -q "^summary: served " "$TMP/serve.$1.log" || fail "no summary: $(cat "$TMP/serve.$1.log")"
}
# expect_status WANT PATTERN OUTPUT: "STATUS BODY" has status WANT and PATTERN
expect_status() {
    [ "${3%% *}" = "$1" ] || fail "want $1, got: $3"
    grep -q -- "$2" <<<"$3" || fail "no '$2' in: $3"
}

# requests.jsonl: prompts, sampling and lengths of several requests; the
# same with --temp 0 for some (greedy)
python3 - "$TMP/requests.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(10):
        r = {"prompt": "Request %d: once upon a time" % i + " there" * i, "max_tokens": 3 + i}
        if i % 3:
            r.update(temperature=0.8, seed=100 + i, top_k=40 if i % 2 else 0, top_p=0.95)
        f.write(json.dumps(r) + "\n")
PY
# alone: each request's text from baton run, one at a time (the reference)
i=0
while IFS= read -r line; do
    args=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(" ".join(["-n", str(r["max_tokens"])] + (["--temp", str(r["temperature"]), "--seed", str(r["seed"]), "--top-k", str(r["top_k"]), "--top-p", str(r["top_p"])] if "seed" in r else [])))' "$line")
    prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prompt"])' "$line")
    # shellcheck disable=SC2086
    "$BATON" run --model "$M" -p "$prompt" $args >"$TMP/alone.$i" 2>/dev/null ||
        fail "baton run alone $i"
    i=$((i + 1))
done <"$TMP/requests.jsonl"

# check_many NAME: the requests at once; every reply's text is baton run's
check_many() {
    $CLIENT "$SPORT" many /v1/completions "$TMP/requests.jsonl" "$TMP/many.$1" ||
        fail "client many $1"
    python3 - "$TMP/requests.jsonl" "$TMP/many.$1" "$TMP/alone" <<'PY' || fail "many $1"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for i, line in enumerate(open(sys.argv[2])):
    status, body = line.split(" ", 1)
    assert status == "200", (i, line)
    j = json.loads(body)
    # baton run prints the prompt, the text's bytes, "\n"; a reply's text is
    # valid UTF-8: each ill-formed part (and NUL) one U+FFFD, as Python's
    # "replace" decodes
    alone = open("%s.%d" % (sys.argv[3], i), "rb").read()
    want = alone[len(reqs[i]["prompt"].encode()):-1]
    want = want.decode("utf-8", "replace").replace("\0", "\ufffd")
    c = j["choices"][0]
    assert c["text"] == want, (i, c["text"], want)
    assert j["object"] == "text_completion" and j["model"] == "qwen2.gguf", j
    u = j["usage"]
    assert u["completion_tokens"] == reqs[i]["max_tokens"], (i, u)  # no EOS in these
    assert c["finish_reason"] == "length", c
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
PY
}

serve local --parallel 3 --queue 16
out=$($CLIENT "$SPORT" get /health)
expect_status 200 '"status":"ok","slots":3,"running":0,"queued":0' "$out"
out=$($CLIENT "$SPORT" get /v1/models)
expect_status 200 '"id":"qwen2.gguf"' "$out"
check_many local
echo "ok: 10 requests over 3 slots, in-process: each is baton run's text"

# streamed: the same text in pieces, then the finish reason and [DONE]
first=$(head -1 "$TMP/requests.jsonl")
$CLIENT "$SPORT" stream /v1/completions "${first%\}}, \"stream\": true}" >"$TMP/stream" ||
    fail "stream"
python3 - "$TMP/stream" "$TMP/alone.0" "$first" <<'PY' || fail "stream: $(cat "$TMP/stream")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[-1] == "[DONE]", lines[-1]
ev = [json.loads(l) for l in lines[:-1]]
text = "".join(e["choices"][0]["text"] for e in ev)
req = json.loads(sys.argv[3])
want = open(sys.argv[2], "rb").read()[len(req["prompt"].encode()):-1]
want = want.decode("utf-8", "replace").replace("\0", "\ufffd")
assert text == want, (text, want)
assert all(e["choices"][0]["finish_reason"] is None for e in ev[:-1]), ev
assert ev[-1]["choices"][0]["finish_reason"] == "length", ev[-1]
assert ev[-1]["usage"]["completion_tokens"] == req["max_tokens"], ev[-1]
PY
echo "ok: a streamed reply is the same text, then finish_reason and [DONE]"

# the prefix cache: a request goes into the free slot whose cells hold the
# longest prefix of its prompt, and only the rest is computed. A, then C
# (nothing in common: the other slot, least recently used), then B = A's
# prompt + A's reply + more: B's usage.prompt_tokens_details.cached_tokens
# is the common prefix of B's ids and the ids slot 0 holds (A's prompt and
# every generated id but the last, from baton run --ids-file), and B's
# text is baton run's; the same B streamed then finds all but its last
# prompt id held. With --prefix-cache off nothing is held, same texts.
pa="Once upon a time there was a"
local_port=$SPORT local_pid=$SPID # the in-process server's, again after this part
"$BATON" run --model "$M" -p "$pa" -n 6 --ids-file "$TMP/pc.a.json" >/dev/null 2>&1 ||
    fail "baton run A"
for pc in on off; do
    serve "pc$pc" --parallel 2 --prefix-cache "$pc"
    out=$($CLIENT "$SPORT" post /v1/completions "{\"prompt\": \"$pa\", \"max_tokens\": 6}")
    expect_status 200 '"cached_tokens":0}' "$out"
    atext=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["choices"][0]["text"], end="")' "$out")
    out=$($CLIENT "$SPORT" post /v1/completions '{"prompt": "Zebra crossing", "max_tokens": 3}')
    expect_status 200 '"cached_tokens":0}' "$out"
    pb="$pa$atext and then"
    bjson=$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 5}))' "$pb")
    $CLIENT "$SPORT" post /v1/completions "$bjson" >"$TMP/pc.b.$pc" || fail "B ($pc)"
    $CLIENT "$SPORT" stream /v1/completions "${bjson%\}}, \"stream\": true}" >"$TMP/pc.bs.$pc" ||
        fail "B streamed ($pc)"
    stop_serve "pc$pc"
    "$BATON" run --model "$M" -p "$pb" -n 5 >"$TMP/pc.alone" 2>/dev/null || fail "baton run B"
    "$BATON" tokenize --model "$M" -- "$pb" >"$TMP/pc.bids" || fail "tokenize B"
    python3 - "$pc" "$TMP/pc.a.json" "$TMP/pc.bids" "$TMP/pc.b.$pc" "$TMP/pc.bs.$pc" \
        "$TMP/pc.alone" "$pb" <<'PY' || fail "prefix cache $pc"
import json, sys
pc, a, bids, b, bs, alone, pb = sys.argv[1:8]
a = json.load(open(a))
held = a["prompt"] + a["generated"][:-1]
ids = [int(t) for t in open(bids).read().split()]
lcp = 0
while lcp < min(len(held), len(ids) - 1) and held[lcp] == ids[lcp]:
    lcp += 1
want = open(alone, "rb").read()[len(pb.encode()):-1].decode("utf-8", "replace")
status, body = open(b).read().split(" ", 1)
assert status == "200", status
j = json.loads(body)
assert j["choices"][0]["text"] == want, (j["choices"][0]["text"], want)
u = j["usage"]
assert u["prompt_tokens"] == len(ids), (u, len(ids))
assert u["prompt_tokens_details"]["cached_tokens"] == (lcp if pc == "on" else 0), (u, lcp)
assert pc == "off" or lcp >= 6, lcp  # at least A's prompt was held
lines = open(bs).read().splitlines()
assert lines[-1] == "[DONE]", lines[-1]
ev = [json.loads(l) for l in lines[:-1]]
assert "".join(e["choices"][0]["text"] for e in ev) == want
cached = ev[-1]["usage"]["prompt_tokens_details"]["cached_tokens"]
assert cached == (len(ids) - 1 if pc == "on" else 0), (cached, len(ids))
PY
    grep -q "^summary: served 4 requests .*, $([ "$pc" = on ] && echo '[1-9][0-9]*' || echo 0) held by the prefix cache)" \
        "$TMP/serve.pc$pc.log" || fail "prefix cache $pc summary: $(grep summary "$TMP/serve.pc$pc.log")"
done
SPORT=$local_port SPID=$local_pid
echo "ok: the prefix cache: a request computes only what its slot does not hold; same texts"

# chat: system, user, assistant, user laid out in the model's template
# (chatml): the first turn as baton tokenize --chat lays it out, the
# assistant's text, then the next user's turn as a conversation's
ids1=$("$BATON" tokenize -m "$M" --chat --system "Be brief." "Hello")
ids2=$("$BATON" tokenize -m "$M" --no-bos "Hi there")
printf '<|im_end|>\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n' >"$TMP/turn"
ids3=$("$BATON" tokenize -m "$M" --no-bos -f "$TMP/turn")
all="$ids1 $ids2 $ids3"
"$BATON" run --model "$M" --prompt-ids "${all// /,}" -n 5 --temp 0.7 --seed 9 \
    --ids-file "$TMP/chat.ids" >"$TMP/chat.alone" 2>/dev/null || fail "run --prompt-ids"
body='{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content":
 [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}, {"role": "assistant",
 "content": "Hi there"}, {"role": "user", "content": "And now?"}], "max_tokens": 5,
 "temperature": 0.7, "seed": 9}'
out=$($CLIENT "$SPORT" post /v1/chat/completions "$body")
python3 - "$out" "$TMP/chat.alone" "$all" <<'PY' || fail "chat: $out"
import json, sys
status, body = sys.argv[1].split(" ", 1)
assert status == "200", sys.argv[1]
j = json.loads(body)
assert j["object"] == "chat.completion", j
m = j["choices"][0]["message"]
assert m["role"] == "assistant", m
# baton run --prompt-ids prints no prompt: the text, then "\n"
want = open(sys.argv[2], "rb").read()[:-1].decode("utf-8", "replace").replace("\0", "\ufffd")
assert m["content"] == want, (m["content"], want)
assert j["usage"]["prompt_tokens"] == len(sys.argv[3].split()), j["usage"]
PY
$CLIENT "$SPORT" stream /v1/chat/completions "${body%\}}, \"stream\": true}" >"$TMP/cstream" ||
    fail "chat stream"
python3 - "$TMP/cstream" "$TMP/chat.alone" <<'PY' || fail "chat stream: $(cat "$TMP/cstream")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[-1] == "[DONE]", lines
ev = [json.loads(l) for l in lines[:-1]]
assert ev[0]["object"] == "chat.completion.chunk", ev[0]
assert ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, ev[0]
text = "".join(e["choices"][0]["delta"].get("content", "") for e in ev)
want = open(sys.argv[2], "rb").read()[:-1].decode("utf-8", "replace").replace("\0", "\ufffd")
assert text == want, (text, want)
assert ev[-1]["choices"][0]["finish_reason"] == "length", ev[-1]
PY
echo "ok: chat: the messages laid out (chatml), streamed and not"

# stop strings: each reply (whole and streamed, completions and chat, greedy
# and seeded) is the same request's text without them, cut just before the
# earliest occurrence; the tokens up to the one whose text completed it are
# counted. The tokens' pieces: the text of the same request with max_tokens
# 1, 2, ... (a reply of k tokens is the first k tokens' text)
python3 - "$SPORT" "$(dirname "$0")" <<'PY' || fail "stop strings"
import sys
sys.path.insert(0, sys.argv[2])
from serve_client import reply, stream
port, N = sys.argv[1], 16
SNOW = "\u2603"  # never in these replies (checked)


def pieces(path, req):
    """The reply's text T and where each token's text ends in it (characters), or
    None where a token's text ends inside a character (U+FFFD there)."""
    T, why, _ = reply(port, path, dict(req, max_tokens=N))
    assert why == "length", why
    heads = [reply(port, path, dict(req, max_tokens=k))[0] for k in range(1, N + 1)]
    if "\ufffd" in T or SNOW in T or any(not T.startswith(h) for h in heads):
        return None
    return T, [0] + [len(h) for h in heads]


def expect(T, ends, stops):
    """The reply the stop strings give, worked out token by token: the first token
    after which the text holds one; the text cut at the earliest such place."""
    for k in range(1, N + 1):
        at = [T[:ends[k]].find(s) for s in stops if s in T[:ends[k]]]
        if at:
            return T[:min(at)], "stop", k
    return T, "length", N


def first_at(T, start, stop_by, grow):
    """A stop string T[start:start + n], the shortest whose first place in T is
    start and that ends by stop_by (grow: may end past it)."""
    for n in range(1, 40):
        s = T[start:start + n]
        if len(s) == n and (grow or start + n <= stop_by) and T.find(s) == start:
            return s
    return None


def check(path, req, T, ends, stops, want_why, want_k, want_text=None):
    text, why, k = expect(T, ends, stops)
    assert why == want_why and k == want_k, (stops, why, k, want_why, want_k)
    if want_text is not None:
        assert text == want_text, (stops, text, want_text)
    body = dict(req, max_tokens=N, stop=stops[0] if len(stops) == 1 else stops)
    for how in (reply, stream):
        got, got_why, u = how(port, path, body)
        assert (got, got_why) == (text, why), (how.__name__, stops, got, got_why, text, why)
        assert u["completion_tokens"] == k, (how.__name__, stops, u, k)
        assert T.startswith(got), (got, T)


cases = 0
for path, req in [
        ("/v1/completions", {"prompt": "Hello, world"}),
        ("/v1/completions", {"prompt": "Hello, world", "temperature": 0.8, "seed": 5}),
        ("/v1/completions", {"prompt": "The cat sat on the mat."}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello, world"}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell a story"}],
                                  "temperature": 0.7, "seed": 3}),
        ("/v1/completions", {"prompt": "Once upon a time"})]:
    got = pieces(path, req)
    if got is None:  # a token's text ends inside a character: piece ends unclear
        continue
    T, ends = got
    # in the middle of one token's text: starts after its first character, ends
    # before its last
    mid = [(k, s) for k in range(1, N + 1)
           for s in [first_at(T, ends[k - 1] + 1, ends[k] - 1, False)] if s]
    assert mid, (T, ends)
    k, s = mid[0]
    assert ends[k - 1] < T.find(s) and T.find(s) + len(s) < ends[k]
    check(path, req, T, ends, [s], "stop", k, T[:ends[k - 1] + 1])
    # across two tokens' texts: the last character of one and the next's first
    across = [(k, s) for k in range(1, N) for s in [first_at(T, ends[k] - 1, ends[k], True)]
              if s and len(s) >= 2 and ends[k] - 1 + len(s) <= ends[k + 1]]
    assert across, (T, ends)
    k2, s2 = across[-1]
    check(path, req, T, ends, [s2], "stop", k2 + 1, T[:ends[k2] - 1])
    # never: a string not in the reply, one of the prompt's words (the prompt is
    # not searched), and the start of one that ends a token's text, then is not
    # followed by the rest (held back in a stream, then sent; at the end too)
    words = [w for w in (req.get("prompt") or req["messages"][0]["content"]).split()
             if w not in T]
    assert words, T
    check(path, req, T, ends, [SNOW + "x", words[-1], T[ends[3] - 2:ends[3]] + SNOW,
                               T[-3:] + SNOW], "length", N, T)
    # several: the earliest occurrence wins, whichever is listed first
    if T.find(s) < T.find(s2):
        check(path, req, T, ends, [s2, SNOW, s], "stop", k, T[:T.find(s)])
    # two that the same token completes: the one that starts earlier wins
    same = [(k, T[ends[k - 1] + 1:ends[k]], T[ends[k - 1]:ends[k]]) for k in range(1, N + 1)
            if ends[k] - ends[k - 1] >= 2 and T.find(T[ends[k - 1]:ends[k]]) == ends[k - 1] and
            T.find(T[ends[k - 1] + 1:ends[k]]) == ends[k - 1] + 1]
    assert same, (T, ends)
    k3, late, early = same[0]
    check(path, req, T, ends, [late, early], "stop", k3, T[:ends[k3 - 1]])
    cases += 1
assert cases >= 4, cases
PY
grep -q "generated [0-9]* (stop string)" "$TMP/serve.local.log" ||
    fail "no '(stop string)' line: $(tail -3 "$TMP/serve.local.log")"
expect_status 200 '"running":0,"queued":0' "$($CLIENT "$SPORT" get /health)"
echo "ok: stop strings: the reply without them, cut before the earliest; streamed the same"

# refusals: each 400 names what was wrong; nothing else is disturbed
expect_status 400 'max_tokens\\" must' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 0}')"
expect_status 400 'temperature' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "temperature": "hot"}')"
expect_status 400 'prompt' "$($CLIENT "$SPORT" post /v1/completions '{"max_tokens": 3}')"
expect_status 400 'NUL' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a\u0000b"}')"
expect_status 400 'stop\[1\] must be a string of at most 256 bytes' "$($CLIENT "$SPORT" post /v1/completions "{\"prompt\": \"a\", \"stop\": [\"x\", \"$(printf 'y%.0s' $(seq 257))\"]}")"
expect_status 200 '"finish_reason":"length"' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "stop": ["", ""], "max_tokens": 2}')"
expect_status 400 '"stop\\" holds more than 4' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}')"
expect_status 400 'invalid_request_error' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": ')"
expect_status 400 'user' "$($CLIENT "$SPORT" post /v1/chat/completions '{"messages": [{"role": "assistant", "content": "a"}]}')"
long=$(python3 -c 'print("word " * 700)')
expect_status 400 'a sequence holds 512 positions' \
    "$($CLIENT "$SPORT" post /v1/completions "{\"prompt\": \"$long\"}")"
python3 -c 'import sys; sys.stdout.write("{\"prompt\": \"" + "a" * (2 << 20) + "\"}")' >"$TMP/big"
expect_status 413 'more than 2097152 bytes' "$($CLIENT "$SPORT" raw /v1/completions "$TMP/big")"
expect_status 404 'no such path' "$($CLIENT "$SPORT" get /v1/embeddings)"
expect_status 405 'takes POST' "$($CLIENT "$SPORT" get /v1/completions)"
expect_status 405 'takes GET' "$($CLIENT "$SPORT" post /health '{}')"
echo "ok: refusals (400 naming the field, 404, 405, 413)"

# /tokenize and /detokenize (llama-server's): the ids baton tokenize gives
# (control-token text parsed unless parse_special is false; BOS only with
# add_special, and this vocabulary adds none), each id's piece, and back to
# the text, a control token as its text
text='Hello world<|im_end|> é'
ids=$("$BATON" tokenize -m "$M" -- "$text" | tr ' ' ,)
plain=$("$BATON" tokenize -m "$M" --no-parse-special -- "$text" | tr ' ' ,)
[ "$ids" != "$plain" ] || fail "the text holds no control token: $ids"
expect_status 200 "^200 {\"tokens\":\[$ids\]}\$" "$($CLIENT "$SPORT" post /tokenize "{\"content\": \"$text\"}")"
expect_status 200 "^200 {\"tokens\":\[$plain\]}\$" \
    "$($CLIENT "$SPORT" post /tokenize "{\"content\": \"$text\", \"parse_special\": false, \"add_special\": true}")"
out=$($CLIENT "$SPORT" post /tokenize "{\"content\": \"$text\", \"with_pieces\": true}")
python3 - "${out#* }" "$ids" "$text" <<'PY' || fail "with_pieces: $out"
import json, sys
t = json.loads(sys.argv[1])["tokens"]
assert [e["id"] for e in t] == [int(i) for i in sys.argv[2].split(",")], t
assert "".join(e["piece"] for e in t) == sys.argv[3], t
assert t[2]["piece"] == "<|im_end|>", t
PY
expect_status 200 "^200 {\"content\":\"Hello world<|im_end|> é\"}\$" \
    "$($CLIENT "$SPORT" post /detokenize "{\"tokens\": [$ids]}")"
expect_status 200 '^200 {"content":""}$' "$($CLIENT "$SPORT" post /detokenize '{"tokens": []}')"
# a piece that is not UTF-8 by itself ("ꙮ" is two pieces of this
# vocabulary, bytes EA 99 and AE): its bytes as an array; a lone byte's
# text is U+FFFD
out=$($CLIENT "$SPORT" post /tokenize '{"content": "ꙮ🦙", "with_pieces": true}')
python3 - "${out#* }" <<'PY' || fail "with_pieces of ꙮ🦙: $out"
import json, sys
t = json.loads(sys.argv[1])["tokens"]
assert [e["piece"] for e in t] == [[0xEA, 0x99], [0xAE], "🦙"], t
PY
out=$($CLIENT "$SPORT" post /detokenize '{"tokens": [126]}')
[ "$out" = '200 {"content":"\ufffd"}' ] || [ "$out" = '200 {"content":"�"}' ] || fail "detokenize a lone byte: $out"
expect_status 400 '"tokens\\"\[1\] (151936) is outside the vocabulary of 151936 tokens' \
    "$($CLIENT "$SPORT" post /detokenize '{"tokens": [1, 151936]}')"
expect_status 400 '"tokens\\"\[0\] must be an integer from 0 to 2147483647' \
    "$($CLIENT "$SPORT" post /detokenize '{"tokens": [-1]}')"
expect_status 400 '"content\\" is missing' "$($CLIENT "$SPORT" post /tokenize '{}')"
expect_status 400 '"with_pieces\\" must be true or false' \
    "$($CLIENT "$SPORT" post /tokenize '{"content": "a", "with_pieces": 1}')"
expect_status 405 'takes POST' "$($CLIENT "$SPORT" get /tokenize)"
# the text of a /detokenize is at most 4 MiB: token 56940 is 128 spaces,
# 32768 of them are 4 MiB exactly, one more is refused (a vocabulary with
# long pieces made a request of 0.8 MB ask for gigabytes)
for n in 32768 32769; do
    python3 -c 'import sys; print("{\"tokens\": [" + ",".join(["56940"] * int(sys.argv[1])) + "]}")' \
        "$n" >"$TMP/detok.json"
    out=$($CLIENT "$SPORT" raw /detokenize "$TMP/detok.json")
    if [ "$n" = 32768 ]; then
        [ "${out%% *}" = 200 ] &&
            [ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["content"]))' <<<"${out#* }")" = 4194304 ] ||
            fail "detokenize 4 MiB: ${out:0:200}"
    else
        expect_status 400 'the text of these ids is over 4194304 bytes' "$out"
    fi
done
echo "ok: /tokenize and /detokenize"

# a client that goes away mid-stream: its sequence ends, the server goes on
out=$($CLIENT "$SPORT" drop /v1/completions '{"prompt": "x", "max_tokens": 400, "stream": true}' 2)
[ "$out" = dropped ] || fail "drop: $out"
for _ in $(seq 200); do
    grep -q "its client went away" "$TMP/serve.local.log" && break
    sleep 0.05
done
grep -q "(completion, streamed): .* generated [0-9]* (cut: its client went away)" \
    "$TMP/serve.local.log" || fail "no line for the client that went away: $(cat "$TMP/serve.local.log")"
# ... and one that closes its connection while it waits for a whole reply
out=$($CLIENT "$SPORT" hangup /v1/completions '{"prompt": "x", "max_tokens": 500, "temperature": 1}')
[ "$out" = closed ] || fail "hangup: $out"
for _ in $(seq 200); do
    grep -q "(completion): .* (cut: its client went away)" "$TMP/serve.local.log" && break
    sleep 0.05
done
grep -q "(completion): .* (cut: its client went away)" "$TMP/serve.local.log" ||
    fail "no line for the client that hung up: $(cat "$TMP/serve.local.log")"
check_many local2
echo "ok: a client gone (mid-stream, or waiting) ends its sequence; the others are unchanged"
stop_serve local
echo "ok: SIGTERM: exit 0 with a summary"

# over 2 batond: direct path, hub path, two pipeline groups
start_server s1
start_server s2
for arm in "--p2p on" "--p2p off" "--p2p on --groups 2"; do
    # shellcheck disable=SC2086
    serve split --servers "127.0.0.1:$PORT_s1,127.0.0.1:$PORT_s2" --parallel 4 $arm
    check_many "split ${arm// /_}"
    stop_serve split
    echo "ok: 10 requests over 4 slots on 2 batond ($arm): each is baton run's text"
done

# --keepalive: while idle, a no-op request to every server keeps its
# connection inside the server's idle timeout (3 s here); without it (60 s)
# the server closes it, and the next request fails: 503, exit 1
printf 'idle_timeout = 3s\n' >"$TMP/idle.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/idle.policy" start_server idle
serve ka --servers "127.0.0.1:$PORT_idle" --parallel 1 --keepalive 1
sleep 4.5
expect_status 200 '"completion_tokens":2' \
    "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 2}')"
stop_serve ka
serve noka --servers "127.0.0.1:$PORT_idle" --parallel 1 --keepalive 60
sleep 4.5
expect_status 503 'a stage failed' \
    "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 2}')"
rc=0
wait "$SPID" || rc=$?
[ "$rc" -eq 1 ] || fail "a stage lost: exit $rc, want 1: $(cat "$TMP/serve.noka.log")"
grep -q "stage 1 (127.0.0.1:$PORT_idle)" "$TMP/serve.noka.log" ||
    fail "the stage is not named: $(cat "$TMP/serve.noka.log")"
# the failed request's line, then the summary (also when a stage is lost)
grep -A1 "^serve: request 1 (completion): .*failed: the server stopped: a stage failed" \
    "$TMP/serve.noka.log" | grep -q "^summary: served 0 requests" ||
    fail "no request line then summary: $(cat "$TMP/serve.noka.log")"
echo "ok: --keepalive keeps an idle server's connections; a stage lost fails the request, exit 1"

# a key: every request but GET /health must carry it
printf 'sesame\n' >"$TMP/api.key"
serve key --api-key-file "$TMP/api.key" --parallel 1
expect_status 401 'Bearer' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a"}')"
expect_status 401 'Bearer' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a"}' sesam)"
expect_status 401 'Bearer' "$($CLIENT "$SPORT" get /v1/models sesamee)"
expect_status 200 '"status":"ok"' "$($CLIENT "$SPORT" get /health)"
expect_status 401 'Bearer' "$($CLIENT "$SPORT" get /v1/embeddings)" # not 404: no key
expect_status 200 '"id":"qwen2.gguf"' "$(SERVE_SCHEME=bearer $CLIENT "$SPORT" get /v1/models sesame)"
expect_status 200 '"completion_tokens":2' \
    "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 2}' sesame)"
grep -q "a key needed" "$TMP/serve.key.log" || fail "no key in the listening line"
stop_serve key
echo "ok: --api-key-file: 401 without the key, /health open"

# a client that half-closes its side after its request (shutdown(SHUT_WR))
# is taken for gone: its sequence is cut, and it must not get the cut text
# as a 200 reply ("length" after a few tokens): the connection closes. Then
# a streamed request that waits in the queue (no text yet when its reply
# begins) and whose client goes away: the server goes on, and stops clean
serve halfclose --parallel 1 --ctx 16384 --ignore-eos
out=$(python3 - "$SPORT" <<'PY'
import json, socket, sys
b = json.dumps({"prompt": "a", "max_tokens": 16000}).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=120)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
          b"Connection: close\r\n\r\n" % len(b) + b)
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    x = s.recv(65536)
    if not x:
        break
    out += x
print(out.decode("utf-8", "replace").replace("\r\n", " "))
PY
)
if grep -q '^HTTP/1.1 200' <<<"$out"; then
    grep -q '"completion_tokens":16000' <<<"$out" || fail "half-closed client got the cut text: ${out:0:300}"
fi
$CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 16000}' >/dev/null &
c1=$!
for _ in $(seq 200); do
    grep -q '"running":1' <<<"$($CLIENT "$SPORT" get /health)" && break
    sleep 0.05
done
python3 - "$SPORT" <<'PY' || fail "streamed request in the queue"
import json, socket, sys, time
b = json.dumps({"prompt": "b", "max_tokens": 4, "stream": True}).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
          % len(b) + b)
time.sleep(0.5)
s.close()
PY
expect_status 200 '"queued":1' "$($CLIENT "$SPORT" get /health)"
stop_serve halfclose
wait "$c1" || true
echo "ok: a half-closed client gets no cut reply; a queued stream's client gone"

# a full queue: 503; then SIGTERM with a request running and one queued:
# both get 503, the server exits 0
serve queue --parallel 1 --queue 1 --ctx 16384 --ignore-eos
$CLIENT "$SPORT" post /v1/completions '{"prompt": "a", "max_tokens": 16000}' >"$TMP/q1" &
c1=$!
# until_health PATTERN: waits up to 10 s for GET /health to match
until_health() {
    for _ in $(seq 200); do
        grep -q "$1" <<<"$($CLIENT "$SPORT" get /health)" && return 0
        sleep 0.05
    done
    fail "/health never matched $1: $($CLIENT "$SPORT" get /health)"
}
until_health '"running":1,"queued":0'
$CLIENT "$SPORT" post /v1/completions '{"prompt": "b", "max_tokens": 16000}' >"$TMP/q2" &
c2=$!
until_health '"running":1,"queued":1'
expect_status 503 'busy: 1 request waits' "$($CLIENT "$SPORT" post /v1/completions '{"prompt": "c"}')"
stop_serve queue
wait "$c1" "$c2"
expect_status 503 'the server.*stop' "$(cat "$TMP/q1")"
expect_status 503 'the server.*stop' "$(cat "$TMP/q2")"
grep -q "^serve: SIGTERM: stopping" "$TMP/serve.queue.log" || fail "no SIGTERM line"
# the running request's line comes before the summary
grep -A1 "^serve: request 1 (completion): .*failed: the server stopped (SIGINT or SIGTERM)" \
    "$TMP/serve.queue.log" | grep -q "^summary: served 0 requests" ||
    fail "no running request's line then summary: $(cat "$TMP/serve.queue.log")"
echo "ok: 503 when the queue is full; SIGTERM fails the requests in flight and exits 0"

# usage errors (2), before the model loads
st() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$BATON" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "baton $*: exit $rc, want $want ($(cat "$TMP/err"))"
    grep -q -- "$pat" "$TMP/err" || fail "baton $*: no '$pat' in: $(cat "$TMP/err")"
}
st 2 "--model FILE is required" serve
st 2 "--prompt is an option of baton run, not of baton serve" serve -m "$M" -p hi
st 2 "--listen is baton serve's" run -m "$M" -p hi --listen 127.0.0.1:1
st 2 "is not HOST:PORT" serve -m "$M" --listen nowhere
# --host / --port: llama-server's names (a bare --port abbreviated --port-file)
st 2 "give --listen HOST:PORT or --host / --port, not both" serve -m "$M" --listen 127.0.0.1:1 --port 2
st 2 "--host 127.0.0.1:5: not a host name or an IPv6 address (the port goes to --port)" \
    serve -m "$M" --host 127.0.0.1:5
st 2 "--host: empty" serve -m "$M" --host ""
st 2 "--port: '65536' is too large" serve -m "$M" --port 65536
st 2 "--port is baton serve's" run -m "$M" -p hi --port 1
st 2 "^baton serve: --host/--port nowhere.invalid:8080: " serve -m "$M" --host nowhere.invalid
st 2 "-n" serve -m "$M" -n 1
st 1 "--api-key-file $TMP/none: No such file" serve -m "$M" --api-key-file "$TMP/none"
: >"$TMP/empty.key"
st 1 "--api-key-file $TMP/empty.key: the first line (the key) is empty" \
    serve -m "$M" --api-key-file "$TMP/empty.key"
if grep -q "^upload:" "$TMP/err"; then
    fail "the key file was checked after the upload: $(cat "$TMP/err")"
fi
serve busy --parallel 1
st 1 "cannot listen there" serve -m "$M" --listen "127.0.0.1:$SPORT"
stop_serve busy
echo "ok: usage errors"
