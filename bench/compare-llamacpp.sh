#!/usr/bin/env bash
# baton against llama.cpp on CPU, same GGUF, same thread count (issue 7).
#
#   bench/compare-llamacpp.sh [--build DIR] [--no-build] [--reps R] [--type T]
#                             [--threads "1 2"] [-p N] [-n N] [--model FILE]
#                             [--no-llamacpp] [--small] [--json FILE]
#
# Arms, each run R times (default 5, at least 5 unless --small) with the arm
# order rotating per repetition:
#   llamacpp        llama.cpp through the npm package node-llama-cpp 3.21.1
#                   with @node-llama-cpp/linux-x64 3.21.1 (gpu: false,
#                   build: "never"; bench/llamacpp/bench.mjs), installed
#                   with `npm ci` from bench/llamacpp/package-lock.json into
#                   DIR/llamacpp/ (never into the repository); needs node >= 20
#   baton_inproc    baton bench --servers local
#   baton_batond1   baton bench over one local batond (--threads N)
#   baton_batond2   baton bench over two local batond (--split 1,1, each
#                   --threads N; a single stream runs one stage at a time)
# The servers are started once per thread count on --port 0 and stopped by
# PID. Every arm gets the same synthetic prompt of -p tokens (default 128)
# and generates -n tokens (default 64) greedily, EOS ignored: prefill
# tok/s = p / time to the first generated token, decode tok/s = (n - 1) /
# time of the remaining steps, as `baton bench` defines them.
# The model (default: DIR/bench-models/d768-T.gguf, the roofline model, made
# with `baton gen-model` if missing) is shared by every arm.
#
# Output: `ARM threads=N prefill_tok_s=X decode_tok_s=Y` per arm and thread
# count (medians), a `#` spread line after each, then
#   ratio baton_inproc/llamacpp threads=N prefill=X decode=Y
#   ratio baton_batond1/baton_inproc threads=N decode=X cost_pct=C
#   ratio baton_batond2/baton_inproc threads=N decode=X cost_pct=C
# node-llama-cpp creates a thread per decode call, which makes its 2-thread
# decode slower than its 1-thread decode: compare decode at 1 thread.
# If the package cannot be installed or loaded, the reason is printed and
# the baton arms still run. --json FILE: the arm lines also as JSON (a row
# per arm and thread count with arm, servers (batond: 0 in-process and for
# llama.cpp, 1 or 2), stages (1, 1, 2), threads, prefill_tok_s, decode_tok_s
# and their spread; see
# bench_json_write in bench/lib.sh; read by bench/plot.py).
# --small: tiny model, 1 repetition, -p 8 -n 4,
# llama.cpp skipped unless already installed (for the smoke test).
# Figures only, never a test.
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/compare-llamacpp.sh $*"

build=${BUILD_DIR:-$BENCH_SRC/build}
do_build=1 reps=5 type=q8_0 threads="1 2" n_prompt=128 n_gen=64 model="" use_llama=1 small=0 json=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --reps) reps=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --no-llamacpp) use_llama=0; shift ;;
    --json) json=$2; shift 2 ;;
    --small) small=1; reps=1; n_prompt=8; n_gen=4; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-llamacpp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
[ "$reps" -ge 1 ] 2>/dev/null || bench_die "--reps must be >= 1"
if [ "$small" = 0 ] && [ "$reps" -lt 5 ]; then bench_die "--reps must be >= 5"; fi
[ "$n_gen" -ge 2 ] 2>/dev/null || bench_die "-n must be >= 2"

if [ "$do_build" = 1 ]; then
    bench_build "$build" baton batond
fi
bench_need_bins "$build" baton batond
BENCH_BATON=$build/baton
BENCH_BATOND=$build/batond

if [ -z "$model" ]; then
    mkdir -p "$build/bench-models"
    if [ "$small" = 1 ]; then
        model=$build/bench-models/small-$type.gguf
        dims=(--layers 2 --dim 64 --ff 128 --heads 4)
    else
        model=$build/bench-models/d768-$type.gguf
        dims=(--layers 12 --dim 768 --ff 2048 --heads 12)
    fi
    if [ ! -f "$model" ]; then
        "$BENCH_BATON" gen-model "${dims[@]}" --type "$type" --seed 1 -o "$model" >/dev/null 2>&1 ||
            bench_die "gen-model --type $type failed"
    fi
fi
[ -f "$model" ] || bench_die "$model: no such file"

bench_header
echo "# model: $model ($(stat -c %s "$model") bytes); prompt $n_prompt tokens, generated $n_gen"

# --- llama.cpp through node-llama-cpp ------------------------------------
llama_dir=$build/llamacpp
llama_ok=0
llama_setup() {
    local ver major out
    if ! command -v node >/dev/null 2>&1; then
        echo "# llamacpp: not run: node is not installed (node >= 20 needed)"
        return
    fi
    ver=$(node --version)
    major=${ver#v}
    major=${major%%.*}
    if [ "$major" -lt 20 ] 2>/dev/null; then
        echo "# llamacpp: not run: node $ver is older than 20"
        return
    fi
    echo "# node $ver (>= 20: ok), npm $(npm --version 2>/dev/null || echo missing)"
    mkdir -p "$llama_dir"
    cp "$BENCH_SRC/bench/llamacpp/bench.mjs" "$llama_dir/bench.mjs"
    if ! cmp -s "$BENCH_SRC/bench/llamacpp/package-lock.json" "$llama_dir/package-lock.json" ||
        [ ! -d "$llama_dir/node_modules/node-llama-cpp" ]; then
        if [ "$small" = 1 ]; then
            echo "# llamacpp: not run: not installed in $llama_dir (--small does not install)"
            return
        fi
        cp "$BENCH_SRC/bench/llamacpp/package.json" "$BENCH_SRC/bench/llamacpp/package-lock.json" \
            "$llama_dir/"
        # --omit=optional: the CUDA/Vulkan binaries of the package are not
        # wanted; --ignore-scripts: its postinstall would try to build or
        # download llama.cpp, which build: "never" does not need.
        if ! out=$(cd "$llama_dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund 2>&1); then
            echo "# llamacpp: not run: npm ci failed in $llama_dir:"
            sed 's/^/#   /' <<<"$out" | tail -n 15
            return
        fi
    fi
    if ! out=$(cd "$llama_dir" && node bench.mjs "$model" 1 "$n_prompt" "$n_gen" --info 2>&1); then
        echo "# llamacpp: not run: node-llama-cpp could not load or run the model:"
        sed 's/^/#   /' <<<"$out" | tail -n 15
        return
    fi
    grep '^# llama.cpp' <<<"$out" || true
    echo "# llamacpp: node-llama-cpp $(sed -n 's/.*"version": "\(.*\)".*/\1/p' \
        "$llama_dir/node_modules/node-llama-cpp/package.json" | head -n 1), @node-llama-cpp/linux-x64 $(sed -n \
        's/.*"version": "\(.*\)".*/\1/p' "$llama_dir/node_modules/@node-llama-cpp/linux-x64/package.json" |
        head -n 1), gpu: false, build: \"never\""
    llama_ok=1
}
if [ "$use_llama" = 1 ]; then
    llama_setup
else
    echo "# llamacpp: not run (--no-llamacpp)"
fi

# --- baton arms ------------------------------------------------------------
raw=$BENCH_TMP/raw
: >"$raw"
run_baton() { # arm threads servers [split]
    local arm=$1 th=$2 servers=$3 split=${4:-} json=$BENCH_TMP/b.json
    local extra=()
    [ -n "$split" ] && extra=(--split "$split")
    "$BENCH_BATON" bench --model "$model" --servers "$servers" "${extra[@]+"${extra[@]}"}" \
        --threads "$th" -p "$n_prompt" -n "$n_gen" --reps 1 --json "$json" \
        >/dev/null 2>"$BENCH_TMP/bench.err" ||
        { cat "$BENCH_TMP/bench.err" >&2; bench_die "baton bench ($arm, $th threads) failed"; }
    echo "${arm}_${th}_prefill=$(bench_json_median "$json" prefill)" >>"$raw"
    echo "${arm}_${th}_decode=$(bench_json_median "$json" decode)" >>"$raw"
}
run_llama() { # threads
    local th=$1 out
    if ! out=$(cd "$llama_dir" && node bench.mjs "$model" "$th" "$n_prompt" "$n_gen" 2>&1); then
        echo "# llamacpp: run failed (threads $th):" >&2
        sed 's/^/#   /' <<<"$out" >&2
        return
    fi
    echo "llamacpp_${th}_prefill=$(sed -n 's/.*prefill_tok_s=\([0-9.]*\).*/\1/p' <<<"$out")" >>"$raw"
    echo "llamacpp_${th}_decode=$(sed -n 's/.*decode_tok_s=\([0-9.]*\).*/\1/p' <<<"$out")" >>"$raw"
}

arms=()
[ "$llama_ok" = 1 ] && arms+=(llamacpp)
arms+=(baton_inproc baton_batond1 baton_batond2)
n_arms=${#arms[@]}
for th in $threads; do
    bench_start_batond S1 --threads "$th"
    bench_start_batond S2 --threads "$th"
    bench_start_batond S3 --threads "$th"
    for ((r = 0; r < reps; r++)); do
        for ((i = 0; i < n_arms; i++)); do
            arm=${arms[$(((i + r) % n_arms))]}
            case $arm in
            llamacpp) run_llama "$th" ;;
            baton_inproc) run_baton "$arm" "$th" local ;;
            baton_batond1) run_baton "$arm" "$th" "127.0.0.1:$S1" ;;
            baton_batond2) run_baton "$arm" "$th" "127.0.0.1:$S2,127.0.0.1:$S3" 1,1 ;;
            esac
        done
    done
    bench_stop "$S1_PID"
    bench_stop "$S2_PID"
    bench_stop "$S3_PID"
done

stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
for arm in "${arms[@]}"; do
    for th in $threads; do
        p=$(get "${arm}_${th}_prefill" 2) d=$(get "${arm}_${th}_decode" 2)
        [ -n "$p" ] || continue
        printf '%s threads=%s prefill_tok_s=%.1f decode_tok_s=%.1f\n' "$arm" "$th" "$p" "$d"
        printf '#   prefill %s..%s, decode %s..%s tok/s, %s repetitions\n' \
            "$(get "${arm}_${th}_prefill" 3)" "$(get "${arm}_${th}_prefill" 4)" \
            "$(get "${arm}_${th}_decode" 3)" "$(get "${arm}_${th}_decode" 4)" \
            "$(get "${arm}_${th}_decode" 5)"
        case $arm in baton_batond1) sv=1 st=1 ;; baton_batond2) sv=2 st=2 ;; *) sv=0 st=1 ;; esac
        bench_json_row arm="$arm" servers="$sv" stages="$st" threads="$th" prefill_tok_s="$p" decode_tok_s="$d" \
            prefill_min="$(get "${arm}_${th}_prefill" 3)" prefill_max="$(get "${arm}_${th}_prefill" 4)" \
            decode_min="$(get "${arm}_${th}_decode" 3)" decode_max="$(get "${arm}_${th}_decode" 4)" \
            reps="$(get "${arm}_${th}_decode" 5)" prompt="$n_prompt" generated="$n_gen"
    done
done
bench_json_write "$json" compare-llamacpp
for th in $threads; do
    lp=$(get "llamacpp_${th}_prefill" 2) ld=$(get "llamacpp_${th}_decode" 2)
    bp=$(get "baton_inproc_${th}_prefill" 2) bd=$(get "baton_inproc_${th}_decode" 2)
    if [ -n "$lp" ]; then
        awk -v th="$th" -v bp="$bp" -v bd="$bd" -v lp="$lp" -v ld="$ld" 'BEGIN {
            printf "ratio baton_inproc/llamacpp threads=%s prefill=%.3f decode=%.3f\n",
                   th, bp / lp, bd / ld }'
    fi
    for s in baton_batond1 baton_batond2; do
        sd=$(get "${s}_${th}_decode" 2)
        awk -v s="$s" -v th="$th" -v sd="$sd" -v bd="$bd" 'BEGIN {
            printf "ratio %s/baton_inproc threads=%s decode=%.3f cost_pct=%.1f\n",
                   s, th, sd / bd, 100 * (1 - sd / bd) }'
    done
done
if [ "$llama_ok" = 1 ]; then
    echo "# node-llama-cpp creates a thread per decode call: its 2-thread decode is slower than"
    echo "# its 1-thread decode, so the decode comparison that counts is the one at 1 thread."
fi
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
