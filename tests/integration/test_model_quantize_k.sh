#!/bin/bash
# K-quant and IQ4 presets: `baton quantize` q2_k, q3_k_m, q4_k_m, q5_k_m,
# q6_k, iq4_xs, iq4_nl give
# each matrix of a small model the type llama.cpp's preset of that name
# gives it (expected lists written out here from the rules, as
# docs/QUANTIZE.md states them, not read from baton); gen-model --type with a
# mix gives the same types, and with a K-quant every matrix that type;
# rows not a multiple of 256 fall back (Q4_0 / Q5_0 / Q5_1 / Q8_0 /
# IQ4_NL / F16); gen-model and quantize write Q5_0 / Q5_1 / IQ4_NL directly; the files load
# in baton inspect with the tensor sizes of the formats. A 4096-layer model
# is quantized in seconds (the ranks of attn_v and ffn_down, found once).
# A single type sets general.file_type to llama.cpp's number for it.
source "$(dirname "$0")/lib.sh"

# 8 layers, dim 256, ff 512, 4 query heads sharing 1 key/value head (GQA 4)
"$BATON" gen-model --layers 8 --dim 256 --ff 512 --heads 4 --kv-heads 1 --vocab 400 --seed 3 \
    -o "$TMP/f32.gguf" 2>/dev/null || fail "gen-model f32"

# types NAME.gguf: "tensor type" lines of the matrices, sorted
types() {
    "$BATON" inspect "$1" >"$TMP/inspect.txt" || fail "inspect $1"
    awk '$2 ~ /weight$/ && $2 !~ /_norm\.weight$/ { print $2, $3 }' "$TMP/inspect.txt" | LC_ALL=C sort
}

# expect PRESET: the types llama.cpp's rules give this model. use_more_bits
# (first eighth, last eighth, every third between) for 8 layers: 0, 3, 6, 7.
expect() {
    local p=$1 l base v d o
    case $p in
    q2_k) base=q2_k ;; q3_k_m) base=q3_k ;; q4_k_m) base=q4_k ;; q5_k_m) base=q5_k ;; q6_k) base=q6_k ;;
    iq4_xs) base=iq4_xs ;; iq4_nl) base=iq4_nl ;;
    esac
    echo "token_embd.weight $base"
    echo "output.weight q6_k"
    for l in 0 1 2 3 4 5 6 7; do
        v=$base d=$base o=$base
        case $p in
        q2_k) v=q4_k d=q3_k o=q3_k ;;                      # GQA >= 4: attn_v Q4_K
        q3_k_m) v=q4_k; [ $l -lt 2 ] && v=q5_k; d=q4_k; o=q4_k ;; # ffn_down Q5_K below 8/16 = 0
        q4_k_m | q5_k_m) case $l in 0 | 3 | 6 | 7) v=q6_k d=q6_k ;; esac ;;
        # GQA >= 4: attn_v Q5_K; ffn_down Q5_K below 8/8 = 1
        iq4_xs | iq4_nl) v=q5_k; [ $l -lt 1 ] && d=q5_k ;;
        esac
        echo "blk.$l.attn_q.weight $base"
        echo "blk.$l.attn_k.weight $base"
        echo "blk.$l.attn_v.weight $v"
        echo "blk.$l.attn_output.weight $o"
        echo "blk.$l.ffn_gate.weight $base"
        echo "blk.$l.ffn_up.weight $base"
        echo "blk.$l.ffn_down.weight $d"
    done
}

for p in q2_k q3_k_m q4_k_m q5_k_m q6_k iq4_xs iq4_nl; do
    "$BATON" quantize "$TMP/f32.gguf" "$TMP/$p.gguf" "$p" 2>"$TMP/q.err" || fail "quantize $p: $(cat "$TMP/q.err")"
    grep -qx "baton quantize: wrote $TMP/$p.gguf: 58 tensors converted by the $p preset, 17 kept (vectors, norms, or not f32/f16/bf16)" \
        "$TMP/q.err" || fail "quantize $p: $(cat "$TMP/q.err")"
    types "$TMP/$p.gguf" >"$TMP/got.txt"
    expect "$p" | LC_ALL=C sort >"$TMP/want.txt"
    diff "$TMP/want.txt" "$TMP/got.txt" >&2 || fail "quantize $p: tensor types"
    # the summary's count per type: the expected matrices' types, plus the
    # 17 kept tensors (all f32 here), in type-id order
    by=$(awk '{ n[$2]++ } END { n["f32"] += 17; line = "baton quantize: by type:"
        split("f32 f16 q4_0 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs", order, " ")
        for (i = 1; i <= 11; i++) if (order[i] in n) line = line " " order[i] " " n[order[i]]
        print line }' "$TMP/want.txt")
    grep -qxF "$by" "$TMP/q.err" || fail "quantize $p: want '$by' in: $(cat "$TMP/q.err")"
    # llama-quantize's file type (LLAMA_FTYPE_MOSTLY_*)
    case $p in q2_k) ft=10 ;; q3_k_m) ft=12 ;; q4_k_m) ft=15 ;; q5_k_m) ft=17 ;; q6_k) ft=18 ;;
        iq4_nl) ft=25 ;; iq4_xs) ft=30 ;; esac
    grep -Eq "general\.file_type = $ft \(u32\)$" "$TMP/inspect.txt" || fail "quantize $p: general.file_type $ft"
done
# sizes: attn_q (256 x 256 = 256 super-blocks) of q4_k_m is 256 * 144 bytes,
# a Q6_K attn_v (256 x 64) 64 * 210, a Q4_K one 64 * 144
"$BATON" inspect "$TMP/q4_k_m.gguf" >"$TMP/inspect.txt"
grep -Eq "blk\.1\.attn_q\.weight +q4_k +256 x 256 +[0-9]+ +36864$" "$TMP/inspect.txt" || fail "q4_k size"
grep -Eq "blk\.0\.attn_v\.weight +q6_k +256 x 64 +[0-9]+ +13440$" "$TMP/inspect.txt" || fail "q6_k size"
grep -Eq "blk\.1\.attn_v\.weight +q4_k +256 x 64 +[0-9]+ +9216$" "$TMP/inspect.txt" || fail "q4_k attn_v size"
# llama-quantize's aliases and any case
"$BATON" quantize "$TMP/f32.gguf" "$TMP/alias.gguf" Q4_K 2>"$TMP/q.err" || fail "quantize Q4_K"
cmp -s "$TMP/alias.gguf" "$TMP/q4_k_m.gguf" || fail "Q4_K is not q4_k_m"
# the summary names the preset an alias stands for, as baton spells it (it
# said "converted to Q4_K", beside a by-type line without q4_k's fallbacks)
grep -qx "baton quantize: wrote $TMP/alias.gguf: 58 tensors converted by the q4_k_m preset, 17 kept (vectors, norms, or not f32/f16/bf16)" \
    "$TMP/q.err" || fail "quantize Q4_K: $(cat "$TMP/q.err")"

# gen-model: a mix gives the types quantize gives; a K-quant every matrix
for p in q3_k_m q4_k_m q5_k_m; do
    "$BATON" gen-model --layers 8 --dim 256 --ff 512 --heads 4 --kv-heads 1 --vocab 400 \
        --type "$p" -o "$TMP/gen-$p.gguf" 2>"$TMP/g.err" || fail "gen-model $p: $(cat "$TMP/g.err")"
    grep -q "kv head, $p)\$" "$TMP/g.err" || fail "gen-model $p line: $(cat "$TMP/g.err")"
    types "$TMP/gen-$p.gguf" >"$TMP/got.txt"
    case $p in q3_k_m) ft=12 ;; q4_k_m) ft=15 ;; q5_k_m) ft=17 ;; esac
    grep -Eq "general\.file_type = $ft \(u32\)$" "$TMP/inspect.txt" || fail "gen-model $p: general.file_type $ft"
    expect "$p" | LC_ALL=C sort >"$TMP/want.txt"
    diff "$TMP/want.txt" "$TMP/got.txt" >&2 || fail "gen-model $p: tensor types"
done
for t in q2_k q3_k q4_k q5_k q6_k iq4_xs; do
    "$BATON" gen-model --layers 2 --dim 256 --ff 512 --heads 4 --vocab 300 --type "$t" \
        -o "$TMP/gen-$t.gguf" 2>/dev/null || fail "gen-model $t"
    n=$(types "$TMP/gen-$t.gguf" | awk -v t="$t" '$2 != t' | wc -l)
    [ "$n" -eq 0 ] || fail "gen-model $t: $n matrices of another type"
    rc=0
    "$BATON" gen-model --layers 1 --dim 64 --ff 256 --heads 4 --type "$t" -o "$TMP/bad.gguf" \
        2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && [ ! -e "$TMP/bad.gguf" ] &&
        [ "$(cat "$TMP/bad.err")" = "baton gen-model: --dim 64 is not a multiple of 256: $t stores the rows of the matrices (--dim and --ff long) in super-blocks of 256" ] ||
        fail "gen-model $t --dim 64: rc $rc: $(cat "$TMP/bad.err")"
done

# fallbacks: ffn_down rows of 288 (a multiple of 32, not of 256) and a
# model with rows of 100 (not even of 32): llama.cpp's Q2_K/Q3_K -> Q4_0,
# Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; rows of 100 -> F16; the output
# head with rows that do not fit 256 -> Q8_0. (q3_k_m's ffn_down of layer 1
# is Q4_K: 1 >= 8/16; q4_k_m's of layer 0 is Q6_K: use_more_bits.)
"$BATON" gen-model --layers 8 --dim 256 --ff 288 --heads 4 --kv-heads 1 --vocab 400 \
    -o "$TMP/ff288.gguf" 2>/dev/null || fail "gen-model ff 288"
for c in "q2_k blk.1.ffn_down.weight q4_0" "q3_k_m blk.1.ffn_down.weight q5_0" \
         "q4_k_m blk.1.ffn_down.weight q5_0" "q4_k_m blk.0.ffn_down.weight q8_0" \
         "q5_k_m blk.1.ffn_down.weight q5_1" "q5_k_m blk.0.ffn_down.weight q8_0" \
         "q6_k blk.1.ffn_down.weight q8_0" "q2_k blk.1.ffn_up.weight q2_k" \
         "iq4_xs blk.1.ffn_down.weight iq4_nl" "iq4_xs blk.0.ffn_down.weight q5_1" \
         "iq4_xs blk.1.ffn_up.weight iq4_xs" "iq4_nl blk.1.ffn_down.weight iq4_nl"; do
    set -- $c
    "$BATON" quantize "$TMP/ff288.gguf" "$TMP/fb.gguf" "$1" 2>/dev/null || fail "quantize ff288 $1"
    types "$TMP/fb.gguf" | grep -qx "$2 $3" || fail "quantize ff288 $1: $2 is not $3"
done
"$BATON" gen-model --layers 1 --dim 96 --ff 100 --heads 4 --vocab 300 -o "$TMP/odd.gguf" 2>/dev/null ||
    fail "gen-model odd"
"$BATON" quantize "$TMP/odd.gguf" "$TMP/odd-q.gguf" q4_k_m 2>/dev/null || fail "quantize odd"
types "$TMP/odd-q.gguf" >"$TMP/got.txt"
grep -qx "blk.0.ffn_down.weight f16" "$TMP/got.txt" && grep -qx "blk.0.ffn_up.weight q5_0" "$TMP/got.txt" &&
    grep -qx "output.weight q8_0" "$TMP/got.txt" || fail "quantize odd shapes: $(cat "$TMP/got.txt")"
# IQ4_NL's block is 32 already: rows of 100 go to F16 (llama.cpp's rule)
"$BATON" quantize "$TMP/odd.gguf" "$TMP/odd-q.gguf" iq4_nl 2>/dev/null || fail "quantize odd iq4_nl"
types "$TMP/odd-q.gguf" >"$TMP/got.txt"
grep -qx "blk.0.ffn_down.weight f16" "$TMP/got.txt" && grep -qx "blk.0.ffn_up.weight iq4_nl" "$TMP/got.txt" ||
    fail "quantize odd shapes iq4_nl: $(cat "$TMP/got.txt")"
# 4096 layers (rows of 32: Q4_K falls back to Q5_0, Q6_K to Q8_0): the
# attn_v / ffn_down ranks are found once, not by a scan of the file per
# matrix, which took 36 s here (the limit is the test); use_more_bits picks
# 2048 of each (the first and last 512 layers, every third between), plus
# the output head
"$BATON" gen-model --layers 4096 --dim 32 --ff 32 --heads 1 -o "$TMP/deep.gguf" 2>/dev/null ||
    fail "gen-model 4096 layers"
more=$(python3 -c 'n = 4096
print(sum(1 for i in range(n) if i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2))')
rc=0; timeout 20 "$BATON" quantize "$TMP/deep.gguf" "$TMP/deep-q.gguf" q4_k_m 2>"$TMP/q.err" || rc=$?
[ "$rc" -eq 0 ] && grep -qx "baton quantize: by type: f32 8193 q5_0 $((7 * 4096 + 1 - 2 * more)) q8_0 $((2 * more + 1))" "$TMP/q.err" ||
    fail "quantize 4096 layers q4_k_m: rc $rc: $(cat "$TMP/q.err")"
rm -f "$TMP/deep.gguf" "$TMP/deep-q.gguf"
# Q5_0 / Q5_1 / IQ4_NL written directly: gen-model --type (rows of 96, a
# multiple of 32 only) gives every matrix that type; quantize of the 8-layer
# f32 model to q5_0 / q5_1 / iq4_nl: attn_q (256 x 256: 8 blocks of 32 per
# row) is 256 * 8 * 22 / 24 / 18 bytes; the files load in inspect
for t in q5_0 q5_1 iq4_nl; do
    "$BATON" gen-model --layers 2 --dim 96 --ff 160 --heads 3 --vocab 300 --type "$t" \
        -o "$TMP/gen-$t.gguf" 2>/dev/null || fail "gen-model $t"
    n=$(types "$TMP/gen-$t.gguf" | awk -v t="$t" '$2 != t' | wc -l)
    [ "$n" -eq 0 ] || fail "gen-model $t: $n matrices of another type"
    "$BATON" quantize "$TMP/f32.gguf" "$TMP/$t.gguf" "$t" 2>/dev/null || fail "quantize $t"
    "$BATON" inspect "$TMP/$t.gguf" >"$TMP/inspect.txt" || fail "inspect $t"
    case $t in q5_0) b=45056 ;; q5_1) b=49152 ;; iq4_nl) b=36864 ;; esac
    grep -Eq "blk\.1\.attn_q\.weight +$t +256 x 256 +[0-9]+ +$b\$" "$TMP/inspect.txt" || fail "$t size"
done
# a single type marks the file as llama-quantize does (LLAMA_FTYPE_*, from
# llama.h), and replaces the input's mark: the 8-layer F32 model (no mark)
# to each type, then its f16 copy (marked 1) to q8_0 and its bf16 copy
# (marked 32) to q8_0 and f32; the mark used to be copied unchanged (ALL_F32
# on a q8_0 file)
for c in "f32 0" "f16 1" "q4_0 2" "q8_0 7" "q5_0 8" "q5_1 9" "bf16 32" "f16:q8_0 7" \
    "bf16:q8_0 7" "bf16:f32 0"; do
    set -- $c
    in="$TMP/f32.gguf"
    case $1 in *:*) in="$TMP/ft-${1%%:*}.gguf" ;; esac
    "$BATON" quantize "$in" "$TMP/ft-${1#*:}.gguf" "${1#*:}" 2>/dev/null || fail "quantize $1"
    "$BATON" inspect --json "$TMP/ft-${1#*:}.gguf" >"$TMP/ft.json" || fail "inspect --json $1"
    python3 - "$TMP/ft.json" "$2" <<'PY' || fail "quantize $1: general.file_type is not $2"
import json, sys
m = json.load(open(sys.argv[1]))["metadata"]
assert m["general.file_type"] == {"type": "u32", "value": int(sys.argv[2])}, m
assert m["general.quantization_version"] == {"type": "u32", "value": 2}, m
PY
done
# ... but an input that already holds quantized tensors keeps its mark: they
# stay as they are (a break-it review: the q8_0 file "to f32" was marked ALL_F32)
for t in f32 q4_0; do
    "$BATON" quantize "$TMP/ft-q8_0.gguf" "$TMP/ft-keep.gguf" "$t" 2>/dev/null || fail "quantize q8_0 -> $t"
    "$BATON" inspect --json "$TMP/ft-keep.gguf" >"$TMP/ft.json" || fail "inspect --json (keep)"
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metadata"]; assert m["general.file_type"]["value"] == 7, m' \
        "$TMP/ft.json" || fail "q8_0 -> $t: the input's general.file_type (7) was not kept"
done
# usage: an unknown preset name
rc=0; "$BATON" quantize "$TMP/f32.gguf" "$TMP/x.gguf" q4_k_s 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/x.gguf" ] &&
    grep -qx "baton quantize: type 'q4_k_s' (want q8_0, q4_0, q5_0, q5_1, f16, bf16, f32, q4_k_m, q5_k_m, q6_k, q3_k_m, q2_k, iq4_xs, iq4_nl)" "$TMP/bad.err" ||
    fail "quantize q4_k_s: rc $rc: $(cat "$TMP/bad.err")"

# A tensor's rows are split over threads (two on a 2-CPU machine for the
# 1024 rows of 512 of ffn_up here): the same bytes as one thread (the
# 8-layer model's files above, whose tensors are too small to split, were
# compared with llama.cpp's types; here the split and unsplit conversions of
# ffn_up are compared through gen-model, which converts on one thread), and
# a value that does not convert is the first in order, whichever thread met
# it: NaN at rows 700 and 400 (elements 358400 + 3, 204800 + 9) names 204809.
"$BATON" gen-model --layers 1 --dim 512 --ff 1024 --heads 4 --vocab 300 -o "$TMP/wide.gguf" \
    2>/dev/null || fail "gen-model wide"
for t in iq4_xs q4_k; do
    "$BATON" gen-model --layers 1 --dim 512 --ff 1024 --heads 4 --vocab 300 --type "$t" \
        -o "$TMP/wide-$t-gen.gguf" 2>/dev/null || fail "gen-model wide $t"
    "$BATON" quantize "$TMP/wide.gguf" "$TMP/wide-$t.gguf" "$( [ $t = q4_k ] && echo q4_k_m || echo $t)" \
        2>/dev/null || fail "quantize wide $t"
    python3 - "$TMP/wide-$t-gen.gguf" "$TMP/wide-$t.gguf" <<'PY' || fail "quantize wide $t: ffn_up differs from gen-model's"
import json, os, subprocess, sys
def data(path):
    j = json.loads(subprocess.run([os.environ["BATON"], "inspect", "--json", path],
                                  capture_output=True, check=True).stdout)
    t = [t for t in j["tensors"] if t["name"] == "blk.0.ffn_up.weight"][0]
    with open(path, "rb") as f:
        f.seek(j["data_offset"] + t["offset"])
        return t["type"], f.read(t["bytes"])
a, b = data(sys.argv[1]), data(sys.argv[2])
assert a[0] == b[0], (a[0], b[0])
assert a[1] == b[1]
PY
done
export BATON
python3 - "$TMP/wide.gguf" <<'PY' || fail "poke wide"
import json, os, struct, subprocess, sys
path = sys.argv[1]
j = json.loads(subprocess.run([os.environ["BATON"], "inspect", "--json", path],
                              capture_output=True, check=True).stdout)
t = [t for t in j["tensors"] if t["name"] == "blk.0.ffn_up.weight"][0]
with open(path, "r+b") as f:
    for e in (700 * 512 + 3, 400 * 512 + 9):
        f.seek(j["data_offset"] + t["offset"] + 4 * e)
        f.write(struct.pack("<f", float("nan")))
PY
for t in q8_0 iq4_xs; do
    rc=0; "$BATON" quantize "$TMP/wide.gguf" "$TMP/wide-bad.gguf" "$t" 2>"$TMP/q.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/wide-bad.gguf" ] &&
        grep -qxF "baton quantize: $TMP/wide.gguf: tensor 'blk.0.ffn_up.weight': element 204809 is NaN, which $t cannot hold (baton inspect --check names every tensor with NaN or infinite values)" "$TMP/q.err" ||
        fail "quantize wide NaN $t: rc $rc: $(cat "$TMP/q.err")"
done
echo "ok"
