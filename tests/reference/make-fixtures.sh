#!/bin/bash
# Regenerates tests/reference/fixtures/ from llama.cpp (issue 18, "Checked
# against llama.cpp"). Nothing of llama.cpp enters the repository: the
# fixtures are what its ggml and llama libraries compute, read through our
# own small programs (kq_ref.c, logits_ref.c, tok_ref.c, chat_ref.c) built
# outside the tree.
#
#   tests/reference/make-fixtures.sh [--jobs N] [--only kq|logits|tok|chat|llama-quant]
#                                    [--models A,B,...]
#
# --models regenerates only the logits fixtures of those names (logits-NAME.txt),
# leaving the others as they are (a new model's fixture without remaking the
# old ones with a newer llama.cpp).
#
# llama.cpp: $BATON_LLAMACPP_DIR when set (a folder laid out as
# bench/llamacpp-build.sh leaves it: DIR/llama.cpp the source, DIR/build-native
# the native build with bin/libllama.so, libggml*.so), else
# bench/llamacpp-build.sh --dir $BUILD_DIR/llamacpp (default build/llamacpp)
# builds it (npm ci of the pinned node-llama-cpp, its bundled source, a
# native CMake build; long on 2 cores, incremental afterwards).
# baton: $BATON when set, else $BUILD_DIR/baton (built here with CMake when
# missing).
#
# Writes (fixtures/README in tests/reference/README.md):
#   kq-*.dequant.f32, kq-vecdot.txt    kq_ref: K-quant (and Q5_0 / Q5_1)
#                                      dequantization and vec_dot of
#                                      kq_gen.h's data
#   kq-q5_*.quant.bin                  kq_ref: ggml's Q5_0 / Q5_1 reference
#                                      quantizer on kq_gen_x(0)
#   tok-NAME.txt                       tok_ref: llama.cpp's ids for test
#                                      texts with a vocabulary of
#                                      $MODEL_DIR/vocab whose
#                                      tokenizer.ggml.pre is set to each
#                                      pre-tokenizer name baton knows
#   chat-mistral.txt                   chat_ref: llama.cpp's built-in
#                                      Mistral chat layouts of fixed
#                                      messages
#   chat-gemma.txt                     chat_ref --spaced: its gemma layout
#                                      of messages with whitespace around
#   logits-NAME.txt                    logits_ref on the model that the
#                                      file's `gen-model` or `pad-model` (and
#                                      `quantize`) lines describe, written by
#                                      baton (pad_model.py) here
# --only llama-quant writes no fixture: it checks the other direction, files
# that llama.cpp's quantizer wrote (quant_ref: llama_model_quantize, as
# llama-quantize) run by baton, against logits_ref on the same file, and
# prints compare_logits.py's line for each (README.md has the numbers).
# A model type baton cannot write yet (gen-model or quantize refuses it) is
# reported and skipped; its old fixture, if any, stays.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
jobs=2
only=all
want_models=
while [ $# -gt 0 ]; do
    case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --models) want_models=,$2,; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-fixtures.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "make-fixtures: $*"; }
die() { echo "make-fixtures: $*" >&2; exit 1; }

build=${BUILD_DIR:-$src/build}
case $build in /*) ;; *) build=$src/$build ;; esac
if [ -n "${BATON_LLAMACPP_DIR:-}" ]; then
    ldir=$BATON_LLAMACPP_DIR
else
    ldir=$build/llamacpp
    "$src/bench/llamacpp-build.sh" --dir "$ldir" --jobs "$jobs" ||
        say "bench/llamacpp-build.sh did not build both tools; trying its libraries"
fi
lsrc=$ldir/llama.cpp
lbin=$ldir/build-native/bin
for f in "$lsrc/include/llama.h" "$lsrc/ggml/include/ggml-cpu.h" "$lbin/libllama.so" \
    "$lbin/libggml-base.so" "$lbin/libggml-cpu.so"; do
    [ -e "$f" ] || die "llama.cpp at $ldir lacks $f (run bench/llamacpp-build.sh)"
done
lrev=$(git -C "$lsrc" rev-parse --short HEAD 2>/dev/null || echo unknown)
linfo="llama.cpp $lrev ($(sed -n 's/.*"tag": "\(.*\)".*/\1/p' \
    "$ldir/node_modules/node-llama-cpp/llama/llama.cpp.info.json" 2>/dev/null || true))"

tools=$build/reference
mkdir -p "$tools"
cc=${CC:-cc}
$cc -O2 -std=c11 -Wall -Wextra -I"$lsrc/ggml/include" -I"$here" "$here/kq_ref.c" \
    -o "$tools/kq_ref" -L"$lbin" -lggml-cpu -lggml-base -Wl,-rpath,"$lbin"
$cc -O2 -std=c11 -Wall -Wextra -I"$lsrc/include" -I"$lsrc/ggml/include" "$here/logits_ref.c" \
    -o "$tools/logits_ref" -L"$lbin" -lllama -lggml -lggml-base -Wl,-rpath,"$lbin"
$cc -O2 -std=c11 -Wall -Wextra -I"$lsrc/include" -I"$lsrc/ggml/include" "$here/tok_ref.c" \
    -o "$tools/tok_ref" -L"$lbin" -lllama -lggml -lggml-base -Wl,-rpath,"$lbin"
$cc -O2 -std=c11 -Wall -Wextra -I"$lsrc/include" -I"$lsrc/ggml/include" "$here/chat_ref.c" \
    -o "$tools/chat_ref" -L"$lbin" -lllama -lggml -lggml-base -Wl,-rpath,"$lbin"
$cc -O2 -std=c11 -Wall -Wextra -I"$lsrc/include" -I"$lsrc/ggml/include" "$here/quant_ref.c" \
    -o "$tools/quant_ref" -L"$lbin" -lllama -lggml -lggml-base -Wl,-rpath,"$lbin"
out=$here/fixtures
mkdir -p "$out"

if [ "$only" = all ] || [ "$only" = chat ]; then
    {
        echo "# $linfo, tests/reference/chat_ref (make-fixtures.sh)"
        "$tools/chat_ref" mistral-v3 mistral-v3-tekken mistral-v7 mistral-v7-tekken
    } >"$out/chat-mistral.txt.tmp" || die "chat_ref failed"
    mv "$out/chat-mistral.txt.tmp" "$out/chat-mistral.txt"
    say "chat-mistral.txt from $linfo"
    {
        echo "# $linfo, tests/reference/chat_ref --spaced (make-fixtures.sh)"
        "$tools/chat_ref" --spaced gemma
    } >"$out/chat-gemma.txt.tmp" || die "chat_ref failed"
    mv "$out/chat-gemma.txt.tmp" "$out/chat-gemma.txt"
    say "chat-gemma.txt from $linfo"
    [ "$only" = chat ] && exit 0
fi

# tok_fixture FILE VOCAB TEXTS NAME...: FILE gets, for each NAME, llama.cpp's
# add_bos and ids of every text of TEXTS ("vocab/X" under $MODEL_DIR,
# "reference/X" under tests/) with $MODEL_DIR/VOCAB whose tokenizer.ggml.pre
# is NAME ("-": the key removed).
vocab_dir=${MODEL_DIR:-$src/../shared/models}
tok_fixture() {
    local file=$1 vocab=$2 texts=$3 name tpath
    shift 3
    case $texts in
    vocab/*) tpath=$vocab_dir/$texts ;;
    *) tpath=$src/tests/$texts ;;
    esac
    {
        echo "# $linfo, tests/reference/tok_ref (make-fixtures.sh)"
        echo "vocab $vocab"
        echo "texts $texts"
        for name in "$@"; do
            if [ "$name" = - ]; then
                python3 "$src/tests/integration/gguf_edit.py" "$vocab_dir/$vocab" "$tmpv" \
                    --del tokenizer.ggml.pre
            else
                python3 "$src/tests/integration/gguf_edit.py" "$vocab_dir/$vocab" "$tmpv" \
                    --set tokenizer.ggml.pre str "$name"
            fi
            echo "pre $name"
            "$tools/tok_ref" "$tmpv" "$tpath" || die "tok_ref failed on pre '$name'"
        done
    } >"$file.tmp"
    mv "$file.tmp" "$file"
    say "$(basename "$file"): $# pre-tokenizer name(s) from $linfo"
}

if [ "$only" = all ] || [ "$only" = tok ]; then
    tmpv=$(mktemp --suffix=.gguf)
    # every name baton knows, on a few texts that tell the expressions apart
    mapfile -t names < <(sed -n 's/^ *{"\([^"]*\)", {BATON_PRETOK_.*/\1/p' \
        "$src/src/model/tokenizer_pre.c")
    [ "${#names[@]}" -gt 0 ] || die "no pre-tokenizer names found in src/model/tokenizer_pre.c"
    tok_fixture "$out/tok-names.txt" vocab/ggml-vocab-llama-bpe.gguf reference/pretok-probe.inp \
        "${names[@]}" -
    # every text of llama.cpp's test files, for the expressions and flags that
    # no .out file of $MODEL_DIR/vocab covers
    tok_fixture "$out/tok-tekken.txt" vocab/ggml-vocab-llama-bpe.gguf \
        vocab/ggml-vocab-llama-bpe.gguf.inp tekken
    tok_fixture "$out/tok-dbrx.txt" vocab/ggml-vocab-llama-bpe.gguf \
        vocab/ggml-vocab-llama-bpe.gguf.inp dbrx
    tok_fixture "$out/tok-smollm.txt" vocab/ggml-vocab-gpt-2.gguf \
        vocab/ggml-vocab-gpt-2.gguf.inp smollm
    tok_fixture "$out/tok-default.txt" vocab/ggml-vocab-gpt-2.gguf \
        vocab/ggml-vocab-gpt-2.gguf.inp default
    rm -f "$tmpv"
    [ "$only" = tok ] && exit 0
fi

if [ "$only" != logits ] && [ "$only" != llama-quant ]; then
    "$tools/kq_ref" "$out"
    say "kq: $(cd "$out" && echo kq-*) from $linfo"
fi
[ "$only" = kq ] && exit 0

baton=${BATON:-$build/baton}
if [ ! -x "$baton" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$jobs" --target baton >/dev/null
fi

# The models: NAME|SOURCE|quantize type (or empty)|prompt ids (or empty: the
# synthetic prompt). SOURCE is `gen-model OPTIONS` (baton gen-model) or
# `pad-model WIDTH FF`: stories260K ($MODEL_DIR, default ../shared/models)
# widened with zeros by pad_model.py, so that it computes what stories260K
# computes (the same greedy ids) with rows of 256: a model that behaves like a
# real one, with K-quant-sized rows.
# The synthetic ones: 3 layers (one per batond of the split test), width 256
# (one K super-block per row), 300 tokens.
shape="--layers 3 --dim 256 --ff 512 --heads 4 --vocab 300 --seed 7"
# Widths that are multiples of 32 but not of 256, as Qwen2.5-0.5B's 896: the
# presets fall back to Q5_0 (q4_k_m) / Q5_1 (q5_k_m) and Q8_0, iq4_xs to IQ4_NL
shape_w="--layers 3 --dim 224 --ff 480 --heads 4 --kv-heads 2 --vocab 300 --seed 7"
story="1 403 407 261 378" # "Once upon a time"
models=(
    "f16|gen-model $shape --type f16||"
    "bf16|gen-model $shape --type bf16||"
    "q8_0|gen-model $shape --type q8_0||"
    "q4_0|gen-model $shape --type q4_0||"
    "q8_0-gqa|gen-model --layers 3 --dim 256 --ff 512 --heads 4 --kv-heads 2 --vocab 300 --seed 8 --type q8_0||"
    "q2_k|gen-model $shape --type q2_k||"
    "q3_k|gen-model $shape --type q3_k||"
    "q4_k|gen-model $shape --type q4_k||"
    "q5_k|gen-model $shape --type q5_k||"
    "q6_k|gen-model $shape --type q6_k||"
    "q5_0|gen-model $shape --type q5_0||"
    "q5_1|gen-model $shape --type q5_1||"
    "iq4_nl|gen-model $shape --type iq4_nl||"
    "iq4_xs|gen-model $shape --type iq4_xs||"
    "q4_k_m|gen-model $shape --type f32|q4_k_m|"
    "q5_k_m|gen-model $shape --type f32|q5_k_m|"
    "q6_k-quant|gen-model $shape --type f32|q6_k|"
    "q3_k_m|gen-model $shape --type f32|q3_k_m|"
    "q2_k-quant|gen-model $shape --type f32|q2_k|"
    "q8_0-quant|gen-model $shape --type f32|q8_0|"
    "q4_0-quant|gen-model $shape --type f32|q4_0|"
    "bf16-quant|gen-model $shape --type f32|bf16|"
    "iq4_xs-quant|gen-model $shape --type f32|iq4_xs|"
    "iq4_nl-quant|gen-model $shape --type f32|iq4_nl|"
    "qwen2|gen-model --arch qwen2 $shape --kv-heads 2 --type f32||"
    "qwen2-q4_k_m|gen-model --arch qwen2 $shape --kv-heads 2 --type f32|q4_k_m|"
    "qwen2w-q4_k_m|gen-model --arch qwen2 $shape_w --type f32|q4_k_m|"
    "qwen2w-q5_k_m|gen-model --arch qwen2 $shape_w --type f32|q5_k_m|"
    "qwen2w-iq4_xs|gen-model --arch qwen2 $shape_w --type f32|iq4_xs|"
    "qwen3|gen-model --arch qwen3 $shape --kv-heads 2 --head-dim 128 --type f32||"
    "qwen3-q6_k|gen-model --arch qwen3 $shape --kv-heads 2 --head-dim 128 --type q6_k||"
    "gemma3|gen-model --arch gemma3 $shape --kv-heads 2 --head-dim 128 --swa 6 --swa-period 2 --rope-scale 8 --type f32||"
    "gemma3-q4_k_m|gen-model --arch gemma3 $shape --kv-heads 2 --head-dim 128 --swa 6 --swa-period 2 --rope-scale 8 --type f32|q4_k_m|"
    "gemma3-q8_0|gen-model --arch gemma3 $shape --kv-heads 2 --head-dim 128 --swa 6 --swa-period 2 --rope-scale 8 --type q8_0||"
    "llama31|gen-model $shape --kv-heads 2 --rope-base 500000 --rope-freqs --type f32||"
    "llama31-q4_k_m|gen-model $shape --kv-heads 2 --rope-base 500000 --rope-freqs --type q4_k_m||"
    "stories-f32|pad-model 256 256||$story"
    "stories-q8_0|pad-model 256 256|q8_0|$story"
    "stories-bf16|pad-model 256 256|bf16|$story"
    "stories-q4_k_m|pad-model 256 256|q4_k_m|$story"
    "stories-q5_k_m|pad-model 256 256|q5_k_m|$story"
    "stories-q6_k|pad-model 256 256|q6_k|$story"
    "stories-iq4_xs|pad-model 256 256|iq4_xs|$story"
)
# prompt ids, tokens generated, steps whose logits are kept
synthetic_prompt="1 17 42 99 150 7 230 64"
n_gen=16
n_steps=4
stories=${MODEL_DIR:-$src/../shared/models}/stories260K.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The other direction: NAME|SOURCE|llama_ftype (25 IQ4_NL, 30 IQ4_XS)|prompt
# ids (or empty); SOURCE as in the list below.
lq_models=(
    "syn-iq4_xs|gen-model $shape --type f32|30|"
    "syn-iq4_nl|gen-model $shape --type f32|25|"
    "syn-f16-iq4_xs|gen-model $shape --type f16|30|"
    "syn-f16-iq4_nl|gen-model $shape --type f16|25|"
    "qwen2w-iq4_xs|gen-model --arch qwen2 $shape_w --type f32|30|"
    "stories-iq4_xs|pad-model 256 256|30|$story"
    "stories-iq4_nl|pad-model 256 256|25|$story"
)
if [ "$only" = llama-quant ]; then
    for m in "${lq_models[@]}"; do
        IFS='|' read -r name source ftype prompt_ids <<<"$m"
        prompt_ids=${prompt_ids:-$synthetic_prompt}
        model=$tmp/$name.gguf
        case $source in
        gen-model*)
            # shellcheck disable=SC2086
            "$baton" ${source} -o "$model" >/dev/null 2>&1 || die "$name: baton $source"
            ;;
        pad-model*)
            [ -f "$stories" ] || { say "SKIPPED $name: no $stories"; continue; }
            # shellcheck disable=SC2086
            python3 "$here/pad_model.py" "$stories" "$model" ${source#pad-model }
            ;;
        esac
        "$tools/quant_ref" "$model" "$tmp/$name.q.gguf" "$ftype" || die "$name: quant_ref failed"
        # shellcheck disable=SC2086
        "$tools/logits_ref" "$tmp/$name.q.gguf" $n_gen $n_steps $prompt_ids >"$tmp/ref.txt" ||
            die "$name: logits_ref failed"
        "$baton" run --model "$tmp/$name.q.gguf" --prompt-ids "${prompt_ids// /,}" -n $n_gen \
            --ignore-eos --quiet --ids-file "$tmp/ids.json" --logits-out "$tmp/logits.bin" \
            >/dev/null 2>"$tmp/run.err" || die "$name: baton run: $(cat "$tmp/run.err")"
        say "llama-quant $name: $(python3 "$here/compare_logits.py" "$tmp/ref.txt" \
            "$tmp/ids.json" "$tmp/logits.bin" 0.15 || true)"
    done
    exit 0
fi
for m in "${models[@]}"; do
    IFS='|' read -r name source quant prompt_ids <<<"$m"
    if [ -n "$want_models" ] && [ "${want_models#*,"$name",}" = "$want_models" ]; then
        continue
    fi
    prompt_ids=${prompt_ids:-$synthetic_prompt}
    model=$tmp/$name.gguf
    case $source in
    gen-model*)
        # shellcheck disable=SC2086
        if ! "$baton" ${source} -o "$model" >"$tmp/gen.log" 2>&1; then
            say "SKIPPED $name: baton $source: $(tail -n 1 "$tmp/gen.log")"
            continue
        fi
        ;;
    pad-model*)
        if [ ! -f "$stories" ]; then
            say "SKIPPED $name: no $stories"
            continue
        fi
        # shellcheck disable=SC2086
        python3 "$here/pad_model.py" "$stories" "$model" ${source#pad-model }
        ;;
    esac
    if [ -n "$quant" ]; then
        if ! "$baton" quantize "$model" "$tmp/$name.q.gguf" "$quant" >"$tmp/q.log" 2>&1; then
            say "SKIPPED $name: baton quantize ... $quant: $(tail -n 1 "$tmp/q.log")"
            continue
        fi
        model=$tmp/$name.q.gguf
    fi
    # shellcheck disable=SC2086
    if ! "$tools/logits_ref" "$model" $n_gen $n_steps $prompt_ids >"$tmp/ref.txt" 2>"$tmp/ref.err"; then
        say "FAILED $name: llama.cpp does not run baton's file: $(tail -n 3 "$tmp/ref.err")"
        continue
    fi
    {
        echo "# $linfo, tests/reference/logits_ref (make-fixtures.sh)"
        echo "$source"
        [ -n "$quant" ] && echo "quantize $quant"
        cat "$tmp/ref.txt"
    } >"$out/logits-$name.txt"
    say "logits-$name.txt: greedy $(sed -n 's/^greedy //p' "$tmp/ref.txt")"
done
