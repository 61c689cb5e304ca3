#!/usr/bin/env bash
# Decode speed against the memory-bandwidth roofline.
#
#   bench/roofline.sh [--build DIR] [--no-build] [--reps R] [--threads "1 2"]
#                     [--types "f16 q8_0 q4_0"] [-n N] [--shape d768|d4096]
#                     [--small] [--json FILE]
#
# In one run: builds (unless --no-build) baton and bench/triad.c in DIR
# (default $BUILD_DIR or build), generates a llama of dim 768, 12 layers,
# ff 2048, 12 heads (about 86M parameters; `baton gen-model`, seed 1) per
# weight type into DIR/bench-models/, then for R repetitions (default 5) and
# each thread count: a STREAM-like triad with that many threads, and
# `baton bench --servers local --threads N -p 16 -n N` (default n 65: 64
# decode steps) on each type, the type order rotating per repetition.
# --shape d4096 (default d768): instead, 2 layers of Llama 3 8B's shape (dim 4096, ff
# 14336, 32 heads, 8 KV heads; about 436M parameters, 0.46 GB in Q8_0, far
# beyond any cache): a step is almost only its matrices, as in the models
# people split, where d768's small matrices leave a larger share to the
# rest of the step (attention, norms, the hand-offs between ops).
#
# Each repetition also measures, per thread count, the read-only bandwidth
# (`bench_triad --kernel read`: the ceiling of a decode step, which only
# reads its weights) at each model's working-set size (its weight bytes per
# token) and at 1 GiB (beyond any cache), and the STREAM-like triad.
#
# One line per cell (the medians over the repetitions):
#   TYPE threads=N decode_tok_s=X bandwidth_GBs=Y roofline=Z read_1GiB_GBs=A triad_GBs=B roofline_triad=C
# Y = the read-only stream's best pass at the model's size and N threads,
# median over repetitions; Z = X * (weight bytes per token) / Y, where
# weight bytes per token = every matrix read per decode step (all 2-D
# tensors but the token embedding, from `baton inspect --json`); A = the
# read-only stream at 1 GiB; B = the triad's best pass (STREAM's
# convention), C = X * bytes / B (secondary: the triad, two reads and a
# write, understates a read-only ceiling, by up to 1.8x on some hosts).
# A `#` line after each cell gives the spread: decode min..max, read-only
# min..max, and the median, min and max of the per-repetition ratio (decode
# and read-only stream of the same repetition).
# --json FILE: the cells also as JSON (bench_json_write in bench/lib.sh: a
# row per cell with type, threads, decode_tok_s, bandwidth_GBs, roofline and
# their spread; read by bench/plot.py).
# --types: any of `baton gen-model --type` (f32, f16, q8_0, q4_0, q5_0,
# q5_1, q2_k..q6_k, q3_k_m, q4_k_m, q5_k_m).
# --small: a 2-layer dim-64 model, 1 repetition, n 4 (for the smoke test;
# dim 64 holds no K-quant: q2_k..q6_k need rows of 256, the _m mixes fall
# back to Q4_0/Q5_0/Q5_1/Q8_0 there).
# Exit status: 0; 1 a build, a model or a run failed; 2 usage (an unknown
# option, a missing or bad value). Figures only, never a test.
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/roofline.sh $*"

build=${BUILD_DIR:-$BENCH_SRC/build}
do_build=1 reps=5 threads="1 2" types="f16 q8_0 q4_0" n_gen=65 small=0 json_out="" shape=d768
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --reps | --threads | --types | -n | --json | --shape) [ $# -ge 2 ] || { echo "roofline.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --small) small=1; reps=1; n_gen=4; shift ;;
    --json) json_out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "roofline.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
[ "$reps" -ge 1 ] 2>/dev/null || bench_usage_die "--reps must be >= 1"
[ "$n_gen" -ge 2 ] 2>/dev/null || bench_usage_die "-n must be >= 2"
case $shape in d768 | d4096) ;; *) bench_usage_die "--shape must be d768 or d4096, not '$shape'" ;; esac
[ "$small" = 1 ] && [ "$shape" != d768 ] && bench_usage_die "--small and --shape $shape exclude each other"

if [ "$do_build" = 1 ]; then
    bench_build "$build" baton bench_triad
fi
bench_need_bins "$build" baton bench/bench_triad
BENCH_BATON=$build/baton
triad=$build/bench/bench_triad

if [ "$small" = 1 ]; then
    dims=(--layers 2 --dim 64 --ff 128 --heads 4) mib=16 passes=3 tag=small
elif [ "$shape" = d4096 ]; then
    dims=(--layers 2 --dim 4096 --ff 14336 --heads 32 --kv-heads 8) mib=512 passes=4 tag=d4096
else
    dims=(--layers 12 --dim 768 --ff 2048 --heads 12) mib=128 passes=10 tag=d768
fi
models=$build/bench-models
mkdir -p "$models"
declare -A model wbytes
for t in $types; do
    model[$t]=$models/$tag-$t.gguf
    if [ ! -f "${model[$t]}" ]; then
        # gen-model's own message says why (e.g. --small's dim 64 holds no
        # K-quant, which needs rows of 256; q4_k_m falls back)
        gerr=$("$BENCH_BATON" gen-model "${dims[@]}" --type "$t" --seed 1 -o "${model[$t]}" 2>&1 >/dev/null) ||
            bench_die "gen-model --type $t failed: $gerr"
    fi
    wbytes[$t]=$(bench_weight_bytes_per_token "${model[$t]}")
done

bench_header
echo "# model: gen-model ${dims[*]} --seed 1 (vocab 512); decode: baton bench --servers local -p 16 -n $n_gen --reps 1 per repetition"
echo "# triad: bench_triad --mib $mib --passes $passes (3 arrays of $mib MiB, 24 B per element counted)"
declare -A rmib
for t in $types; do
    echo "# weight bytes per token: $t ${wbytes[$t]}"
    rmib[$t]=$(((wbytes[$t] + (1 << 20) - 1) >> 20))
    echo "# read-only stream: $t bench_triad --kernel read --mib ${rmib[$t]} --passes $passes; and --mib 1024"
done
read_best() { # THREADS MIB: best GB/s of a read-only pass
    "$triad" --kernel read --threads "$1" --passes "$passes" --mib "$2" |
        sed -n 's/.*best_GBs=\([0-9.]*\).*/\1/p'
}

raw=$BENCH_TMP/raw
: >"$raw"
read -r -a type_list <<<"$types"
n_types=${#type_list[@]}
for ((r = 0; r < reps; r++)); do
    for th in $threads; do
        line=$("$triad" --threads "$th" --passes "$passes" --mib "$mib") || bench_die "triad failed"
        tbw=$(sed -n 's/.*best_GBs=\([0-9.]*\).*/\1/p' <<<"$line")
        echo "triad_${th}=$tbw" >>"$raw"
        big=$(read_best "$th" 1024) && [ -n "$big" ] || bench_die "read-only stream failed"
        echo "read1g_${th}=$big" >>"$raw"
        for ((i = 0; i < n_types; i++)); do
            t=${type_list[$(((i + r) % n_types))]}
            bw=$(read_best "$th" "${rmib[$t]}") && [ -n "$bw" ] || bench_die "read-only stream failed"
            echo "bw_${t}_${th}=$bw" >>"$raw"
            json=$BENCH_TMP/b.json
            "$BENCH_BATON" bench --model "${model[$t]}" --servers local --threads "$th" -p 16 \
                -n "$n_gen" --reps 1 --json "$json" >/dev/null 2>"$BENCH_TMP/bench.err" ||
                { cat "$BENCH_TMP/bench.err" >&2; bench_die "baton bench ($t, $th threads) failed"; }
            tok=$(bench_json_median "$json" decode)
            echo "tok_${t}_${th}=$tok" >>"$raw"
            awk -v x="$tok" -v b="${wbytes[$t]}" -v y="$bw" -v k="ratio_${t}_${th}" \
                'BEGIN { printf "%s=%.6f\n", k, x * b / (y * 1e9) }' >>"$raw"
        done
    done
done

stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
for t in $types; do
    for th in $threads; do
        x=$(get "tok_${t}_${th}" 2) y=$(get "bw_${t}_${th}" 2)
        g=$(get "read1g_${th}" 2) tr=$(get "triad_${th}" 2)
        awk -v t="$t" -v th="$th" -v x="$x" -v y="$y" -v b="${wbytes[$t]}" -v g="$g" -v tr="$tr" 'BEGIN {
            printf "%s threads=%s decode_tok_s=%.1f bandwidth_GBs=%.2f roofline=%.3f read_1GiB_GBs=%.2f triad_GBs=%.2f roofline_triad=%.3f\n",
                   toupper(t), th, x, y, x * b / (y * 1e9), g, tr, x * b / (tr * 1e9) }'
        printf '#   decode %s..%s tok/s, read-only %s..%s GB/s, per-repetition roofline median %.3f (%.3f..%.3f), %s repetitions\n' \
            "$(get "tok_${t}_${th}" 3)" "$(get "tok_${t}_${th}" 4)" "$(get "bw_${t}_${th}" 3)" \
            "$(get "bw_${t}_${th}" 4)" "$(get "ratio_${t}_${th}" 2)" "$(get "ratio_${t}_${th}" 3)" \
            "$(get "ratio_${t}_${th}" 4)" "$reps"
        bench_json_row type="$t" threads="$th" decode_tok_s="$x" bandwidth_GBs="$y" \
            read_1gib_GBs="$g" triad_GBs="$tr" \
            roofline_triad="$(awk -v x="$x" -v y="$tr" -v b="${wbytes[$t]}" 'BEGIN { printf "%.4f", x * b / (y * 1e9) }')" \
            roofline="$(awk -v x="$x" -v y="$y" -v b="${wbytes[$t]}" 'BEGIN { printf "%.4f", x * b / (y * 1e9) }')" \
            roofline_rep_median="$(get "ratio_${t}_${th}" 2)" roofline_rep_min="$(get "ratio_${t}_${th}" 3)" \
            roofline_rep_max="$(get "ratio_${t}_${th}" 4)" decode_min="$(get "tok_${t}_${th}" 3)" \
            decode_max="$(get "tok_${t}_${th}" 4)" weight_bytes_per_token="${wbytes[$t]}" reps="$reps"
    done
done
bench_json_write "$json_out" roofline
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
