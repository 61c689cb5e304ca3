#!/bin/bash
# Gemma 3 through baton run (its logits against llama.cpp's are
# test_reference_logits.sh's gemma3 fixtures): on a gen-model gemma3 file with
# a real vocabulary and a sliding window of 4 positions on layers 0 and 2
# (--swa-period 2), prompts longer than the window give, run several at a
# time (--prompt-file --parallel 2 over 4 prompts: later sequences take the
# KV-cache cells of ended ones, whose window starts at their own first cell),
# split 1,1,1 in-process and with --ubatch 3, the ids each gives alone; and
# the window matters: the same weights with a window past the context give
# other ids for the longest prompt.
source "$(dirname "$0")/lib.sh"

VOCAB=$MODEL_DIR/vocab/ggml-vocab-llama-spm.gguf
if [ ! -f "$VOCAB" ]; then
    [ "${CI:-}" = "true" ] && fail "$VOCAB missing under CI"
    echo "SKIP: $VOCAB not found" >&2
    exit 77
fi
N=10
M=$TMP/g3.gguf
shape=(--arch gemma3 --layers 3 --dim 64 --ff 128 --heads 2 --kv-heads 1 --head-dim 32
    --swa-period 2 --rope-scale 4 --seed 11 --type f32 --vocab-from "$VOCAB")
"$BATON" gen-model "${shape[@]}" --swa 4 -o "$M" 2>"$TMP/gen.err" ||
    fail "gen-model: $(cat "$TMP/gen.err")"
"$BATON" gen-model "${shape[@]}" --swa 64 -o "$TMP/wide.gguf" 2>"$TMP/gen.err" ||
    fail "gen-model --swa 64: $(cat "$TMP/gen.err")"

cat >"$TMP/prompts.txt" <<'PROMPTS'
Once upon a time, there was a little girl named Lily who loved the sea
The cat sat on the warm mat by the door and watched the birds
A
Tom and his dog went to the park to play with a big red ball
PROMPTS

# each prompt alone, in-process: ids in one.I.json
i=0
while IFS= read -r line; do
    i=$((i + 1))
    "$BATON" run --model "$M" --prompt "$line" -n $N --ignore-eos --quiet \
        --ids-file "$TMP/one.$i.json" 2>"$TMP/one.err" >/dev/null ||
        fail "alone: prompt $i: $(cat "$TMP/one.err")"
done <"$TMP/prompts.txt"
[ "$i" = 4 ] || fail "4 prompts, counted $i"

for arm in "p2|--parallel 2" "p2s3|--parallel 2 --servers local --split 1,1,1" \
    "p2u3|--parallel 2 --ubatch 3" "p1s3u3|--servers local --split 1,1,1 --ubatch 3"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$M" --prompt-file "$TMP/prompts.txt" -n $N --ignore-eos --quiet \
        --ids-file "$TMP/$name.json" ${arm#*|} >/dev/null 2>"$TMP/$name.err" ||
        fail "$name: $(cat "$TMP/$name.err")"
    python3 - "$TMP/$name.json" "$TMP/one" <<'PY' || fail "$name: a sequence differs from its run alone"
import json, sys
seqs = json.load(open(sys.argv[1]))["sequences"]
assert len(seqs) == 4, len(seqs)
for i, s in enumerate(seqs):
    one = json.load(open("%s.%d.json" % (sys.argv[2], i + 1)))
    assert s["prompt"] == one["prompt"], (i + 1, "prompt")
    assert s["generated"] == one["generated"], (i + 1, s["generated"], one["generated"])
    assert len(s["generated"]) == 10
PY
    echo "ok: $name: the 4 sequences' ids as alone"
done

# the window is in force: a window past the context changes the ids
"$BATON" run --model "$TMP/wide.gguf" --prompt "$(head -n 1 "$TMP/prompts.txt")" -n $N \
    --ignore-eos --quiet --ids-file "$TMP/wide.json" >/dev/null 2>"$TMP/wide.err" ||
    fail "wide: $(cat "$TMP/wide.err")"
python3 - "$TMP/one.1.json" "$TMP/wide.json" <<'PY' || fail "the sliding window changed nothing"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["prompt"] == b["prompt"] and len(a["prompt"]) > 8, "prompt"
assert a["generated"] != b["generated"], a["generated"]
PY
echo "ok: the sliding window of 4 changes the ids against one of 64"
