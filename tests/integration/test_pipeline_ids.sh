#!/bin/bash
# The pipelined step engine gives the same greedy token ids whatever the
# schedule (docs/PROTOCOL.md "Asynchronous hand-off"): stories260K, a
# prompt of about 60 tokens (several ubatches), 24 tokens generated, run
# in-process (one stage, and 3 in-process stages on the hub path) and on
# 1, 2 and 3 keyed batond with the direct path (p2p on) and the hub path
# (p2p off), --pipeline on and off, --ubatch 1, 7, 64 and 512, and --slots
# 1 and 4: every arm gives the ids of the in-process run. The first prompt
# of test_model_reference.sh keeps its reference ids through a 3-stage
# pipelined direct run with ubatch 1 as well. The direct arms' statistics
# say the hand-offs went direct (no hidden state through the coordinator
# while decoding) and nothing was redone.
source "$(dirname "$0")/lib.sh"
need_model

REF_IDS='[432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432]'
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree and"

make_keys
start_chain a b c
A=127.0.0.1:$PORT_a
B=127.0.0.1:$PORT_b
C=127.0.0.1:$PORT_c

# run_arm NAME PROMPT ARGS...
run_arm() {
    local name=$1 prompt=$2
    shift 2
    if ! "$BATON" run --model "$MODEL" --prompt "$prompt" -n 24 --key "$K" \
        --ids-file "$TMP/$name.json" --stats-json "$TMP/$name.stats" --quiet "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        cat "$TMP/$name.err" >&2
        fail "arm $name exited non-zero"
    fi
}

run_arm local "$PROMPT" --servers local
want=$(field "$TMP/local.json" 'j["generated"]')
n_prompt=$(field "$TMP/local.json" 'len(j["prompt"])')
[ "$n_prompt" -gt 40 ] || fail "the prompt has only $n_prompt tokens"
run_arm local3 "$PROMPT" --servers local --split 1,1,1 --ubatch 7
[ "$(field "$TMP/local3.json" 'j["generated"]')" = "$want" ] || fail "3 in-process stages: ids"

n=0
for servers in "1|$A" "2|$B,$C" "3|$A,$B,$C"; do
    stages=${servers%%|*}
    for u in 1 7 64 512; do
        for pl in on off; do
            for p2p in on off; do
                [ "$stages" = 1 ] && [ "$p2p" = off ] && continue
                name="s${stages}_u${u}_${pl}_${p2p}"
                run_arm "$name" "$PROMPT" --servers "${servers#*|}" --ubatch "$u" --pipeline "$pl" --p2p "$p2p"
                got=$(field "$TMP/$name.json" 'j["generated"]')
                [ "$got" = "$want" ] || fail "$name: $got, want $want"
                if [ "$stages" != 1 ] && [ "$p2p" = on ]; then
                    [ "$(field "$TMP/$name.stats" 'j["per_step"]["hidden_state_bytes"] == 0 and j["per_step"]["redone_steps"] == 0')" = True ] ||
                        fail "$name: not direct: $(cat "$TMP/$name.stats")"
                fi
                n=$((n + 1))
            done
        done
    done
done
echo "ok: $n arms (1, 2, 3 stages x ubatch 1, 7, 64, 512 x pipeline on/off x direct/hub) give the in-process ids"

for slots in 1 4; do
    run_arm "slots$slots" "$PROMPT" --servers "$A,$B,$C" --ubatch 7 --slots "$slots"
    [ "$(field "$TMP/slots$slots.json" 'j["generated"]')" = "$want" ] || fail "--slots $slots: ids"
done
echo "ok: --slots 1 and 4 give the same ids"

run_arm ref "Once upon a time" --servers "$A,$B,$C" --ubatch 1
want24=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[:24])' "$REF_IDS")
[ "$(field "$TMP/ref.json" 'j["generated"]')" = "$want24" ] ||
    fail "reference ids: $(field "$TMP/ref.json" 'j["generated"]')"
echo "ok: the reference ids through 3 pipelined stages, ubatch 1"

# a bad --pipeline / --slots is a usage error
rc=0
"$BATON" run --model "$MODEL" --prompt x --pipeline sometimes >/dev/null 2>"$TMP/usage.err" || rc=$?
[ $rc = 2 ] && grep -q -- "--pipeline: 'sometimes' is not on or off" "$TMP/usage.err" || fail "--pipeline sometimes: exit $rc"
rc=0
"$BATON" run --model "$MODEL" --prompt x --slots 5 >/dev/null 2>"$TMP/usage.err" || rc=$?
[ $rc = 2 ] && grep -q -- "--slots: '5' is too large (at most 4)" "$TMP/usage.err" || fail "--slots 5: exit $rc: $(cat "$TMP/usage.err")"
echo "PASS"
