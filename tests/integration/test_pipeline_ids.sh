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

# the decode ring: the last stage hands each token to stage 1 (its
# allow-list names stage 1); on and off, 2 and 3 stages, slots 1 and 2
start_ring ra rb rc
start_ring qa qb
RA=127.0.0.1:$PORT_ra
RB=127.0.0.1:$PORT_rb
RC=127.0.0.1:$PORT_rc
nr=0
for servers in "2|127.0.0.1:$PORT_qa,127.0.0.1:$PORT_qb" "3|$RA,$RB,$RC"; do
    for ring in on off; do
        for slots in 1 2; do
            name="ring_s${servers%%|*}_${ring}_${slots}"
            run_arm "$name" "$PROMPT" --servers "${servers#*|}" --ubatch 7 --ring "$ring" --slots "$slots"
            [ "$(field "$TMP/$name.json" 'j["generated"]')" = "$want" ] || fail "$name: ids"
            used=$(grep -c "plan: decode ring: stage ${servers%%|*} -> 1" "$TMP/$name.err" || true)
            [ "$used" = "$([ "$ring" = on ] && echo 1 || echo 0)" ] || fail "$name: ring plan line: $(cat "$TMP/$name.err")"
            # every direct link (the ring's too) opens before the first step
            links="1 -> 2"
            [ "${servers%%|*}" = 3 ] && links="$links, 2 -> 3"
            [ "$ring" = on ] && links="$links, ${servers%%|*} -> 1 (decode ring)"
            grep -qE "^plan: peer links open before the first step: $(printf '%s' "$links" |
                sed 's/[()]/\\&/g') \([0-9.]+ ms\)\$" "$TMP/$name.err" ||
                fail "$name: links opened: $(grep 'links open' "$TMP/$name.err")"
            if [ "$ring" = off ]; then
                grep -qx "plan: decode ring off: tokens through the coordinator (--ring off)" "$TMP/$name.err" &&
                    [ "$(field "$TMP/$name.stats" 'not j["ring"] and j["ring_tokens"] == 0')" = True ] ||
                    fail "$name: --ring off: $(cat "$TMP/$name.err" "$TMP/$name.stats")"
            fi
            [ "$(field "$TMP/$name.stats" 'j["per_step"]["redone_steps"]')" = 0 ] || fail "$name: steps redone"
            nr=$((nr + 1))
        done
    done
done
# the ring's hand-offs landed: the last stage's direct copies count one per
# decode step but the last (whose token nothing reads)
[ "$(field "$TMP/ring_s3_on_2.stats" 'j["ring"] and j["ring_tokens"] == 22 and j["decode_steps"] == 23 and round(j["per_step"]["stages"][2]["copies_done"] * 23) == 22')" = True ] ||
    fail "ring: stage 3's copies: $(cat "$TMP/ring_s3_on_2.stats")"
# not allow-listed (start_chain: the last stage names no one): the first
# hand-off says what to change, and the tokens go through the coordinator
grep -q "plan: decode ring: stage 3 -> 1" "$TMP/s3_u7_on_on.err" &&
    grep -q "stage 3 -> 1 (decode ring): stage 3 (127.0.0.1:$PORT_c) does not allow-list stage 1 (batond --peer 127.0.0.1:$PORT_a would let it); tokens go through the coordinator" "$TMP/s3_u7_on_on.err" ||
    fail "ring not allow-listed: $(cat "$TMP/s3_u7_on_on.err")"
# ... and the statistics say it was not used
[ "$(field "$TMP/s3_u7_on_on.stats" 'not j["ring"] and j["ring_tokens"] == 0')" = True ] ||
    fail "ring not allow-listed: stats say it was used: $(cat "$TMP/s3_u7_on_on.stats")"
grep -qx "plan: decode ring off: tokens through the coordinator (--pipeline off)" "$TMP/s3_u7_off_on.err" ||
    fail "--pipeline off: no ring plan line: $(cat "$TMP/s3_u7_off_on.err")"
grep -qx "plan: decode ring off: tokens through the coordinator (--p2p off)" "$TMP/s3_u7_on_off.err" ||
    fail "--p2p off: no ring plan line: $(cat "$TMP/s3_u7_on_off.err")"
# sampled on the last stage (--temp): the ring hands the sampled token on,
# and the ids are the in-process run's with the same seed
run_arm slocal "$PROMPT" --servers local --temp 1.5 --top-k 40 --top-p 0.95 --seed 11
run_arm sring "$PROMPT" --servers "$RA,$RB,$RC" --ubatch 7 --temp 1.5 --top-k 40 --top-p 0.95 --seed 11
[ "$(field "$TMP/sring.json" 'j["generated"]')" = "$(field "$TMP/slocal.json" 'j["generated"]')" ] ||
    fail "sampled ring: ids differ from in-process"
[ "$(field "$TMP/slocal.json" 'j["generated"]')" != "$want" ] || fail "sampled: the greedy ids"
[ "$(field "$TMP/sring.stats" 'j["ring"] and j["ring_tokens"] == 22 and j["per_step"]["logits_bytes"] == 0')" = True ] ||
    fail "sampled ring: $(cat "$TMP/sring.stats")"
echo "ok: $nr decode-ring arms (2, 3 stages x ring on/off x slots 1, 2) give the in-process ids; not allow-listed, it says so and goes through the coordinator"

# --kv-type f16 (binary16 KV cache): the same logits, bit for bit, at 1 and
# 2 threads, ubatch 64 and 1, and over 3 keyed batond (direct path); the
# same ids through the decode ring; other logits than the f32 cache's
run_arm f16a "$PROMPT" --servers local --kv-type f16 --threads 1 --ubatch 64 --logits-out "$TMP/f16a.bin"
run_arm f16b "$PROMPT" --servers local --kv-type f16 --threads 2 --ubatch 1 --logits-out "$TMP/f16b.bin"
run_arm f16c "$PROMPT" --servers "$A,$B,$C" --kv-type f16 --ubatch 7 --logits-out "$TMP/f16c.bin"
run_arm f16r "$PROMPT" --servers "$RA,$RB,$RC" --kv-type f16 --ubatch 7
run_arm f32a "$PROMPT" --servers local --threads 1 --ubatch 64 --logits-out "$TMP/f32a.bin"
[ -s "$TMP/f16a.bin" ] || fail "f16: no logits"
cmp -s "$TMP/f16a.bin" "$TMP/f16b.bin" || fail "f16: 2 threads, ubatch 1: other logits"
cmp -s "$TMP/f16a.bin" "$TMP/f16c.bin" || fail "f16: 3 batond: other logits"
! cmp -s "$TMP/f16a.bin" "$TMP/f32a.bin" || fail "f16: the f32 cache's logits (is the cache f16?)"
[ "$(field "$TMP/f16r.json" 'j["generated"]')" = "$(field "$TMP/f16a.json" 'j["generated"]')" ] ||
    fail "f16 ring: ids differ from in-process"
[ "$(field "$TMP/f16r.stats" 'j["ring"] and j["ring_tokens"] == 22')" = True ] || fail "f16 ring: not used"
rc=0
"$BATON" run --model "$MODEL" --prompt x --kv-type q8_0 >/dev/null 2>"$TMP/kv.err" || rc=$?
[ "$rc" = 2 ] && grep -qx "baton run: --kv-type: 'q8_0' is not f32 or f16" "$TMP/kv.err" ||
    fail "--kv-type q8_0: exit $rc, $(cat "$TMP/kv.err")"
echo "ok: --kv-type f16 gives the same logits at 1 and 2 threads, ubatch 64 and 1, over 3 batond, and the same ids through the ring"

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
