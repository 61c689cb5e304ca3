#!/bin/bash
# Metadata a model file gets wrong is named, not replaced by a default:
#   - an optional llama hyperparameter key of the wrong type (epsilon as a
#     string, rope.dimension_count as a string or f32, head_count_kv as a
#     string) makes `baton run` and `baton bench` exit 1 naming the file,
#     the key, the type found and the type expected (the run went on with
#     the default, or failed later on a tensor shape without naming the key);
#   - attention.value_length without key_length must equal the head size;
#   - strings of the file quoted in messages (general.architecture,
#     tokenizer.ggml.model, tokenizer.ggml.pre) and the key and tensor names
#     of `baton inspect` reach the terminal escaped: no ESC, no other C0 or
#     DEL, no C1 control (U+0080..U+009F in UTF-8, or a raw byte 0x80..0x9f).
# Files are copies of stories260K (and of llama.cpp's gpt-2 vocabulary) with
# pairs set, retyped or renamed by gguf_edit.py.
source "$(dirname "$0")/lib.sh"
need_model
EDIT="$SRC_DIR/tests/integration/gguf_edit.py"

# refused NAME LINE EDIT-ARGS...: a copy of the model edited by EDIT-ARGS is
# refused by run (before any server is asked) and bench, each saying LINE
# after its own prefix and the file's name
refused() {
    local name=$1 line=$2 rc
    shift 2
    python3 "$EDIT" "$MODEL" "$TMP/$name.gguf" "$@" || fail "$name: gguf_edit.py"
    rc=0
    "$BATON" run --model "$TMP/$name.gguf" --prompt hi -n 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qxF "baton run: $TMP/$name.gguf: $line" "$TMP/err" ||
        fail "run $name: exit $rc: $(cat "$TMP/err")"
    rc=0
    "$BATON" bench --model "$TMP/$name.gguf" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qxF "baton bench: $TMP/$name.gguf: $line" "$TMP/err" ||
        fail "bench $name: exit $rc: $(cat "$TMP/err")"
}

refused eps-str "metadata key 'llama.attention.layer_norm_rms_epsilon': not a float (type string; f32 or f64 expected)" \
    --set llama.attention.layer_norm_rms_epsilon str 1e-5
refused rot-str "metadata key 'llama.rope.dimension_count': not an integer (type string)" \
    --set llama.rope.dimension_count str 8
refused rot-f32 "metadata key 'llama.rope.dimension_count': not an integer (type f32)" \
    --set llama.rope.dimension_count f32 8
refused kv-str "metadata key 'llama.attention.head_count_kv': not an integer (type string)" \
    --set llama.attention.head_count_kv str 4
# stories260K: 64 wide, 8 heads of 8
refused vlen "llama.attention.value_length 4 is not the head size 8 (embedding_length / head_count: the file has no llama.attention.key_length); baton needs value heads as wide as the key heads" \
    --set llama.attention.value_length u32 4
# epsilon and rope.dimension_count absent: their defaults (1e-5, the head
# size: stories260K's own values), and the model runs
python3 "$EDIT" "$MODEL" "$TMP/none.gguf" --del llama.attention.layer_norm_rms_epsilon \
    --del llama.rope.dimension_count || fail "none: gguf_edit.py"
# value_length equal to the head size is what converters write
python3 "$EDIT" "$MODEL" "$TMP/v8.gguf" --set llama.attention.value_length u32 8 ||
    fail "v8: gguf_edit.py"
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 8 >"$TMP/want" 2>"$TMP/err" ||
    fail "run of the model: $(cat "$TMP/err")"
for f in none v8; do
    "$BATON" run --model "$TMP/$f.gguf" --prompt "Once upon a time" -n 8 >"$TMP/out" 2>"$TMP/err" ||
        fail "run $f: $(cat "$TMP/err")"
    cmp -s "$TMP/want" "$TMP/out" || fail "run $f: '$(cat "$TMP/out")', want '$(cat "$TMP/want")'"
done

# clean FILE: valid UTF-8 without a control character but newlines
clean() {
    python3 - "$1" <<'PY' || fail "control characters in $1: $(od -c "$1" | head -20)"
import sys
text = open(sys.argv[1], "rb").read().decode("utf-8")  # strict: raw 0x80..0x9f fails
bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
sys.exit(1 if bad else 0)
PY
}
# says WHAT FILE LINE: FILE (a command's output) holds LINE, and is clean
says() {
    grep -qxF -- "$3" "$2" || fail "$1: no line '$3' in: $(od -c "$2" | head -20)"
    clean "$2"
}
# in the files, raw: ESC, BEL, CSI in UTF-8 and as a raw byte
python3 "$EDIT" "$MODEL" "$TMP/arch.gguf" \
    --set general.architecture str '\x1b[2Jllama\xc2\x9b1m\x9b\x07' || fail "arch: gguf_edit.py"
rc=0
"$BATON" run --model "$TMP/arch.gguf" --prompt hi -n 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "run arch: exit $rc"
says "run arch" "$TMP/err" "baton run: $TMP/arch.gguf: general.architecture '\x1b[2Jllama\xc2\x9b1m\x9b\x07' is not supported (llama, qwen2, qwen3, gemma3)"
python3 "$EDIT" "$MODEL" "$TMP/model.gguf" \
    --set tokenizer.ggml.model str '\x1b]0;title\x07\xc2\x9b' || fail "model: gguf_edit.py"
want="$TMP/model.gguf: tokenizer: key 'tokenizer.ggml.model': '\x1b]0;title\x07\xc2\x9b' is not supported (only 'llama' and 'gpt2')"
rc=0
"$BATON" tokenize -m "$TMP/model.gguf" x >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "tokenize model: exit $rc"
says "tokenize model" "$TMP/err" "baton tokenize: $want"
rc=0
"$BATON" run --model "$TMP/model.gguf" --prompt hi -n 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "run model: exit $rc"
says "run model" "$TMP/err" "baton run: $want"
# the pre-tokenizer: of a BPE vocabulary, and of the model made BPE (its
# pre-tokenizer is read before the merges it lacks)
G2="$MODEL_DIR/vocab/ggml-vocab-gpt-2.gguf"
if [ -f "$G2" ]; then
    python3 "$EDIT" "$G2" "$TMP/pre.gguf" --set tokenizer.ggml.pre str 'gpt\x1b[31m\xc2\x9b' ||
        fail "pre: gguf_edit.py"
    rc=0
    "$BATON" tokenize -m "$TMP/pre.gguf" x >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 1 ] || fail "tokenize pre: exit $rc"
    says "tokenize pre" "$TMP/err" "baton tokenize: $TMP/pre.gguf: tokenizer: key 'tokenizer.ggml.pre': pre-tokenizer 'gpt\x1b[31m\xc2\x9b' is not supported (baton knows 'llama-bpe', 'qwen2', 'tekken', 'smollm', 'gpt-2', 'default' and their other names, listed in baton(1))"
elif [ "${CI:-}" = "true" ]; then
    fail "$G2 missing under CI"
fi
python3 "$EDIT" "$MODEL" "$TMP/pre2.gguf" --set tokenizer.ggml.model str gpt2 \
    --set tokenizer.ggml.pre str 'x\x1b[2J\x9b' || fail "pre2: gguf_edit.py"
rc=0
"$BATON" run --model "$TMP/pre2.gguf" --prompt hi -n 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "run pre: exit $rc"
says "run pre" "$TMP/err" "baton run: $TMP/pre2.gguf: tokenizer: key 'tokenizer.ggml.pre': pre-tokenizer 'x\x1b[2J\x9b' is not supported (baton knows 'llama-bpe', 'qwen2', 'tekken', 'smollm', 'gpt-2', 'default' and their other names, listed in baton(1))"
# inspect's text: a key and a tensor name with C1 (and C0) controls, shown
# escaped as its string values are
python3 "$EDIT" "$MODEL" "$TMP/names.gguf" --set 'x.k\xc2\x9b2J' u32 7 \
    --set general.name str 'n\xc2\x9b\x1b' \
    --rename-tensor output_norm.weight 'out\xc2\x9b2J\x1b\x9b' || fail "names: gguf_edit.py"
"$BATON" inspect "$TMP/names.gguf" >"$TMP/out" 2>"$TMP/err" || fail "inspect names: $(cat "$TMP/err")"
says "inspect key" "$TMP/out" '  x.k\xc2\x9b2J = 7 (u32)'
says "inspect value" "$TMP/out" '  general.name = "n\xc2\x9b\x1b"'
grep -qF ' out\xc2\x9b2J\x1b\x9b ' "$TMP/out" || fail "inspect tensor name: $(cat "$TMP/out")"
"$BATON" inspect --json "$TMP/names.gguf" >"$TMP/out" 2>"$TMP/err" || fail "inspect --json names"
clean "$TMP/out"
# ... and the reader's own messages about them (a duplicate name)
python3 "$EDIT" "$MODEL" "$TMP/dup.gguf" --rename-tensor output_norm.weight 'o\xc2\x9b' \
    --rename-tensor blk.0.attn_norm.weight 'o\xc2\x9b' || fail "dup: gguf_edit.py"
rc=0
"$BATON" inspect "$TMP/dup.gguf" >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] || fail "inspect dup: exit $rc"
says "inspect dup" "$TMP/err" "baton inspect: $TMP/dup.gguf: duplicate tensor name 'o\xc2\x9b' (E_FORMAT)"
echo "ok: optional metadata keys of the wrong type or size are named; file strings are escaped"
