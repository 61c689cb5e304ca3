#!/bin/bash
# Several sequences through the split (baton run --prompt-file F --parallel
# N, stories260K, greedy): every sequence gives the token ids it gives when
# run alone (baton run --prompt, in-process), with 8 sequences at a time
# over 10 prompts (so later prompts are admitted into the KV-cache cells of
# sequences that ended) on 1 stage in-process, 2 and 3 in-process stages,
# 2 and 3 batond stages with the direct path and 3 with the hub path, and
# in pipeline groups (--groups 2, 3, 4: a group's decode steps overlap the
# other groups' on the stages); with
# 32 at a time over 64 prompts every sequence finishes with the ids it gives
# alone (none starves, none comes back empty); the prompts include ones
# longer than the ubatch (full ubatches and a rest in powers of two) and one
# of one token; continuous batching (prompts admitted while others decode
# ride in the decode steps) gives the same ids. Output: "[N] text" lines (N:
# the prompt's number, blank lines skipped), or --output-dir files; and the
# usage errors (exit 2) and unreadable files (exit 1); --parallel x --ctx past
# a server's scratch limit says which limit and what asked for it; baton bench
# --npl prints a row per batch size (N_KV = B x (PP + TG)) and its JSON.
source "$(dirname "$0")/lib.sh"
need_model

N=24
cat >"$TMP/prompts.txt" <<'PROMPTS'
Once upon a time
Tom and his dog went to the park

The little girl
One day, a bird
Lily
Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her mom. One day, she saw a big red ball.
Ben had a toy car
The sun was hot and the cat was sleepy
A
Mom said
PROMPTS
# 64 prompts: the first words of the 10 above, cycled, with a number
python3 - "$TMP/prompts.txt" "$TMP/many.txt" <<'PY'
import sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
with open(sys.argv[2], "w") as f:
    for i in range(64):
        f.write(" ".join(lines[i % len(lines)].split()[:3 + i % 5]) + "\n")
PY

# alone FILE PREFIX [ARGS...]: each non-empty line alone, in-process; ids in
# PREFIX.I.json. With SAMPLED=1, sampled: prompt I with --seed 100 + I - 1
# (the seed --prompt-file --seed 100 gives the I-th sequence)
SAMPLING=(--temp 0.8 --top-k 40 --top-p 0.95)
alone() {
    local i=0 line file=$1 prefix=$2 seed=()
    shift 2
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        i=$((i + 1))
        [ "${SAMPLED:-0}" = 1 ] && seed=("${SAMPLING[@]}" --seed $((100 + i - 1)))
        "$BATON" run --model "$MODEL" --prompt "$line" -n $N --quiet --ids-file "$TMP/$prefix.$i.json" \
            "${seed[@]}" "$@" 2>"$TMP/alone.err" || fail "alone: prompt $i: $(cat "$TMP/alone.err")"
    done <"$file"
    echo "$i"
}
# same NAME PREFIX COUNT: the run's sequences are those alone
same() {
    python3 - "$TMP/$1.json" "$TMP/$2" "$3" <<'PY' || fail "$1: a sequence differs from its run alone"
import json, sys
p = json.load(open(sys.argv[1]))
seqs = p["sequences"]
assert len(seqs) == int(sys.argv[3]), (len(seqs), sys.argv[3])
for i, s in enumerate(seqs):
    one = json.load(open("%s.%d.json" % (sys.argv[2], i + 1)))
    assert s["index"] == i + 1
    assert s["prompt"] == one["prompt"], (i + 1, "prompt")
    assert s["generated"] == one["generated"], (i + 1, s["generated"], one["generated"])
    assert len(s["generated"]) > 0
PY
}
# par NAME FILE ARGS...: a parallel run (quiet) with its ids
par() {
    local name=$1 file=$2
    shift 2
    "$BATON" run --model "$MODEL" --prompt-file "$file" -n $N --quiet --ids-file "$TMP/$name.json" \
        "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || fail "$name: exit $?: $(cat "$TMP/$name.err")"
}

n10=$(alone "$TMP/prompts.txt" one)
[ "$n10" = 10 ] || fail "10 prompts, counted $n10"

make_keys
start_chain a b c
A=127.0.0.1:$PORT_a
B=127.0.0.1:$PORT_b
C=127.0.0.1:$PORT_c
for arm in "local1|--servers local" "local2|--servers local --split 1,1" \
    "local3|--servers local --split 1,1,1" "s2on|--servers $B,$C --key $K" \
    "s3on|--servers $A,$B,$C --key $K" "s3off|--servers $A,$B,$C --key $K --p2p off" \
    "s3on_u4|--servers $A,$B,$C --key $K --ubatch 4" \
    "local2_g3|--servers local --split 1,1 --groups 3" "s2on_g2|--servers $B,$C --key $K --groups 2" \
    "s3on_g2|--servers $A,$B,$C --key $K --groups 2" "s3off_g4|--servers $A,$B,$C --key $K --p2p off --groups 4"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    par "$name" "$TMP/prompts.txt" --parallel 8 ${arm#*|}
    same "$name" one 10
    grep -q "^plan: 10 prompts, 8 sequences at a time" "$TMP/$name.err" || fail "$name: plan line"
    # the last 2 prompts decode after the first 8 ended: their steps carry
    # only their rows (shrunk steps), and their ids are still those alone
    grep -Eq "^summary: [1-9][0-9]* of [0-9]+ decode steps carried fewer rows than the group's [0-9]+ slots" \
        "$TMP/$name.err" || fail "$name: no shrunk step: $(cat "$TMP/$name.err")"
    echo "ok: $name: 10 prompts, 8 at a time: every sequence gives its ids alone"
done
# shrunk steps' shapes are optional: a server whose graph limit holds only
# the 7 shapes the run needs refuses them, and the run goes on with full
# steps where it must, the same ids; one shape fewer is the clear error
BATOND_EXTRA="--max-graphs-per-session 7" start_server g7
BATOND_EXTRA="--max-graphs-per-session 6" start_server g6
par lim7 "$TMP/prompts.txt" --parallel 8 --servers "127.0.0.1:$PORT_g7"
same lim7 one 10
# the summary says the steps kept every row, and why (it said nothing)
grep -Eq "^summary: [1-9][0-9]* of [0-9]+ decode steps carried every slot's row though fewer sequences decoded: the graph limits \(batond --max-graphs-per-session, default 32\), or the session's memory, left no room for the smaller step shapes\$" \
    "$TMP/lim7.err" && ! grep -q "carried fewer rows" "$TMP/lim7.err" ||
    fail "lim7: no line for the steps not shrunk: $(cat "$TMP/lim7.err")"
grep -q "carried every slot's row" "$TMP/local1.err" && fail "local1: steps not shrunk: $(cat "$TMP/local1.err")"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" -n $N --quiet --parallel 8 \
    --servers "127.0.0.1:$PORT_g6" 2>"$TMP/lim6.err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q "the run registers 7 graphs on stage 1 (7 step shapes x 1 input slot); a server keeps at most max_graphs_per_session" \
    "$TMP/lim6.err" || fail "6 graphs: rc $rc: $(cat "$TMP/lim6.err")"
echo "ok: shrunk steps' graphs are optional under a server's graph limit"
[ "$(field "$TMP/s3on.json" 'j["parallel"]')" = 8 ] || fail "parallel in the ids file"
grep -q "^plan: stage 1 -> 2 direct" "$TMP/s3on.err" || fail "s3on: not direct: $(cat "$TMP/s3on.err")"
grep -q "^plan: stage 1 -> 2 hub (--p2p off)" "$TMP/s3off.err" || fail "s3off: not hub"
# the chain's last server does not allow-list the first: the ring is set up,
# its copies are refused, and the tokens go through the coordinator
grep -q "^baton run: stage 3 -> 1 (decode ring): stage 3 (127.0.0.1:$PORT_c) does not allow-list stage 1" \
    "$TMP/s3on.err" || fail "s3on: ring line: $(cat "$TMP/s3on.err")"

# seeded sampling (temperature 0.8, top-k 40, top-p 0.95) on the last stage:
# each sequence gives the ids it gives alone with its seed, whatever the
# split, the path, the batch or the groups (and alone through 3 batond with
# the ring: the same ids as in-process)
ns=$(SAMPLED=1 alone "$TMP/prompts.txt" sone)
[ "$ns" = 10 ] || fail "10 sampled prompts, counted $ns"
ns=$(SAMPLED=1 alone "$TMP/prompts.txt" sone3 --servers "$A,$B,$C" --key "$K")
for i in $(seq 10); do
    cmp -s <(field "$TMP/sone.$i.json" 'j["generated"]') <(field "$TMP/sone3.$i.json" 'j["generated"]') ||
        fail "sampled prompt $i: 3 batond stages differ from in-process"
done
python3 - "$TMP" <<'PY' || fail "sampling changes nothing: the sampled ids equal the greedy ones"
import json, sys
d = sys.argv[1]
assert any(json.load(open("%s/sone.%d.json" % (d, i)))["generated"] !=
           json.load(open("%s/one.%d.json" % (d, i)))["generated"] for i in range(1, 11))
PY
for arm in "slocal1|--servers local" "slocal3_g2|--servers local --split 1,1,1 --groups 2" \
    "ss3on|--servers $A,$B,$C --key $K" "ss3off_g3|--servers $A,$B,$C --key $K --p2p off --groups 3"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    par "$name" "$TMP/prompts.txt" --parallel 8 "${SAMPLING[@]}" --seed 100 ${arm#*|}
    same "$name" sone 10
    echo "ok: $name: sampled, 10 prompts, 8 at a time: every sequence gives its ids alone"
done

# 64 prompts, 32 at a time: all finish, each with its ids alone
n64=$(alone "$TMP/many.txt" many)
[ "$n64" = 64 ] || fail "64 prompts, counted $n64"
par many "$TMP/many.txt" --parallel 32 --servers "$A,$B" --key "$K"
same many many 64
par many_g2 "$TMP/many.txt" --parallel 32 --groups 2 --servers "$A,$B" --key "$K"
same many_g2 many 64
grep -q "^plan: 64 prompts, 32 sequences at a time (512 KV-cache cells each), 2 groups\$" "$TMP/many_g2.err" ||
    fail "many_g2: plan line: $(cat "$TMP/many_g2.err")"
echo "ok: 64 prompts, 32 at a time on 2 batond stages, 1 and 2 groups: all finish with their ids alone"

# a sequence that ends at EOS: on a generated model (gen-model seed 1, whose
# prompt "x y z" ends at EOS after 29 tokens), 3 at a time over 5 prompts:
# the others' ids are unchanged and the prompt admitted into the freed cells
# gives its ids alone; the same in 2 groups over 2 batond stages
"$BATON" gen-model --layers 2 --dim 32 --ff 64 --heads 4 --vocab 300 --type f32 --seed 1 \
    -o "$TMP/eos.gguf" >/dev/null 2>&1 || fail "gen-model"
printf 'a\nx y z\nhello\nb c\nq\n' >"$TMP/eos.txt"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    "$BATON" run --model "$TMP/eos.gguf" --prompt "$line" -n 60 --quiet --ids-file "$TMP/eos1.$i.json" \
        2>/dev/null || fail "eos: alone $i"
done <"$TMP/eos.txt"
[ "$(field "$TMP/eos1.2.json" 'len(j["generated"]) == 29 and j["generated"][-1] == 2')" = True ] ||
    fail "eos: the model no longer ends prompt 2 at EOS: $(cat "$TMP/eos1.2.json")"
for arm in "eos_local|--servers local" "eos_s2g2|--servers $B,$C --key $K --groups 2"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$TMP/eos.gguf" --prompt-file "$TMP/eos.txt" --parallel 3 -n 60 --quiet \
        --ids-file "$TMP/$name.json" ${arm#*|} 2>"$TMP/$name.err" || fail "$name: $(cat "$TMP/$name.err")"
    same "$name" eos1 5
done
echo "ok: a sequence ending at EOS leaves the others' ids unchanged; the next prompt takes its cells"

# continuous batching: sampled on the generated model, many sequences end at
# EOS at different steps (4 of these 16 with seeds 100..115), so prompts are
# admitted while others decode and ride in their decode steps (a chunk of
# --ubatch tokens in front of the group's tokens, the last chunk padded);
# every sequence gives the ids it gives alone with its seed, on 1 and 2
# stages in-process (2 groups), 2 batond direct, 2 batond hub with chunks of
# 2 tokens (all --continuous on), and with --continuous off, the default
# (each admitted prompt prefilled alone)
cat >"$TMP/mix.txt" <<'PROMPTS'
a b
x y z
hello there
b c d e f g h
q
m n o
the cat sat on the mat today
z
k l
up and down and up
i j k l m
w
red green blue
p q r s t u v w
yes
no no
PROMPTS
i=0
while IFS= read -r line; do
    i=$((i + 1))
    "$BATON" run --model "$TMP/eos.gguf" --prompt "$line" -n 40 --quiet "${SAMPLING[@]}" \
        --seed $((100 + i - 1)) --ids-file "$TMP/mix1.$i.json" 2>/dev/null || fail "mix: alone $i"
done <"$TMP/mix.txt"
[ "$(python3 -c "
import json
print(sum(json.load(open('$TMP/mix1.%d.json' % i))['generated'][-1] == 2 for i in range(1, 17)))")" -ge 3 ] ||
    fail "mix: fewer than 3 of the 16 sampled sequences end at EOS: the test no longer mixes"
for arm in "mix_local|--servers local --continuous on" \
    "mix_local2_g2|--servers local --split 1,1 --groups 2 --continuous on" \
    "mix_s2|--servers $B,$C --key $K --continuous on" \
    "mix_s2hub_u2|--servers $B,$C --key $K --p2p off --ubatch 2 --continuous on" \
    "mix_off|--servers local"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$TMP/eos.gguf" --prompt-file "$TMP/mix.txt" --parallel 4 -n 40 --quiet \
        "${SAMPLING[@]}" --seed 100 --ids-file "$TMP/$name.json" ${arm#*|} 2>"$TMP/$name.err" ||
        fail "$name: $(cat "$TMP/$name.err")"
    same "$name" mix1 16
    if [ "$name" = mix_off ]; then
        ! grep -q "continuous batching" "$TMP/$name.err" || fail "$name: mixed with --continuous off"
    else
        grep -Eq "^summary: continuous batching: [0-9]+ prompt tokens? rode in [1-9][0-9]* decode steps?" \
            "$TMP/$name.err" || fail "$name: no mixed step: $(cat "$TMP/$name.err")"
    fi
done
echo "ok: continuous batching: prompts admitted while others decode give their ids alone"

# the decode ring with several sequences: the last stage hands every step's
# token ids straight to stage 1's token slot (its group's next step), the
# coordinator queues the steps ahead; greedy and sampled, 2 and 3 batond
# stages, groups 1 and 2, 8 and 32 at a time, sequences ending at EOS (the
# steps queued past them dropped, the freed cells taken by the next prompt),
# each with the ids it gives alone; --ring off and continuous batching keep
# the coordinator's path
start_ring x y z
start_ring p q
X=127.0.0.1:$PORT_x Y=127.0.0.1:$PORT_y Z=127.0.0.1:$PORT_z P=127.0.0.1:$PORT_p Q=127.0.0.1:$PORT_q
ring_ok() { # ring_ok NAME: the ring carried tokens
    grep -q "^plan: decode ring: stage [23] -> 1 hands each token to" "$TMP/$1.err" ||
        fail "$1: no ring: $(cat "$TMP/$1.err")"
    [ "$(field "$TMP/$1.stats.json" 'j["ring_tokens"] > 0')" = True ] ||
        fail "$1: no token went around the ring: $(cat "$TMP/$1.stats.json")"
}
for arm in "r3|--servers $X,$Y,$Z --key $K" "r2|--servers $P,$Q --key $K" \
    "r3_g2|--servers $X,$Y,$Z --key $K --groups 2" "r2_g2_u4|--servers $P,$Q --key $K --groups 2 --ubatch 4" \
    "r3_off|--servers $X,$Y,$Z --key $K --ring off"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    par "$name" "$TMP/prompts.txt" --parallel 8 --stats-json "$TMP/$name.stats.json" ${arm#*|}
    same "$name" one 10
    if [ "$name" = r3_off ]; then
        grep -q "^plan: decode ring off: tokens through the coordinator (--ring off)" "$TMP/$name.err" ||
            fail "$name: ring line: $(cat "$TMP/$name.err")"
        [ "$(field "$TMP/$name.stats.json" 'j["ring_tokens"]')" = 0 ] || fail "$name: ring tokens"
    else
        ring_ok "$name"
    fi
    echo "ok: $name: 10 prompts, 8 at a time: every sequence gives its ids alone"
done
for arm in "sr3|--servers $X,$Y,$Z --key $K" "sr2_g2|--servers $P,$Q --key $K --groups 2"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    par "$name" "$TMP/prompts.txt" --parallel 8 "${SAMPLING[@]}" --seed 100 \
        --stats-json "$TMP/$name.stats.json" ${arm#*|}
    same "$name" sone 10
    ring_ok "$name"
    echo "ok: $name: sampled around the ring: every sequence gives its ids alone"
done
for arm in "rmany|--servers $X,$Y,$Z --key $K" "rmany_g2|--servers $P,$Q --key $K --groups 2"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    par "$name" "$TMP/many.txt" --parallel 32 --stats-json "$TMP/$name.stats.json" ${arm#*|}
    same "$name" many 64
    ring_ok "$name"
done
echo "ok: 64 prompts, 32 at a time around the ring, 1 and 2 groups: all finish with their ids alone"
for arm in "reos|--servers $P,$Q --key $K" "reos_g2|--servers $P,$Q --key $K --groups 2"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$TMP/eos.gguf" --prompt-file "$TMP/eos.txt" --parallel 3 -n 60 --quiet \
        --ids-file "$TMP/$name.json" --stats-json "$TMP/$name.stats.json" ${arm#*|} \
        2>"$TMP/$name.err" || fail "$name: $(cat "$TMP/$name.err")"
    same "$name" eos1 5
    ring_ok "$name"
done
for arm in "rmix|--servers $P,$Q --key $K" "rmix_g2|--servers $P,$Q --key $K --groups 2" \
    "rmix_cont|--servers $P,$Q --key $K --continuous on"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$BATON" run --model "$TMP/eos.gguf" --prompt-file "$TMP/mix.txt" --parallel 4 -n 40 --quiet \
        "${SAMPLING[@]}" --seed 100 --ids-file "$TMP/$name.json" --stats-json "$TMP/$name.stats.json" \
        ${arm#*|} 2>"$TMP/$name.err" || fail "$name: $(cat "$TMP/$name.err")"
    same "$name" mix1 16
    if [ "$name" = rmix_cont ]; then
        grep -q "^plan: decode ring off: tokens through the coordinator (continuous batching" \
            "$TMP/$name.err" || fail "$name: ring line: $(cat "$TMP/$name.err")"
    else
        ring_ok "$name"
    fi
done
echo "ok: sequences ending at EOS around the ring: the others' ids unchanged, freed cells reused"
# groups past the input slots: the ring would overwrite a token slot still
# to be read, so it is off and says why
par r3_g3 "$TMP/prompts.txt" --parallel 8 --servers "$X,$Y,$Z" --key "$K" --groups 3
same r3_g3 one 10
grep -q "^plan: decode ring off: tokens through the coordinator (--groups 3 needs as many input slots: --slots 3)" \
    "$TMP/r3_g3.err" || fail "r3_g3: ring line: $(cat "$TMP/r3_g3.err")"
par r3_g3s3 "$TMP/prompts.txt" --parallel 8 --servers "$X,$Y,$Z" --key "$K" --groups 3 --slots 3 \
    --stats-json "$TMP/r3_g3s3.stats.json"
same r3_g3s3 one 10
ring_ok r3_g3s3
par r3_g5 "$TMP/prompts.txt" --parallel 10 --servers "$X,$Y,$Z" --key "$K" --groups 5 --slots 4
same r3_g5 one 10
grep -q "^plan: decode ring off: tokens through the coordinator (--groups 5: a group needs an input slot of its own, and there are at most 4 (--slots))" \
    "$TMP/r3_g5.err" || fail "r3_g5: ring line: $(cat "$TMP/r3_g5.err")"
echo "ok: --groups past --slots: the ring is off and says why; with --slots 3 it goes on"
# more step shapes than a coordinator keeps per stage (continuous batching,
# 3 groups, 4 slots): a clear error saying what to change
rc=0
"$BATON" run --model "$TMP/eos.gguf" --prompt-file "$TMP/mix.txt" -n 40 --quiet --parallel 5 \
    --servers "$P,$Q" --key "$K" --groups 3 --slots 4 --continuous on 2>"$TMP/shapes.err" >/dev/null || rc=$?
[ $rc = 1 ] && grep -q "^baton run: stage [12]: the run needs more than the 32 graphs a coordinator keeps per stage (step shapes x 4 input slots: prompt rests, decode steps per group, continuous batching's mixed steps); use fewer --slots or --groups, or --continuous off\$" \
    "$TMP/shapes.err" || fail "too many shapes: rc $rc: $(cat "$TMP/shapes.err")"
# --logits-out turns the ring off and is named as the reason
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 4 --quiet --servers "$P,$Q" --key "$K" \
    --logits-out "$TMP/l.bin" 2>"$TMP/lo.err" >/dev/null || fail "--logits-out: $(cat "$TMP/lo.err")"
grep -q "^plan: decode ring off: tokens through the coordinator (the coordinator reads the logits (--logits-out))" \
    "$TMP/lo.err" || fail "--logits-out ring line: $(cat "$TMP/lo.err")"

# output: prefixed lines, and --output-dir files, the same text
"$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" -n 8 --parallel 3 \
    >"$TMP/text.out" 2>/dev/null || fail "text run"
[ "$(wc -l <"$TMP/text.out")" = 10 ] && [ "$(grep -c '^\[[0-9]*\] ' "$TMP/text.out")" = 10 ] ||
    fail "prefixed lines: $(cat "$TMP/text.out")"
grep -q "^\[1\] Once upon a time" "$TMP/text.out" && grep -q "^\[10\] Mom said" "$TMP/text.out" ||
    fail "prefixed lines: the prompts"
"$BATON" run --model "$MODEL" --prompt "Ben had a toy car" -n 8 >"$TMP/one8.out" 2>/dev/null
grep -qxF "[7] $(cat "$TMP/one8.out")" "$TMP/text.out" || fail "line 7 is not the text alone: $(cat "$TMP/one8.out")"
mkdir "$TMP/outdir"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" -n 8 --parallel 3 \
    --output-dir "$TMP/outdir" >"$TMP/dir.out" 2>/dev/null || fail "--output-dir run"
[ ! -s "$TMP/dir.out" ] && [ "$(ls "$TMP/outdir" | wc -l)" = 10 ] || fail "--output-dir: files"
cmp -s "$TMP/one8.out" "$TMP/outdir/7.txt" || fail "--output-dir: 7.txt"
mkdir "$TMP/outq"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" -n 8 --parallel 3 --quiet \
    --output-dir "$TMP/outq" >"$TMP/dirq.out" 2>/dev/null || fail "--output-dir --quiet run"
[ ! -s "$TMP/dirq.out" ] && cmp -s "$TMP/one8.out" "$TMP/outq/7.txt" || fail "--output-dir with --quiet: 7.txt"
# a symbolic link in the directory is not followed
mkdir "$TMP/outl"
echo keep >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/outl/3.txt"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" -n 4 --parallel 3 --quiet \
    --output-dir "$TMP/outl" >/dev/null 2>"$TMP/outl.err" || rc=$?
[ $rc = 1 ] && grep -q "^baton run: --output-dir $TMP/outl/3.txt: a symbolic link, which is not followed" "$TMP/outl.err" &&
    [ "$(cat "$TMP/victim")" = keep ] || fail "--output-dir through a link: exit $rc: $(cat "$TMP/outl.err")"
# ... found before the model loads, so 1.txt and 2.txt are not written either
# (test_prompt_file.sh checks every file of the directory)
if grep -q "^model:" "$TMP/outl.err" || [ -e "$TMP/outl/1.txt" ]; then
    fail "--output-dir through a link: found after the run began: $(cat "$TMP/outl.err")"
fi
echo "ok: [N] lines and --output-dir files hold each prompt's text"

# usage errors (2) and files that cannot be read (1)
want() { # want RC MESSAGE ARGS...
    local rc=0 want=$1 msg=$2
    shift 2
    "$BATON" run --model "$MODEL" "$@" >/dev/null 2>"$TMP/err" || rc=$?
    [ "$rc" = "$want" ] && grep -qF -- "$msg" "$TMP/err" || fail "$*: exit $rc, want $want ($msg): $(cat "$TMP/err")"
}
want 2 "--parallel: '0' is too small" --prompt-file "$TMP/prompts.txt" --parallel 0
want 2 "--parallel: '257' is too large" --prompt-file "$TMP/prompts.txt" --parallel 257
want 2 "--parallel needs --prompt-file" --prompt x --parallel 2
want 2 "--groups needs --prompt-file" --prompt x --groups 2
want 2 "--continuous needs --prompt-file" --prompt x --continuous off
want 2 "--groups: '9' is too large" --prompt-file "$TMP/prompts.txt" --groups 9
want 1 "--prompt-file $TMP/none.txt: No such file" --prompt-file "$TMP/none.txt"
printf 'a\nb\0c\n' >"$TMP/nul.txt"
want 2 "line 2 holds a NUL byte" --prompt-file "$TMP/nul.txt"
printf '\n\r\n  \t \r\n\r\r\n\n' >"$TMP/empty.txt"
want 2 "no prompts" --prompt-file "$TMP/empty.txt"
want 2 "--report-gap reads one sequence's logits: not with --prompt-file" --prompt-file "$TMP/prompts.txt" --report-gap --ids-file "$TMP/gap.json"
want 2 "prompt 6 (51 tokens) + -n 8 = 59 exceeds --ctx 40" --prompt-file "$TMP/prompts.txt" --ctx 40 -n 8
want 1 "--output-dir $TMP/none: No such file or directory" --prompt-file "$TMP/prompts.txt" --output-dir "$TMP/none"
want 1 "--output-dir $TMP/prompts.txt: not a directory" --prompt-file "$TMP/prompts.txt" --output-dir "$TMP/prompts.txt"
want 2 "give only one of --prompt TEXT and --prompt-file FILE" --prompt x --prompt-file "$TMP/prompts.txt"
# N beyond a server's memory: the KV cache of 8 sequences does not fit a
# session of 4 MiB; said in terms of --ctx and --parallel, nothing run, and
# the server serves the next session (one sequence fits)
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --session-memory-bytes 4M" start_server small
want 1 "--ctx 512 x 8 sequences (--parallel) needs" --prompt-file "$TMP/prompts.txt" --parallel 8 \
    --ctx 512 --servers "127.0.0.1:$PORT_small" --key "$K"
grep -q "the server allows at most 4.0 MiB in one buffer" "$TMP/err" || fail "--parallel 8 on a small server: $(cat "$TMP/err")"
# the hint names the largest --ctx and --parallel that fit (f16 would not,
# beside the prefill's scratch arena)
grep -qxE "baton run: to fit: --ctx [0-9]+ or less, --parallel [1-7] or fewer, fewer layers on stage 1 \(--split, or one more server in --servers\), or a batond with a larger --session-memory-bytes \(or its --client's session_memory_bytes\)" "$TMP/err" ||
    fail "--parallel 8 on a small server, no hint: $(cat "$TMP/err")"
# ... and each runs (the steps' graphs of several sequences are counted as
# the server counts them)
fit_ctx=$(sed -n 's/^baton run: to fit: --ctx \([0-9]*\) or less.*/\1/p' "$TMP/err")
fit_par=$(sed -n 's/^baton run: to fit: .*--parallel \([0-9]\) or fewer.*/\1/p' "$TMP/err")
for a in "--ctx $fit_ctx --parallel 8" "--ctx 512 --parallel $fit_par"; do
    # shellcheck disable=SC2086
    "$BATON" run --model "$MODEL" --prompt-file "$TMP/prompts.txt" $a --quiet \
        --servers "127.0.0.1:$PORT_small" --key "$K" 2>"$TMP/err" || fail "$a, named as fitting: $(cat "$TMP/err")"
done
# --parallel past the prompts: as many sequences as prompts, and the message says why
want 1 "--ctx 512 x 10 sequences (--parallel 64, 10 prompts) needs" --prompt-file "$TMP/prompts.txt" \
    --parallel 64 --ctx 512 --servers "127.0.0.1:$PORT_small" --key "$K"
par small1 "$TMP/prompts.txt" --parallel 1 --servers "127.0.0.1:$PORT_small" --key "$K"
same small1 one 10
echo "ok: usage errors and unreadable files; --parallel past a server's memory is said as such"
# N x --ctx past a server's scratch limit: ATTENTION's work area is min(heads
# x tokens, 64) rows of every KV-cache cell (all sequences' cells), and the
# server's scratch arena holds at most 1 GiB a session. A model of 8 heads
# and 1 kv head of 2 (16 bytes of KV cache a cell) decoding 8 sequences of
# --ctx 600000: 64 rows x 4800000 cells x 4 bytes = 1228800000 bytes. The
# coordinator names the limit, the figures, --ctx and --parallel; batond's
# log names the limit that refused it; the server serves the next session
"$BATON" gen-model --layers 1 --dim 16 --ff 16 --heads 8 --kv-heads 1 --type f32 -o "$TMP/att.gguf" \
    2>"$TMP/att.err" || fail "gen-model: $(cat "$TMP/att.err")"
grep -qx "baton gen-model: wrote $TMP/att.gguf (1 layer, dim 16, ff 16, 8 heads, 1 kv head, f32)" "$TMP/att.err" ||
    fail "gen-model line: $(cat "$TMP/att.err")"
printf 'a\nb\nc\nd\ne\nf\ng\nh\n' >"$TMP/eight.txt"
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K" start_server scratch
rc=0
"$BATON" run --model "$TMP/att.gguf" --prompt-file "$TMP/eight.txt" --parallel 8 --ctx 600000 -n 4 \
    --servers "127.0.0.1:$PORT_scratch" --key "$K" >/dev/null 2>"$TMP/att.err" || rc=$?
[ $rc = 1 ] && grep -qxF "baton run: stage 1's step of 8 tokens needs more scratch than the server's limit of 1.0 GiB per session (fixed; the server's total memory where that is less): its ATTENTION work area alone is 64 rows (8 heads x 8 tokens, at most 64) x 4800000 KV-cache cells x 4 bytes = 1.1 GiB, the cells being --ctx 600000 x 8 sequences at a time (--parallel); a smaller --ctx or --parallel needs less" "$TMP/att.err" ||
    fail "--parallel 8 --ctx 600000: exit $rc: $(cat "$TMP/att.err")"
# ... bench names its own option for the sequences at a time
rc=0
"$BATON" bench --model "$TMP/att.gguf" --servers local --npl 8 --ctx 600000 -p 4 -n 2 --reps 1 \
    >/dev/null 2>"$TMP/attb.err" || rc=$?
[ $rc = 1 ] && grep -qF "the cells being --ctx 600000 x 8 sequences at a time (--npl); a smaller --ctx or --npl needs less" "$TMP/attb.err" ||
    fail "bench --npl 8 --ctx 600000: exit $rc: $(cat "$TMP/attb.err")"
# ... before anything is uploaded (the coordinator sizes the steps' graphs as
# the server does), and with what fits: every stage's sessions at once
grep -qxE "baton run: to fit: --ctx [0-9]+ or less, --parallel [1-7] or fewer, or a batond with a larger --total-memory-bytes" "$TMP/att.err" ||
    fail "--parallel 8 --ctx 600000, no hint: $(cat "$TMP/att.err")"
! grep -q "^upload:" "$TMP/att.err" || fail "--ctx 600000: weights uploaded before the check"
ctx_fit=$(sed -n 's/^baton run: to fit: --ctx \([0-9]*\) or less.*/\1/p' "$TMP/att.err")
"$BATON" run --model "$TMP/att.gguf" --prompt-file "$TMP/eight.txt" --parallel 8 --ctx "$ctx_fit" -n 4 \
    --quiet --servers "127.0.0.1:$PORT_scratch" --key "$K" 2>"$TMP/att2.err" ||
    fail "--ctx $ctx_fit, named as fitting: $(cat "$TMP/att2.err")"
# half the context fits (64 x 2400000 x 4 = 614400000 bytes)
"$BATON" run --model "$TMP/att.gguf" --prompt-file "$TMP/eight.txt" --parallel 8 --ctx 300000 -n 4 --quiet \
    --servers "127.0.0.1:$PORT_scratch" --key "$K" 2>"$TMP/att.err" || fail "--ctx 300000: $(cat "$TMP/att.err")"
echo "ok: --parallel x --ctx past the scratch limit names the limit, the figures and the flags"
num='[0-9]+(\.[0-9]+)?'
# baton bench --npl: a row per batch size, N_KV = B x (PP + TG), the JSON
# with every figure; bad lists are usage errors
"$BATON" bench --model "$MODEL" --npl 1,3,8 -p 12 -n 6 --reps 1 --json "$TMP/npl.json" \
    >"$TMP/npl.out" 2>"$TMP/npl.err" || fail "bench --npl: $(cat "$TMP/npl.err")"
grep -q "^  *PP  *TG  *B  *N_KV  *T_PP s  *S_PP t/s  *T_TG s  *S_TG t/s  *T s  *S t/s  *TTFT ms  *TPOT ms\$" \
    "$TMP/npl.out" || fail "bench --npl: header: $(cat "$TMP/npl.out")"
for b in 1 3 8; do
    grep -Eq "^ +12 +6 +$b +$((b * 18)) ( +$num){8}\$" "$TMP/npl.out" ||
        fail "bench --npl: row $b: $(cat "$TMP/npl.out")"
done
[ "$(field "$TMP/npl.json" '[(x["b"], x["n_kv"]) for x in j["npl"]] == [(1, 18), (3, 54), (8, 144)] and all(x[k]["median"] > 0 for x in j["npl"] for k in ("t_pp", "s_pp", "t_tg", "s_tg", "t", "s", "ttft_ms", "tpot_ms"))')" = True ] ||
    fail "bench --npl: json: $(cat "$TMP/npl.json")"
[ "$(field "$TMP/npl.json" '[(x["ring"], x["p2p_used"]) for x in j["npl"]]')" = "[(False, False), (False, False), (False, False)]" ] ||
    fail "bench --npl: in-process rows say the ring or a peer link was used: $(cat "$TMP/npl.json")"
# in-process stages have no peer links: the header says p2p and the ring are not used, and
# there is no "decode ring used" or "direct path used" line
grep -q "^bench: .*, groups 1 (never more than B), .*, p2p on (not used: in-process stages), slots 2, ring on (not used: in-process stages)\$" \
    "$TMP/npl.out" && ! grep -q "decode ring used\|direct path used" "$TMP/npl.out" ||
    fail "bench --npl in-process: header / ring line: $(cat "$TMP/npl.out")"
# ... and so does the header without --npl
"$BATON" bench --model "$MODEL" --servers local -p 4 -n 3 --reps 1 >"$TMP/one.out" 2>/dev/null ||
    fail "bench in-process without --npl"
grep -q "^bench: .*, p2p on (not used: in-process stages), slots 2, ring on (not used: in-process stages)\$" \
    "$TMP/one.out" || fail "bench in-process: header: $(cat "$TMP/one.out")"
# ... and over 2 batond whose allow-lists make a ring, each row says it went around
"$BATON" bench --model "$MODEL" --servers "$P,$Q" --key "$K" --npl 1,4 -p 6 -n 6 --reps 2 \
    --json "$TMP/nplr.json" >"$TMP/nplr.out" 2>"$TMP/nplr.err" || fail "bench --npl ring: $(cat "$TMP/nplr.err")"
[ "$(field "$TMP/nplr.json" '[x["ring"] for x in j["npl"]]')" = "[True, True]" ] ||
    fail "bench --npl ring: $(cat "$TMP/nplr.json")"
grep -q "^bench: .*, slots 2, ring on\$" "$TMP/nplr.out" || fail "bench --npl ring: header: $(cat "$TMP/nplr.out")"
grep -qx "  decode ring used: B=1 yes B=4 yes" "$TMP/nplr.out" || fail "bench --npl ring: used line: $(cat "$TMP/nplr.out")"
grep -qx "  direct path used: B=1 yes B=4 yes" "$TMP/nplr.out" &&
    [ "$(field "$TMP/nplr.json" '[x["p2p_used"] for x in j["npl"]]')" = "[True, True]" ] ||
    fail "bench --npl: direct path line / p2p_used: $(cat "$TMP/nplr.out" "$TMP/nplr.json")"
# without --npl, --json says what was asked (p2p) and what was used (p2p_used, ring)
"$BATON" bench --model "$MODEL" --servers "$P,$Q" --key "$K" -p 6 -n 4 --reps 1 \
    --json "$TMP/b2.json" >"$TMP/b2.out" 2>"$TMP/b2.err" || fail "bench over 2 batond: $(cat "$TMP/b2.err")"
[ "$(field "$TMP/b2.json" '(j["p2p"], j["p2p_used"], j["ring"])')" = "(True, True, True)" ] ||
    fail "bench --json over a ring: p2p / p2p_used / ring: $(cat "$TMP/b2.json")"
# a batch size whose groups outnumber the slots runs without the ring, and says why
"$BATON" bench --model "$MODEL" --servers "$P,$Q" --key "$K" --npl 1,6 --groups 3 -p 6 -n 6 --reps 1 \
    >"$TMP/nplg.out" 2>"$TMP/nplg.err" || fail "bench --npl --groups 3: $(cat "$TMP/nplg.err")"
grep -qx "  decode ring used: B=1 yes B=6 no" "$TMP/nplg.out" &&
    grep -qx "B=6: plan: decode ring off: tokens through the coordinator (--groups 3 needs as many input slots: --slots 3)" \
        "$TMP/nplg.err" || fail "bench --npl --groups 3: $(cat "$TMP/nplg.out" "$TMP/nplg.err")"
for bad in "0" "257" "1,,2" "a" "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"; do
    rc=0
    "$BATON" bench --model "$MODEL" --npl "$bad" >/dev/null 2>"$TMP/npl.err" || rc=$?
    [ $rc = 2 ] && grep -q "^baton bench: --npl" "$TMP/npl.err" || fail "--npl $bad: exit $rc: $(cat "$TMP/npl.err")"
done
# a value out of range says the range, however many digits it has
for bad in 0 257 9999999999999 99999999999999999999999 -1 x; do
    rc=0
    "$BATON" bench --model "$MODEL" --npl "1,$bad" >/dev/null 2>"$TMP/npl.err" || rc=$?
    [ $rc = 2 ] && grep -qxF "baton bench: --npl: '$bad' is not a batch size in 1..256 (want B,B,..., up to 16 values)" "$TMP/npl.err" ||
        fail "--npl 1,$bad: exit $rc: $(cat "$TMP/npl.err")"
done
echo "ok: bench --npl prints a row per batch size"
echo PASS
