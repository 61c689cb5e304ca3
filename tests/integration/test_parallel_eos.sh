#!/bin/bash
# baton run --prompt-file: a sequence that ends at EOS before -n ends its
# decode steps (a break-it review: one prompt whose sampled sequence ended
# at its 15th token, at -n 1000, ran 999 decode steps of placeholders, and
# the next prompt waited for them). stories260K at --temp 50 --seed 32
# samples EOS (id 2) as the 15th token of the prompt below; the run alone
# (--prompt) says so first, so the test cannot pass without an early EOS.
# With one sequence at a time, a run's decode steps are the generated
# tokens less one per prompt (each prompt's first comes from its prefill).
source "$(dirname "$0")/lib.sh"
need_model

P="Once upon a time there was a little girl named Lily who liked to play with her big red ball in"
SAMPLE=(--temp 50 --seed 32 --ctx 1100)

"$BATON" run --model "$MODEL" --prompt "$P" -n 1000 --quiet "${SAMPLE[@]}" \
    --ids-file "$TMP/alone.json" 2>"$TMP/alone.err" || fail "alone: $(cat "$TMP/alone.err")"
n_alone=$(field "$TMP/alone.json" 'len(j["generated"])')
last=$(field "$TMP/alone.json" 'j["generated"][-1]')
[ "$last" = 2 ] && [ "$n_alone" -lt 1000 ] ||
    fail "the prompt alone did not end at EOS: $n_alone tokens, the last $last"

# steps NAME: the decode steps of the summary line in $TMP/NAME.err
steps() {
    sed -n 's/^summary: .*(all sequences, \([0-9]*\) steps\{0,1\}).*/\1/p' "$TMP/$1.err"
}

printf '%s\n' "$P" >"$TMP/one.txt"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/one.txt" -n 1000 --quiet "${SAMPLE[@]}" \
    --ids-file "$TMP/one.json" 2>"$TMP/one.err" || fail "one: $(cat "$TMP/one.err")"
[ "$(field "$TMP/one.json" 'j["sequences"][0]["generated"]')" = \
    "$(field "$TMP/alone.json" 'j["generated"]')" ] || fail "one: not the ids of the prompt alone"
[ "$(steps one)" = "$((n_alone - 1))" ] ||
    fail "one: $(steps one) decode steps for $n_alone tokens: $(grep summary "$TMP/one.err")"
echo "ok: a sequence that ends at EOS ends its decode steps ($((n_alone - 1)) at -n 1000)"

# the next prompt is admitted once the first ends, not after -n steps: in
# process and through a server (its hub path), one at a time
printf '%s\nOnce upon a time\nThe cat\n' "$P" >"$TMP/three.txt"
make_keys
BATOND_EXTRA="--key $K" start_server k
for arm in "local|--servers local" "split|--servers local --split 1,1" \
    "server|--servers 127.0.0.1:$PORT_k --key $K"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$MODEL" --prompt-file "$TMP/three.txt" -n 200 --quiet "${SAMPLE[@]}" \
        --ids-file "$TMP/$name.json" ${arm#*|} 2>"$TMP/$name.err" ||
        fail "$name: $(cat "$TMP/$name.err")"
    [ "$(field "$TMP/$name.json" 'j["sequences"][0]["generated"]')" = \
        "$(field "$TMP/alone.json" 'j["generated"]')" ] || fail "$name: prompt 1 differs alone"
    total=$(field "$TMP/$name.json" 'sum(len(s["generated"]) for s in j["sequences"])')
    [ "$(steps "$name")" = "$((total - 3))" ] ||
        fail "$name: $(steps "$name") decode steps for $total tokens of 3 prompts"
    echo "ok: $name: 3 prompts one at a time, $total tokens in $((total - 3)) decode steps"
done
echo PASS
