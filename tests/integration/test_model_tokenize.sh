#!/bin/bash
# baton tokenize on llama.cpp's vocab-only GGUFs ($MODEL_DIR/vocab): every
# case of the llama-bpe and llama-spm test files read with -f (byte for
# byte, so empty texts and texts of only newlines go through the file path)
# gives the ids llama.cpp expects; BOS by the model's default and
# --no-bos; special-token text parsed by default and plain with
# --no-parse-special; TEXT after --; standard input; clear errors naming the
# file and the metadata key (unknown pre-tokenizer, a merge without a
# space), and exit codes 0/1/2.
source "$(dirname "$0")/lib.sh"
V="$MODEL_DIR/vocab"
if [ ! -f "$V/ggml-vocab-llama-bpe.gguf" ]; then
    [ "${CI:-}" = "true" ] && fail "$V/ggml-vocab-llama-bpe.gguf missing under CI"
    echo "SKIP: $V/ggml-vocab-llama-bpe.gguf not found" >&2
    exit 77
fi

# every case of a .inp file (texts each followed by
# "\n__ggml_vocab_test__\n") against its .out line
for name in llama-bpe llama-spm; do
    python3 - "$V/ggml-vocab-$name.gguf.inp" "$TMP/case.$name" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
texts = data.split(b"\n__ggml_vocab_test__\n")
assert texts[-1] == b"", "the file ends with a separator"
for i, t in enumerate(texts[:-1]):
    open(f"{sys.argv[2]}.{i}", "wb").write(t)
PY
    i=0
    pass=0
    while IFS= read -r want; do
        got=$("$BATON" tokenize --model "$V/ggml-vocab-$name.gguf" --no-bos -f "$TMP/case.$name.$i") ||
            fail "$name case $i: exit $?"
        if [ "$got" = "${want# }" ]; then
            pass=$((pass + 1))
        else
            echo "$name case $i: want '${want# }', got '$got'" >&2
        fi
        i=$((i + 1))
    done <"$V/ggml-vocab-$name.gguf.out"
    [ "$i" -ge 40 ] || fail "$name: only $i cases"
    [ "$pass" -eq "$i" ] || fail "$name: $pass/$i cases match"
    echo "ok: $name $pass/$i cases through baton tokenize -f"
done

# expect WANT ARGS...: baton tokenize ARGS prints WANT and exits 0
expect() {
    local want=$1 got
    shift
    got=$("$BATON" tokenize "$@") || fail "tokenize $*: exit $?"
    [ "$got" = "$want" ] || fail "tokenize $*: want '$want', got '$got'"
}
L3="$V/ggml-vocab-llama-bpe.gguf"
QW="$V/ggml-vocab-qwen2.gguf"
G2="$V/ggml-vocab-gpt-2.gguf"
SPM="$V/ggml-vocab-llama-spm.gguf"
expect "128000 9906 1917" --model "$L3" "Hello world" # llama-bpe adds BOS
expect "9906 1917" --model "$L3" --no-bos "Hello world"
expect "9707 1879 151645" -m "$QW" "Hello world<|im_end|>" # qwen2: no BOS, special parsed
expect "9707 1879 27 91 318 6213 91 29" -m "$QW" --no-parse-special "Hello world<|im_end|>"
expect "128000 128009" -m "$L3" "<|eot_id|>"
expect "1 15043 3186" -m "$SPM" "Hello world"
expect "1" -m "$SPM" ""                               # empty text: BOS only
expect "" -m "$G2" ""                                 # no BOS at all
expect "12 87" -m "$G2" -- "-x"                      # TEXT after --
printf 'Hello world\n' | expect "15496 995 198" -m "$G2" -f -
echo "ok: BOS defaults, --no-bos, special parsing, --, stdin"

# errors: exit code and the message naming what is wrong
# experr RC PATTERN ARGS...
experr() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$BATON" tokenize "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "tokenize $*: exit $rc, want $want ($(cat "$TMP/err"))"
    grep -qF -- "$pat" "$TMP/err" || fail "tokenize $*: message '$(cat "$TMP/err")' lacks '$pat'"
    [ ! -s "$TMP/out" ] || fail "tokenize $*: printed ids on an error"
}
experr 2 "--model FILE is required" "Hello"
experr 2 "no text" -m "$L3"
experr 2 "not both" -m "$L3" -f "$TMP/case.llama-bpe.0" "Hello"
experr 2 "unexpected argument 'b'" -m "$L3" a b
experr 2 "see \`baton tokenize --help\`" -m "$L3" --bogus x
experr 2 "a TEXT that starts with '-' goes after --" -m "$L3" "-x"
experr 1 "$TMP/nope.gguf" -m "$TMP/nope.gguf" x
experr 1 "-f $TMP/nope.txt" -m "$L3" -f "$TMP/nope.txt"
printf 'not a gguf' >"$TMP/junk.gguf"
experr 1 "$TMP/junk.gguf" -m "$TMP/junk.gguf" x
# an unknown pre-tokenizer and a merge line without a space, patched into
# copies of gpt-2's vocabulary (same lengths, so the file stays valid)
python3 - "$G2" "$TMP" <<'PY'
import sys
src = open(sys.argv[1], "rb").read()
n5 = (5).to_bytes(8, "little")
key = b"tokenizer.ggml.pre"
at = src.index(key) + len(key) + 4  # the value's string after its type
assert src[at:at + 13] == n5 + b"gpt-2"
open(sys.argv[2] + "/pre.gguf", "wb").write(src[:at + 8] + b"gpt-9" + src[at + 13:])
key = b"tokenizer.ggml.merges"
at = src.index(key) + len(key) + 4 + 4 + 8  # type, element type, count
first = (4).to_bytes(8, "little") + "\u0120 t".encode()
assert src[at:at + 12] == first, src[at:at + 12]
open(sys.argv[2] + "/merge.gguf", "wb").write(src[:at + 8] + "\u0120_t".encode() + src[at + 12:])
PY
experr 1 "$TMP/pre.gguf: tokenizer: key 'tokenizer.ggml.pre': pre-tokenizer 'gpt-9' is not supported" \
    -m "$TMP/pre.gguf" x
experr 1 "$TMP/merge.gguf: tokenizer: key 'tokenizer.ggml.merges': element 0 is not two parts" \
    -m "$TMP/merge.gguf" x
# other pre-tokenizer names (tests/reference/fixtures/tok-*.txt check each
# against llama.cpp): tekken splits digits one by one and adds BOS; a file
# without tokenizer.ggml.pre gets llama.cpp's fallback, with a warning
EDIT="$SRC_DIR/tests/integration/gguf_edit.py"
python3 "$EDIT" "$L3" "$TMP/tekken.gguf" --set tokenizer.ggml.pre str tekken || fail "gguf_edit"
expect "128000 9906 10343 220 17 15 17 19" -m "$TMP/tekken.gguf" "HelloWorld 2024"
expect "128000 9906 10343 220 2366 19" -m "$L3" "HelloWorld 2024"
python3 "$EDIT" "$G2" "$TMP/nopre.gguf" --del tokenizer.ggml.pre || fail "gguf_edit"
got=$("$BATON" tokenize -m "$TMP/nopre.gguf" "Hello world" 2>"$TMP/nopre.err") ||
    fail "no pre: exit $?"
[ "$got" = "15496 995" ] || fail "no pre: got '$got'"
grep -qF "baton tokenize: warning: $TMP/nopre.gguf: no tokenizer.ggml.pre: its text is split with llama.cpp's 'default' pre-tokenizer" \
    "$TMP/nopre.err" || fail "no pre: no warning: $(cat "$TMP/nopre.err")"
"$BATON" tokenize -m "$G2" "Hello world" 2>"$TMP/pre.err" >/dev/null && [ ! -s "$TMP/pre.err" ] ||
    fail "a warning for a file with its pre-tokenizer: $(cat "$TMP/pre.err")"
"$BATON" gen-model --layers 1 --dim 64 --ff 128 --heads 2 --vocab-from "$TMP/nopre.gguf" \
    -o "$TMP/nopre-model.gguf" >/dev/null || fail "gen-model --vocab-from a file without pre"
"$BATON" run --model "$TMP/nopre-model.gguf" --servers local --prompt hi -n 2 \
    >/dev/null 2>"$TMP/nopre-run.err" || fail "run without pre: $(cat "$TMP/nopre-run.err")"
grep -qF "baton run: warning: $TMP/nopre-model.gguf: no tokenizer.ggml.pre:" "$TMP/nopre-run.err" ||
    fail "run without pre: no warning: $(cat "$TMP/nopre-run.err")"
grep -q "^model: $TMP/nopre-model.gguf: llama, 1 layer, .*, vocab 50257 (BPE, pre-tokenizer default)$" \
    "$TMP/nopre-run.err" || fail "run without pre: model line: $(cat "$TMP/nopre-run.err")"
"$BATON" tokenize --help | grep -q "^usage: baton tokenize" || fail "--help"
# a vocabulary-only file given to run is called that (not a missing layer tensor)
rc=0
"$BATON" run --model "$V/ggml-vocab-llama-bpe.gguf" --servers local --prompt hi -n 2 \
    >"$TMP/vo.out" 2>"$TMP/vo.err" || rc=$?
[ "$rc" = 1 ] && grep -qxF "baton run: $V/ggml-vocab-llama-bpe.gguf: the file holds no tensors: a vocabulary-only GGUF (baton tokenize reads it; running needs a model with its weights)" "$TMP/vo.err" ||
    fail "run of a vocabulary-only file: exit $rc: $(cat "$TMP/vo.err")"
echo "ok: errors name the file and key; exit codes 1 and 2"
