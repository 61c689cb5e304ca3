#!/usr/bin/env bash
# baton against llama.cpp's llama-bench on CPU, same GGUF files, same thread
# counts (issues 7 and 17).
#
#   bench/compare-llamacpp.sh [--build DIR] [--no-build] [--reps R]
#                             [--types "q8_0 q4_0 f16"] [--threads "1 2"]
#                             [-p N] [-n N] [--depth D] [--model FILE]
#                             [--llamacpp-dir DIR] [--no-llamacpp] [--small]
#                             [--json FILE]
#
# For each weight type (default q8_0 q4_0 f16; --type T for one) and
# thread count, arms run R times (default 5, at least 5 unless --small),
# the arm order rotating per repetition:
#   llamacpp_native    llama-bench of the native build (-DGGML_NATIVE=ON)
#   llamacpp_prebuilt  llama-bench linked to the prebuilt libraries of the
#                      npm package @node-llama-cpp/linux-x64 3.21.1
#                      (both from bench/llamacpp-build.sh, in --llamacpp-dir,
#                      default DIR/llamacpp; built by this script when
#                      missing, except with --small); one call per
#                      repetition: -p N -n G -d 0,D -fa 0,1 -t T -r 1
#                      -o jsonl, i.e. flash attention off and on
#                      (llamacpp_native_fa0, ..._fa1, ...)
#   baton_inproc       baton bench --servers local (and a second call with
#                      -p 1 -n G+1 for the decode at depth 0)
#   baton_batond1      baton bench over one local batond (--threads T)
#   baton_batond2      baton bench over two local batond (--split 1,1, each
#                      --threads T; a single stream runs one stage at a time)
# The servers are started once per thread count on --port 0 and stopped by
# PID. Cells: prefill = pp N at depth 0 (baton: N prompt tokens / time to
# the first generated token); decode = tg G at depth D (default D = N;
# baton: the G - 1 steps after an N-token prompt, (G - 1) / their time);
# decode_d0 = tg G at depth 0 (baton: -p 1 -n G+1). llama-bench's figure is
# its avg_ts of the one repetition (after its warm-up run); baton bench's
# the median of its one repetition. Defaults: N 128, G 64.
# The models (default: DIR/bench-models/d768-T.gguf, the roofline model,
# made with `baton gen-model` if missing) are shared by every arm; --model
# FILE uses FILE, labelled with --type (default q8_0).
#
# Output, per type and thread count: `ARM type=T threads=N prefill_tok_s=X
# decode_tok_s=Y decode_d0_tok_s=Z` (medians; batond arms without
# decode_d0), a `#` spread line after each, then
#   llamacpp_best type=T threads=N prefill_tok_s=X decode_tok_s=Y
#                 decode_d0_tok_s=Z prefill_arm=A decode_arm=B decode_d0_arm=C
#   ratio baton_inproc/llamacpp_best type=T threads=N prefill=X decode=Y
#                 decode_d0=Z
#   ratio baton_batond1/baton_inproc type=T threads=N decode=X cost_pct=C
#   ratio baton_batond2/baton_inproc type=T threads=N decode=X cost_pct=C
# where llamacpp_best is the best llama.cpp arm of each cell (build and
# flash attention); at the end a table of the baton / best llama.cpp ratios.
# If llama.cpp cannot be built or run, the reason is printed and the baton
# arms still run. --json FILE: the arm lines also as JSON (a row per arm,
# type and thread count with arm, type, servers (batond: 0 in-process and for
# llama.cpp, 1 or 2), stages, threads, prefill_tok_s, decode_tok_s,
# decode_d0_tok_s and their spread; arm "llamacpp" is llamacpp_best; see
# bench_json_write in bench/lib.sh; read by bench/plot.py).
# --small: tiny model, one type (q8_0), 1 repetition, -p 8 -n 4; llama.cpp
# neither built nor needed (run when already built), no network (for the
# smoke test). Figures only, never a test.
# Exit status: 0; 1 a build or a run failed; 2 usage (an unknown option, a
# missing or bad value).
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/compare-llamacpp.sh $*"

build=${BUILD_DIR:-$BENCH_SRC/build}
do_build=1 reps=5 types="" threads="1 2" n_prompt=128 n_gen=64 depth="" model="" use_llama=1
small=0 json="" llama_dir=""
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --reps | --type | --types | --threads | -p | -n | --depth | --model | --llamacpp-dir | --json) [ $# -ge 2 ] || { echo "compare-llamacpp.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --reps) reps=$2; shift 2 ;;
    --type | --types) types=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --llamacpp-dir) llama_dir=$2; shift 2 ;;
    --no-llamacpp) use_llama=0; shift ;;
    --json) json=$2; shift 2 ;;
    --small) small=1; reps=1; n_prompt=8; n_gen=4; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-llamacpp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
[ -n "$llama_dir" ] || llama_dir=$build/llamacpp
case $llama_dir in /*) ;; *) llama_dir=$PWD/$llama_dir ;; esac
if [ -z "$types" ]; then
    if [ "$small" = 1 ] || [ -n "$model" ]; then types=q8_0; else types="q8_0 q4_0 f16"; fi
fi
[ -n "$model" ] && [ "$(wc -w <<<"$types")" != 1 ] && bench_usage_die "--model takes one --type"
[ -n "$depth" ] || depth=$n_prompt
[ "$reps" -ge 1 ] 2>/dev/null || bench_usage_die "--reps must be >= 1"
if [ "$small" = 0 ] && [ "$reps" -lt 5 ]; then bench_usage_die "--reps must be >= 5"; fi
[ "$n_gen" -ge 2 ] 2>/dev/null || bench_usage_die "-n must be >= 2"
[ "$depth" -ge 1 ] 2>/dev/null || bench_usage_die "--depth must be >= 1"

if [ "$do_build" = 1 ]; then
    bench_build "$build" baton batond
fi
bench_need_bins "$build" baton batond
BENCH_BATON=$build/baton
BENCH_BATOND=$build/batond

declare -A models
for type in $types; do
    m=$model
    if [ -z "$m" ]; then
        mkdir -p "$build/bench-models"
        if [ "$small" = 1 ]; then
            m=$build/bench-models/small-$type.gguf
            dims=(--layers 2 --dim 64 --ff 128 --heads 4)
        else
            m=$build/bench-models/d768-$type.gguf
            dims=(--layers 12 --dim 768 --ff 2048 --heads 12)
        fi
        if [ ! -f "$m" ]; then
            "$BENCH_BATON" gen-model "${dims[@]}" --type "$type" --seed 1 -o "$m" >/dev/null 2>&1 ||
                bench_die "gen-model --type $type failed"
        fi
    fi
    [ -f "$m" ] || bench_die "$m: no such file"
    case $m in /*) ;; *) m=$PWD/$m ;; esac
    models[$type]=$m
done

bench_header
bench_host_flags
for type in $types; do
    echo "# model $type: ${models[$type]} ($(stat -c %s "${models[$type]}") bytes)"
done
echo "# prefill: pp$n_prompt at depth 0; decode: tg$n_gen at depth $depth; decode_d0: tg$n_gen at depth 0"

# --- llama.cpp: llama-bench of bench/llamacpp-build.sh -----------------------
llama_builds=()
comment_lines() { sed 's/^/#   /'; }
llama_setup() {
    local out b
    bench_llamacpp_find "$llama_dir"
    if [ "${#BENCH_LLAMA_BUILDS[@]}" -lt 2 ] && [ "$small" = 0 ]; then
        echo "# llamacpp: building with bench/llamacpp-build.sh --dir $llama_dir (once; minutes)"
        if ! out=$("$BENCH_SRC/bench/llamacpp-build.sh" --dir "$llama_dir" 2>&1); then
            comment_lines <<<"$out" | tail -n 15
        fi
        bench_llamacpp_find "$llama_dir"
    fi
    if [ "${#BENCH_LLAMA_BUILDS[@]}" = 0 ]; then
        if [ "$small" = 1 ]; then
            echo "# llamacpp: not run: no llama-bench in $llama_dir (--small does not build it)"
        else
            echo "# llamacpp: not run: no llama-bench could be built in $llama_dir"
        fi
        return
    fi
    for b in "${BENCH_LLAMA_BUILDS[@]}"; do
        # one short run: the tool starts, loads the model, reports its backend
        if ! out=$(bench_llamacpp_run "$b" llama-bench -m "${models[${types%% *}]}" -p 8 -n 0 \
            -r 1 -t 1 -o jsonl --no-warmup 2>&1); then
            echo "# llamacpp_$b: not run: llama-bench failed:"
            comment_lines <<<"$out" | tail -n 10
            continue
        fi
        echo "# llamacpp_$b: $(bench_llamacpp_bin "$b")/llama-bench; $(grep -o '"build_commit": "[^"]*"' <<<"$out" |
            head -n 1), $(grep -o '"cpu_info": "[^"]*"' <<<"$out" | head -n 1), $(grep -o \
                '"backends": "[^"]*"' <<<"$out" | head -n 1)"
        grep -i 'load_backend\|CPU :' <<<"$out" | sed "s/^/# llamacpp_$b: /" | head -n 3 || true
        llama_builds+=("$b")
    done
}
if [ "$use_llama" = 1 ]; then
    llama_setup
else
    echo "# llamacpp: not run (--no-llamacpp)"
fi

# --- the arms ------------------------------------------------------------------
raw=$BENCH_TMP/raw
: >"$raw"
run_baton() { # type arm threads servers [split]
    local type=$1 arm=$2 th=$3 servers=$4 split=${5:-} js=$BENCH_TMP/b.json
    local extra=()
    [ -n "$split" ] && extra=(--split "$split")
    "$BENCH_BATON" bench --model "${models[$type]}" --servers "$servers" "${extra[@]+"${extra[@]}"}" \
        --threads "$th" -p "$n_prompt" -n "$n_gen" --reps 1 --json "$js" \
        >/dev/null 2>"$BENCH_TMP/bench.err" ||
        { cat "$BENCH_TMP/bench.err" >&2; bench_die "baton bench ($arm, $type, $th threads) failed"; }
    echo "${type}_${arm}_${th}_prefill=$(bench_json_median "$js" prefill)" >>"$raw"
    echo "${type}_${arm}_${th}_decode=$(bench_json_median "$js" decode)" >>"$raw"
    if [ "$arm" = baton_inproc ]; then
        "$BENCH_BATON" bench --model "${models[$type]}" --servers "$servers" --threads "$th" \
            -p 1 -n "$((n_gen + 1))" --reps 1 --json "$js" >/dev/null 2>"$BENCH_TMP/bench.err" ||
            { cat "$BENCH_TMP/bench.err" >&2; bench_die "baton bench -p 1 ($arm, $type, $th threads) failed"; }
        echo "${type}_${arm}_${th}_decode_d0=$(bench_json_median "$js" decode)" >>"$raw"
    fi
}
# llama-bench -o jsonl: a line per test; keys n_prompt, n_gen, n_depth,
# flash_attn, avg_ts
run_llama() { # type build threads
    local type=$1 b=$2 th=$3 out
    if ! out=$(bench_llamacpp_run "$b" llama-bench -m "${models[$type]}" -p "$n_prompt" -n "$n_gen" \
        -d "0,$depth" -fa 0,1 -t "$th" -r 1 -o jsonl 2>"$BENCH_TMP/llama.err"); then
        echo "# llamacpp_$b: run failed ($type, threads $th):" >&2
        comment_lines <"$BENCH_TMP/llama.err" | tail -n 10 >&2
        return
    fi
    awk -v pre="${type}_llamacpp_${b}" -v th="$th" -v np="$n_prompt" -v ng="$n_gen" -v d="$depth" '
        function num(key,   s) {
            if (!match($0, "\"" key "\": -?[0-9.eE+-]+")) return ""
            s = substr($0, RSTART, RLENGTH); sub(/.*: /, "", s); return s + 0
        }
        /^\{/ {
            p = num("n_prompt"); g = num("n_gen"); dd = num("n_depth"); fa = num("flash_attn")
            ts = num("avg_ts")
            if (fa != 0 && fa != 1) next
            cell = ""
            if (p == np && g == 0 && dd == 0) cell = "prefill"
            else if (p == 0 && g == ng && dd == d) cell = "decode"
            else if (p == 0 && g == ng && dd == 0) cell = "decode_d0"
            if (cell != "") printf "%s_fa%d_%s_%s=%s\n", pre, fa, th, cell, ts
        }' <<<"$out" >>"$raw"
}

arms=()
for b in "${llama_builds[@]+"${llama_builds[@]}"}"; do arms+=("llamacpp_$b"); done
arms+=(baton_inproc baton_batond1 baton_batond2)
n_arms=${#arms[@]}
for th in $threads; do
    bench_start_batond S1 --threads "$th"
    bench_start_batond S2 --threads "$th"
    bench_start_batond S3 --threads "$th"
    for type in $types; do
        for ((r = 0; r < reps; r++)); do
            for ((i = 0; i < n_arms; i++)); do
                arm=${arms[$(((i + r) % n_arms))]}
                case $arm in
                llamacpp_*) run_llama "$type" "${arm#llamacpp_}" "$th" ;;
                baton_inproc) run_baton "$type" "$arm" "$th" local ;;
                baton_batond1) run_baton "$type" "$arm" "$th" "127.0.0.1:$S1" ;;
                baton_batond2) run_baton "$type" "$arm" "$th" "127.0.0.1:$S2,127.0.0.1:$S3" 1,1 ;;
                esac
            done
        done
    done
    bench_stop "$S1_PID"
    bench_stop "$S2_PID"
    bench_stop "$S3_PID"
done

# --- results ---------------------------------------------------------------------
stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
report_arms=()
for b in "${llama_builds[@]+"${llama_builds[@]}"}"; do
    report_arms+=("llamacpp_${b}_fa0" "llamacpp_${b}_fa1")
done
report_arms+=(baton_inproc baton_batond1 baton_batond2)
ratios=$BENCH_TMP/ratios
: >"$ratios"
for type in $types; do
    for th in $threads; do
        for arm in "${report_arms[@]}"; do
            k=${type}_${arm}_${th}
            p=$(get "${k}_prefill" 2) d=$(get "${k}_decode" 2) d0=$(get "${k}_decode_d0" 2)
            [ -n "$p" ] || continue
            printf '%s type=%s threads=%s prefill_tok_s=%.1f decode_tok_s=%.1f' "$arm" "$type" "$th" "$p" "$d"
            [ -n "$d0" ] && printf ' decode_d0_tok_s=%.1f' "$d0"
            printf '\n#   prefill %s..%s, decode %s..%s' "$(get "${k}_prefill" 3)" "$(get "${k}_prefill" 4)" \
                "$(get "${k}_decode" 3)" "$(get "${k}_decode" 4)"
            [ -n "$d0" ] && printf ', decode_d0 %s..%s' "$(get "${k}_decode_d0" 3)" "$(get "${k}_decode_d0" 4)"
            printf ' tok/s, %s repetitions\n' "$(get "${k}_decode" 5)"
            case $arm in baton_batond1) sv=1 st=1 ;; baton_batond2) sv=2 st=2 ;; *) sv=0 st=1 ;; esac
            extra=()
            [ -n "$d0" ] && extra=(decode_d0_tok_s="$d0" decode_d0_min="$(get "${k}_decode_d0" 3)"
                decode_d0_max="$(get "${k}_decode_d0" 4)")
            case $arm in llamacpp_*) extra+=(flash_attn="${arm##*_fa}") ;; esac
            bench_json_row arm="$arm" type="$type" servers="$sv" stages="$st" threads="$th" \
                prefill_tok_s="$p" decode_tok_s="$d" \
                prefill_min="$(get "${k}_prefill" 3)" prefill_max="$(get "${k}_prefill" 4)" \
                decode_min="$(get "${k}_decode" 3)" decode_max="$(get "${k}_decode" 4)" \
                "${extra[@]+"${extra[@]}"}" \
                reps="$(get "${k}_decode" 5)" prompt="$n_prompt" generated="$n_gen" depth="$depth"
        done
        # the best llama.cpp arm of each cell
        best=() best_arm=()
        for cell in prefill decode decode_d0; do
            v="" a=""
            for arm in "${report_arms[@]}"; do
                case $arm in llamacpp_*) ;; *) continue ;; esac
                x=$(get "${type}_${arm}_${th}_${cell}" 2)
                [ -n "$x" ] || continue
                if [ -z "$v" ] || awk -v x="$x" -v v="$v" 'BEGIN { exit !(x > v) }'; then v=$x a=$arm; fi
            done
            best+=("$v") best_arm+=("$a")
        done
        [ -n "${best[0]}" ] || continue
        printf 'llamacpp_best type=%s threads=%s prefill_tok_s=%.1f decode_tok_s=%.1f decode_d0_tok_s=%.1f' \
            "$type" "$th" "${best[0]}" "${best[1]}" "${best[2]}"
        printf ' prefill_arm=%s decode_arm=%s decode_d0_arm=%s\n' "${best_arm[@]}"
        bench_json_row arm=llamacpp type="$type" servers=0 stages=1 threads="$th" prefill_tok_s="${best[0]}" \
            decode_tok_s="${best[1]}" decode_d0_tok_s="${best[2]}" prefill_arm="${best_arm[0]}" \
            decode_arm="${best_arm[1]}" decode_d0_arm="${best_arm[2]}" prompt="$n_prompt" \
            generated="$n_gen" depth="$depth"
        bp=$(get "${type}_baton_inproc_${th}_prefill" 2) bd=$(get "${type}_baton_inproc_${th}_decode" 2)
        bd0=$(get "${type}_baton_inproc_${th}_decode_d0" 2)
        awk -v t="$type" -v th="$th" -v bp="$bp" -v bd="$bd" -v bd0="$bd0" -v lp="${best[0]}" \
            -v ld="${best[1]}" -v ld0="${best[2]}" 'BEGIN {
            printf "ratio baton_inproc/llamacpp_best type=%s threads=%s prefill=%.3f decode=%.3f decode_d0=%.3f\n",
                   t, th, bp / lp, bd / ld, bd0 / ld0 }' | tee -a "$ratios"
    done
    for th in $threads; do
        bd=$(get "${type}_baton_inproc_${th}_decode" 2)
        for s in baton_batond1 baton_batond2; do
            sd=$(get "${type}_${s}_${th}_decode" 2)
            awk -v s="$s" -v t="$type" -v th="$th" -v sd="$sd" -v bd="$bd" 'BEGIN {
                printf "ratio %s/baton_inproc type=%s threads=%s decode=%.3f cost_pct=%.1f\n",
                       s, t, th, sd / bd, 100 * (1 - sd / bd) }'
        done
    done
done
bench_json_write "$json" compare-llamacpp
if [ -s "$ratios" ]; then
    # the issue-17 table: baton in-process / best llama.cpp arm, per cell
    echo "# baton_inproc / best llama.cpp (llama-bench: builds ${llama_builds[*]}, fa 0 and 1):"
    awk '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
          col = toupper(f["type"]) " " f["threads"] "t"
          if (!(col in seen)) { seen[col] = 1; cols[++nc] = col }
          v["prefill", col] = f["prefill"]; v["decode", col] = f["decode"]
          v["decode_d0", col] = f["decode_d0"] }
        END {
            line = "# |"; sep = "# |---|"
            for (c = 1; c <= nc; c++) { line = line " | " cols[c]; sep = sep "---|" }
            print line " |"; print sep
            split("prefill decode decode_d0", rows, " ")
            split("prefill (pp" np ")|decode (tg" ng " at depth " d ")|decode (tg" ng " at depth 0)", names, "|")
            for (r = 1; r <= 3; r++) {
                line = "# | " names[r]
                for (c = 1; c <= nc; c++) line = line " | " v[rows[r], cols[c]]
                print line " |"
            }
        }' np="$n_prompt" ng="$n_gen" d="$depth" "$ratios"
fi
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
