#!/bin/bash
# Metadata a model file gets wrong is named, not replaced by a default:
#   - an optional llama hyperparameter key of the wrong type (epsilon as a
#     string, rope.dimension_count as a string or f32, head_count_kv as a
#     string) makes `baton run` and `baton bench` exit 1 naming the file,
#     the key, the type found and the type expected (the run went on with
#     the default, or failed later on a tensor shape without naming the key);
#   - attention.value_length without key_length must equal the head size.
# Files are copies of stories260K with pairs retyped by gguf_edit.py.
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
echo "ok: optional metadata keys of the wrong type or size are named"
