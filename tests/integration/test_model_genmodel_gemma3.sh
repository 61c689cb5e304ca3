#!/bin/bash
# gen-model --arch gemma3 writes what llama.cpp's gemma3 loader reads and
# Google's converted files hold: the gemma3.* keys (key_length and
# value_length always, sliding_window 512 by default, sliding_window_pattern
# and a linear rope scale only when asked), per layer qwen3's Q/K norms and
# the post-attention and post-feed-forward norms (F32 vectors), and no
# output.weight (the head is token_embd). The file is read back here by a
# GGUF reader of the test's own, not baton's, and the expected keys and
# tensors are written out below. --swa, --swa-period and --rope-scale are
# refused with the other architectures, --rope-freqs with gemma3, and
# --swa-period with --swa 0. quantize (and gen-model --type) q4_k_m give a
# gemma3 file's token_embd the output head's type, Q6_K, as llama.cpp's
# preset does for a model without output.weight; the norms stay F32.
# (Once, by hand: llama.cpp's logits_ref loaded these files, with and
# without the window keys, and llama_model_quantize (tests/reference/
# quant_ref) gave every tensor of gemma3 files the types baton quantize
# gives for all seven presets: docs/QUANTIZE.md.)
source "$(dirname "$0")/lib.sh"

# dump FILE: "key = value (type)" per key (arrays as type[n]), then
# "tensor name type ne0xne1..." per tensor, from the GGUF v3 header (GGUF
# value types 4 u32, 5 i32, 6 f32, 8 string, 9 array; tensor types 0 f32,
# 12 q4_k, 14 q6_k, ...), then "vector name min max" per F32 vector
# (data aligned to 32 bytes: the file has no general.alignment).
dump() {
    python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:4] == b"GGUF" and struct.unpack_from("<I", b, 4)[0] == 3
n_t, n_kv = struct.unpack_from("<QQ", b, 8)
o = 24
def take(fmt):
    global o
    v = struct.unpack_from(fmt, b, o)
    o += struct.calcsize(fmt)
    return v[0]
def string():
    global o
    n = take("<Q")
    s = b[o:o + n].decode()
    o += n
    return s
scalar = {0: ("<B", "u8"), 4: ("<I", "u32"), 5: ("<i", "i32"), 6: ("<f", "f32")}
def value(t):
    if t == 8:
        return '"%s" (string)' % string()
    if t == 9:
        et, n = take("<I"), take("<Q")
        for _ in range(n):
            string() if et == 8 else take(scalar[et][0])
        return "%s[%d]" % ("string" if et == 8 else scalar[et][1], n)
    v = take(scalar[t][0])
    return "%s (%s)" % (("%.9g" % v) if t == 6 else v, scalar[t][1])
for _ in range(n_kv):
    k = string()
    print("%s = %s" % (k, value(take("<I"))))
types = {0: "f32", 1: "f16", 8: "q8_0", 12: "q4_k", 14: "q6_k"}
vectors = []
for _ in range(n_t):
    name = string()
    nd = take("<I")
    ne = [take("<Q") for _ in range(nd)]
    t = take("<I")
    off = take("<Q")
    print("tensor %s %s %s" % (name, types.get(t, t), "x".join(map(str, ne))))
    if t == 0 and nd == 1:
        vectors.append((name, off, ne[0]))
data = (o + 31) // 32 * 32
for name, off, n in vectors:
    v = struct.unpack_from("<%df" % n, b, data + off)
    print("vector %s %.4f %.4f" % (name, min(v), max(v)))
PY
}

# expect_tensors L D FF QD KVD HD TYPE: the tensor lines of a gemma3 model
# of L layers whose matrices are all TYPE, in gen-model's order
expect_tensors() {
    local l=$1 d=$2 ff=$3 qd=$4 kvd=$5 hd=$6 t=$7 i
    echo "tensor token_embd.weight $t ${d}x400"
    echo "tensor output_norm.weight f32 $d"
    for ((i = 0; i < l; i++)); do
        echo "tensor blk.$i.attn_norm.weight f32 $d"
        echo "tensor blk.$i.attn_q.weight $t ${d}x$qd"
        echo "tensor blk.$i.attn_k.weight $t ${d}x$kvd"
        echo "tensor blk.$i.attn_v.weight $t ${d}x$kvd"
        echo "tensor blk.$i.attn_output.weight $t ${qd}x$d"
        echo "tensor blk.$i.ffn_norm.weight f32 $d"
        echo "tensor blk.$i.ffn_gate.weight $t ${d}x$ff"
        echo "tensor blk.$i.ffn_up.weight $t ${d}x$ff"
        echo "tensor blk.$i.ffn_down.weight $t ${ff}x$d"
        echo "tensor blk.$i.attn_q_norm.weight f32 $hd"
        echo "tensor blk.$i.attn_k_norm.weight f32 $hd"
        echo "tensor blk.$i.post_attention_norm.weight f32 $d"
        echo "tensor blk.$i.post_ffw_norm.weight f32 $d"
    done
}

# heads 4 x head size 48 = 192 over an embedding of 64 (as Gemma 3's 256-wide
# heads need not divide the width), 2 KV heads
G="--arch gemma3 --layers 3 --dim 64 --ff 128 --heads 4 --kv-heads 2 --head-dim 48 --vocab 400"
# shellcheck disable=SC2086
"$BATON" gen-model $G -o "$TMP/g.gguf" 2>"$TMP/g.err" || fail "gen-model gemma3: $(cat "$TMP/g.err")"
[ "$(cat "$TMP/g.err")" = "baton gen-model: wrote $TMP/g.gguf (3 layers, dim 64, ff 128, 4 heads, 2 kv heads, f32)" ] ||
    fail "gen-model gemma3 success line: $(cat "$TMP/g.err")"
# shellcheck disable=SC2086
"$BATON" gen-model $G -o "$TMP/g2.gguf" 2>/dev/null || fail "gen-model gemma3 (2)"
cmp -s "$TMP/g.gguf" "$TMP/g2.gguf" || fail "gen-model gemma3 is not deterministic"
dump "$TMP/g.gguf" >"$TMP/g.txt" || fail "the GGUF reader failed on the gemma3 file"
grep -v "^tokenizer\.\|^tensor \|^vector " "$TMP/g.txt" >"$TMP/g.keys"
cat >"$TMP/want.keys" <<'EOF'
general.architecture = "gemma3" (string)
general.name = "baton-gen-model" (string)
gemma3.context_length = 2048 (u32)
gemma3.embedding_length = 64 (u32)
gemma3.block_count = 3 (u32)
gemma3.feed_forward_length = 128 (u32)
gemma3.rope.dimension_count = 48 (u32)
gemma3.attention.head_count = 4 (u32)
gemma3.attention.head_count_kv = 2 (u32)
gemma3.attention.key_length = 48 (u32)
gemma3.attention.value_length = 48 (u32)
gemma3.attention.layer_norm_rms_epsilon = 9.99999997e-07 (f32)
gemma3.rope.freq_base = 1000000 (f32)
gemma3.attention.sliding_window = 512 (u32)
EOF
diff "$TMP/want.keys" "$TMP/g.keys" >&2 || fail "gemma3 keys differ (want < > got)"
grep -q '^tokenizer.ggml.tokens = string\[400\]$' "$TMP/g.txt" || fail "gemma3: no vocabulary of 400"
expect_tensors 3 64 128 192 96 48 f32 >"$TMP/want.tensors"
grep "^tensor " "$TMP/g.txt" >"$TMP/g.tensors"
diff "$TMP/want.tensors" "$TMP/g.tensors" >&2 || fail "gemma3 tensors differ (want < > got)"
grep -q "^tensor output\.weight " "$TMP/g.tensors" && fail "gemma3 has an output.weight"
# every norm is 1 + noise of at most 0.05 (Google's files store Gemma's
# norm weights + 1, so real ones are near 1 too): output_norm and 6 per layer
[ "$(grep -c "^vector .*norm.weight" "$TMP/g.txt")" -eq 19 ] &&
    awk '/^vector / && ($3 < 0.95 || $4 > 1.05) { bad = 1 } END { exit bad }' "$TMP/g.txt" ||
    fail "gemma3 norms: $(grep "^vector " "$TMP/g.txt" | head -3)"
# (baton inspect reads the file too, and shows the same shapes)
"$BATON" inspect "$TMP/g.gguf" >"$TMP/g.inspect" || fail "inspect of the gemma3 model"
grep -q "blk.2.post_ffw_norm.weight  *f32  *64 " "$TMP/g.inspect" || fail "inspect: post_ffw_norm"

# the options: --swa N, --swa-period P, --rope-scale F; --swa 0 writes no
# window (and then no layer slides)
# shellcheck disable=SC2086
"$BATON" gen-model $G --swa 1024 --swa-period 4 --rope-scale 8 --rope-base 500000 \
    -o "$TMP/o.gguf" 2>/dev/null || fail "gen-model gemma3 --swa --swa-period --rope-scale"
dump "$TMP/o.gguf" | grep "^gemma3\.\(attention.sliding\|rope\.\)" >"$TMP/o.keys"
cat >"$TMP/want.keys" <<'EOF'
gemma3.rope.dimension_count = 48 (u32)
gemma3.rope.freq_base = 500000 (f32)
gemma3.attention.sliding_window = 1024 (u32)
gemma3.attention.sliding_window_pattern = 4 (u32)
gemma3.rope.scaling.type = "linear" (string)
gemma3.rope.scaling.factor = 8 (f32)
EOF
diff "$TMP/want.keys" "$TMP/o.keys" >&2 || fail "gemma3 option keys differ (want < > got)"
# shellcheck disable=SC2086
"$BATON" gen-model $G --swa 0 -o "$TMP/n.gguf" 2>/dev/null || fail "gen-model gemma3 --swa 0"
dump "$TMP/n.gguf" >"$TMP/n.txt" || fail "the GGUF reader failed on the --swa 0 file"
grep -q "sliding_window\|rope.scaling" "$TMP/n.txt" && fail "gemma3 --swa 0 wrote a window"
# the weights do not depend on the keys: the same tensor bytes
[ "$(tail -c 100000 "$TMP/n.gguf" | sha256sum)" = "$(tail -c 100000 "$TMP/g.gguf" | sha256sum)" ] ||
    fail "gemma3 --swa 0 changed the weights"

# refusals: each names the option and the rule, exit 2, nothing written
for c in "--arch llama --swa 512|--swa (a sliding window) is gemma3's: only with --arch gemma3" \
         "--arch qwen3 --swa 0|--swa (a sliding window) is gemma3's: only with --arch gemma3" \
         "--arch qwen3 --swa-period 6|--swa-period (the sliding-window layer pattern) is gemma3's: only with --arch gemma3" \
         "--arch qwen2 --rope-scale 8|--rope-scale (a linear rope scale) is gemma3's: only with --arch gemma3" \
         "--rope-scale 8|--rope-scale (a linear rope scale) is gemma3's: only with --arch gemma3" \
         "--arch gemma3 --rope-freqs|--rope-freqs is Llama 3.1's rope scaling: only with --arch llama" \
         "--arch gemma3 --swa 0 --swa-period 6|--swa-period 6 with --swa 0: the period says which layers slide, and with no window none does (give --swa N > 0)" \
         "--arch gemma3 --swa-period 0|--swa-period: '0' is too small (at least 1)" \
         "--arch gemma3 --rope-scale 0|--rope-scale: '0' is not in [1e-06, 1e+06]" \
         "--arch gemma3 --rope-scale -2|--rope-scale: '-2' is not in [1e-06, 1e+06]" \
         "--arch gemma3 --rope-scale 1e-40|--rope-scale: '1e-40' is not in [1e-06, 1e+06]" \
         "--arch gemma4|--arch: 'gemma4' (want llama, qwen2, qwen3, gemma3)"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 ${c%%|*} -o "$TMP/bad.gguf" \
        2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$TMP/bad.err")" = "baton gen-model: ${c#*|}" ] && [ ! -e "$TMP/bad.gguf" ] ||
        fail "gen-model ${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done

# quantize q4_k_m: the rows are 256 long, so the preset's own types apply;
# 2 layers: attn_v and ffn_down take Q6_K in layer 1 (the last eighth), Q4_K
# in layer 0. token_embd is the head (no output.weight): Q6_K, where a llama
# file's token_embd stays Q4_K. The gemma3 norms are 1-D: kept F32.
Q="--layers 2 --dim 256 --ff 256 --heads 2 --kv-heads 1 --head-dim 128 --vocab 400"
# shellcheck disable=SC2086
"$BATON" gen-model --arch gemma3 $Q -o "$TMP/q32.gguf" 2>/dev/null || fail "gen-model gemma3 f32 (256)"
"$BATON" quantize "$TMP/q32.gguf" "$TMP/qk.gguf" q4_k_m 2>"$TMP/q.err" || fail "quantize: $(cat "$TMP/q.err")"
grep -qx "baton quantize: wrote $TMP/qk.gguf: 15 tensors converted by the q4_k_m preset, 13 kept (vectors, norms, or not f32/f16/bf16)" "$TMP/q.err" &&
    grep -qx "baton quantize: by type: f32 13 q4_k 12 q6_k 3" "$TMP/q.err" || fail "quantize gemma3 q4_k_m: $(cat "$TMP/q.err")"
expect_tensors 2 256 256 256 128 128 q4_k |
    sed -E 's/^(tensor (token_embd|blk\.1\.attn_v|blk\.1\.ffn_down)\.weight) q4_k/\1 q6_k/' >"$TMP/want.tensors"
dump "$TMP/qk.gguf" | grep "^tensor " >"$TMP/qk.tensors"
diff "$TMP/want.tensors" "$TMP/qk.tensors" >&2 || fail "gemma3 q4_k_m types differ (want < > got)"
# gen-model's preset makes the same choices
# shellcheck disable=SC2086
"$BATON" gen-model --arch gemma3 $Q --type q4_k_m -o "$TMP/gk.gguf" 2>/dev/null || fail "gen-model gemma3 q4_k_m"
dump "$TMP/gk.gguf" | grep "^tensor " >"$TMP/gk.tensors"
diff "$TMP/want.tensors" "$TMP/gk.tensors" >&2 || fail "gen-model gemma3 --type q4_k_m types differ (want < > got)"
# (a llama file of the same shape: its token_embd is not the head)
# shellcheck disable=SC2086
"$BATON" gen-model $Q -o "$TMP/l32.gguf" 2>/dev/null || fail "gen-model llama f32 (256)"
"$BATON" quantize "$TMP/l32.gguf" "$TMP/lk.gguf" q4_k_m 2>/dev/null || fail "quantize llama q4_k_m"
dump "$TMP/lk.gguf" >"$TMP/lk.txt" || fail "the GGUF reader failed on the llama file"
grep -qx "tensor token_embd.weight q4_k 256x400" "$TMP/lk.txt" || fail "llama q4_k_m: token_embd is not q4_k"
echo PASS
