#!/usr/bin/env bash
# Batched decode, baton against llama.cpp's llama-batched-bench: same GGUF,
# same threads, same prompt and generation lengths (issue 14).
#
#   bench/batched-llamacpp.sh [--build DIR] [--no-build] [--rounds R]
#                             [--type T] [--threads "1 2"] [--npl 1,8,32]
#                             [-p N] [-n N] [--fa "0 1"] [--model FILE]
#                             [--llamacpp-dir DIR] [--no-llamacpp] [--json FILE]
#
# Arms, per thread count, each run once per round (default 3 rounds), the
# order reversed every other round (A B C, C B A, ...: ABBA):
#   baton                    baton bench --servers local --npl L -p N -n G
#                            --threads T --reps 1 (1 stage, in-process)
#   llamacpp_BUILD_faF       llama-batched-bench -npp N -ntg G -npl L -t T
#                            -fa on|off -c (max L) x (N + G) --output-format
#                            jsonl, BUILD native and prebuilt (from
#                            bench/llamacpp-build.sh in --llamacpp-dir,
#                            default DIR/llamacpp; built when missing)
# Both tools prefill every sequence's own N-token prompt (llama-batched-bench
# without -pps), then decode in steps of L tokens, one per sequence.
# Aggregate decode tok/s (S_TG): llama-batched-bench L x G / (time of its G
# steps); baton bench L x (G - 1) / (time of its G - 1 steps: its first
# token comes from the prefill), so both are the steps' tokens over the
# steps' time, at KV depth N .. N + G. Defaults: T 1 2, L 1,8,32, N 128,
# G 64, the d768 Q8_0 roofline model (DIR/bench-models/d768-T.gguf, made
# with `baton gen-model` if missing).
#
# Output: per arm, thread count and L, `ARM threads=T npl=L s_tg_tok_s=X
# s_pp_tok_s=Y` (medians over the rounds, spread line after it), then per
# thread count and L
#   batched threads=T npl=L baton_s_tg=X llamacpp_s_tg=Y llamacpp_arm=A ratio=X/Y
# (Y: the best llama.cpp arm of that cell) and per thread count the gain
# of batching, `gain threads=T baton_npl32/npl1=X llamacpp_npl32/npl1=Y`
# (first and last L). --no-llamacpp: the baton arm alone. --json FILE:
# the arm rows as JSON (bench_json_write).
# Figures only, never a test.
# Exit status: 0; 1 a build or a run failed; 2 usage (an unknown option, a
# missing or bad value).
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/batched-llamacpp.sh $*"

build=${BUILD_DIR:-$BENCH_SRC/build}
do_build=1 rounds=3 type=q8_0 threads="1 2" npl=1,8,32 n_prompt=128 n_gen=64 fas="0 1" model=""
json="" llama_dir="" use_llama=1
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --rounds | --type | --threads | --npl | -p | -n | --fa | --model | --llamacpp-dir | --json) [ $# -ge 2 ] || { echo "batched-llamacpp.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --npl) npl=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --fa) fas=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --llamacpp-dir) llama_dir=$2; shift 2 ;;
    --no-llamacpp) use_llama=0; shift ;;
    --json) json=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "batched-llamacpp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
[ -n "$llama_dir" ] || llama_dir=$build/llamacpp
case $llama_dir in /*) ;; *) llama_dir=$PWD/$llama_dir ;; esac
[ "$rounds" -ge 1 ] 2>/dev/null || bench_usage_die "--rounds must be >= 1"
[ "$n_gen" -ge 2 ] 2>/dev/null || bench_usage_die "-n must be >= 2"
[[ $npl =~ ^[0-9]+(,[0-9]+)*$ ]] || bench_usage_die "--npl wants B,B,..."
command -v python3 >/dev/null 2>&1 || bench_die "python3 is needed to read the JSON lines"
npl_list=${npl//,/ }
npl_max=$(tr ',' '\n' <<<"$npl" | sort -n | tail -n 1)
npl_first=${npl%%,*} npl_last=${npl##*,}

if [ "$do_build" = 1 ]; then
    bench_build "$build" baton
fi
bench_need_bins "$build" baton
BENCH_BATON=$build/baton
if [ -z "$model" ]; then
    mkdir -p "$build/bench-models"
    model=$build/bench-models/d768-$type.gguf
    if [ ! -f "$model" ]; then
        "$BENCH_BATON" gen-model --layers 12 --dim 768 --ff 2048 --heads 12 --type "$type" --seed 1 \
            -o "$model" >/dev/null 2>&1 || bench_die "gen-model --type $type failed"
    fi
fi
[ -f "$model" ] || bench_die "$model: no such file"
case $model in /*) ;; *) model=$PWD/$model ;; esac

bench_header
bench_host_flags
echo "# model: $model ($(stat -c %s "$model") bytes, $type); prompt $n_prompt tokens per sequence," \
    "generated $n_gen, npl $npl, $rounds rounds"

bench_llamacpp_find "$llama_dir"
if [ "$use_llama" = 0 ]; then
    BENCH_LLAMA_BUILDS=()
    echo "# llamacpp: not run (--no-llamacpp)"
elif [ "${#BENCH_LLAMA_BUILDS[@]}" -lt 2 ]; then
    echo "# llamacpp: building with bench/llamacpp-build.sh --dir $llama_dir (once; minutes)"
    "$BENCH_SRC/bench/llamacpp-build.sh" --dir "$llama_dir" 2>&1 | sed 's/^/#   /' | tail -n 15 || true
    bench_llamacpp_find "$llama_dir"
fi
[ "${#BENCH_LLAMA_BUILDS[@]}" -ge 1 ] || [ "$use_llama" = 0 ] ||
    echo "# llamacpp: not run: no llama-batched-bench could be built in $llama_dir"

raw=$BENCH_TMP/raw
: >"$raw"
run_baton() { # threads
    local th=$1 js=$BENCH_TMP/b.json
    "$BENCH_BATON" bench --model "$model" --servers local --threads "$th" -p "$n_prompt" -n "$n_gen" \
        --npl "$npl" --reps 1 --json "$js" >/dev/null 2>"$BENCH_TMP/bench.err" ||
        { cat "$BENCH_TMP/bench.err" >&2; bench_die "baton bench --npl $npl ($th threads) failed"; }
    python3 - "$js" "$th" >>"$raw" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["npl"]:
    print("baton_%s_%d_s_tg=%.6g" % (sys.argv[2], r["b"], r["s_tg"]["median"]))
    print("baton_%s_%d_s_pp=%.6g" % (sys.argv[2], r["b"], r["s_pp"]["median"]))
PY
}
run_llama() { # build fa threads
    local b=$1 fa=$2 th=$3 out on=off
    [ "$fa" = 1 ] && on=on
    if ! out=$(bench_llamacpp_run "$b" llama-batched-bench -m "$model" -c "$((npl_max * (n_prompt + n_gen)))" \
        -npp "$n_prompt" -ntg "$n_gen" -npl "$npl" -t "$th" -fa "$on" --output-format jsonl 2>&1); then
        echo "# llamacpp_${b}_fa$fa: run failed (threads $th):" >&2
        tail -n 10 <<<"$out" | sed 's/^/#   /' >&2
        return
    fi
    python3 -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{\"n_kv_max\""):
        continue
    r = json.loads(line)
    print("%s_%s_%d_s_tg=%.6g" % (sys.argv[1], sys.argv[2], r["pl"], r["speed_tg"]))
    print("%s_%s_%d_s_pp=%.6g" % (sys.argv[1], sys.argv[2], r["pl"], r["speed_pp"]))
' "llamacpp_${b}_fa${fa}" "$th" <<<"$out" >>"$raw"
}

arms=(baton)
for b in "${BENCH_LLAMA_BUILDS[@]+"${BENCH_LLAMA_BUILDS[@]}"}"; do
    for fa in $fas; do arms+=("llamacpp_${b}_fa$fa"); done
done
n_arms=${#arms[@]}
echo "# arms: ${arms[*]}"
for th in $threads; do
    for ((r = 0; r < rounds; r++)); do
        for ((i = 0; i < n_arms; i++)); do
            if ((r % 2 == 0)); then arm=${arms[$i]}; else arm=${arms[$((n_arms - 1 - i))]}; fi
            case $arm in
            baton) run_baton "$th" ;;
            llamacpp_*)
                a=${arm#llamacpp_}
                run_llama "${a%_fa*}" "${a##*_fa}" "$th"
                ;;
            esac
        done
    done
done

stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
for arm in "${arms[@]}"; do
    for th in $threads; do
        for b in $npl_list; do
            k=${arm}_${th}_${b}
            tg=$(get "${k}_s_tg" 2) pp=$(get "${k}_s_pp" 2)
            [ -n "$tg" ] || continue
            printf '%s threads=%s npl=%s s_tg_tok_s=%.1f s_pp_tok_s=%.1f\n' "$arm" "$th" "$b" "$tg" "$pp"
            printf '#   s_tg %s..%s, s_pp %s..%s tok/s, %s rounds\n' "$(get "${k}_s_tg" 3)" \
                "$(get "${k}_s_tg" 4)" "$(get "${k}_s_pp" 3)" "$(get "${k}_s_pp" 4)" "$(get "${k}_s_tg" 5)"
            bench_json_row arm="$arm" type="$type" threads="$th" npl="$b" s_tg_tok_s="$tg" \
                s_tg_min="$(get "${k}_s_tg" 3)" s_tg_max="$(get "${k}_s_tg" 4)" s_pp_tok_s="$pp" \
                rounds="$(get "${k}_s_tg" 5)" prompt="$n_prompt" generated="$n_gen"
        done
    done
done
bench_json_write "$json" batched-llamacpp
best_llama() { # threads npl -> "value arm" of the best llama.cpp arm
    local th=$1 b=$2 arm x v="" a=""
    for arm in "${arms[@]}"; do
        case $arm in llamacpp_*) ;; *) continue ;; esac
        x=$(get "${arm}_${th}_${b}_s_tg" 2)
        [ -n "$x" ] || continue
        if [ -z "$v" ] || awk -v x="$x" -v v="$v" 'BEGIN { exit !(x > v) }'; then v=$x a=$arm; fi
    done
    echo "$v $a"
}
for th in $threads; do
    for b in $npl_list; do
        bt=$(get "baton_${th}_${b}_s_tg" 2)
        read -r lt la <<<"$(best_llama "$th" "$b")"
        if [ -n "${lt:-}" ]; then
            awk -v th="$th" -v b="$b" -v bt="$bt" -v lt="$lt" -v la="$la" 'BEGIN {
                printf "batched threads=%s npl=%s baton_s_tg=%.1f llamacpp_s_tg=%.1f llamacpp_arm=%s ratio=%.3f\n",
                       th, b, bt, lt, la, bt / lt }'
        else
            printf 'batched threads=%s npl=%s baton_s_tg=%.1f llamacpp_s_tg=none\n' "$th" "$b" "$bt"
        fi
    done
    b1=$(get "baton_${th}_${npl_first}_s_tg" 2) bn=$(get "baton_${th}_${npl_last}_s_tg" 2)
    read -r l1 _ <<<"$(best_llama "$th" "$npl_first")"
    read -r ln _ <<<"$(best_llama "$th" "$npl_last")"
    awk -v th="$th" -v f="$npl_first" -v l="$npl_last" -v b1="$b1" -v bn="$bn" -v l1="${l1:-0}" \
        -v ln="${ln:-0}" 'BEGIN {
        printf "gain threads=%s baton_npl%s/npl%s=%.2f", th, l, f, bn / b1
        if (l1 > 0) printf " llamacpp_npl%s/npl%s=%.2f", l, f, ln / l1
        printf "\n" }'
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
