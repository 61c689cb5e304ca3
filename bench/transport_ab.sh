#!/usr/bin/env bash
# Keyed transport of two builds side by side: 64 MiB SET_TENSOR / GET_TENSOR
# with frame MACs (and optionally --encrypt), each build's bench_transport
# against its own batond, arms alternating ABBA in one run. For changes to
# the frame path (src/auth/frame.c, src/net, src/server/dispatch.c) that
# bench/transport.sh, which has one build, cannot compare.
#
#   bench/transport_ab.sh --old DIR --new DIR [--reps R] [--mib M] [--encrypt]
#
# DIR: a build tree with batond and bench/bench_transport (e.g. a worktree
# of the older commit, `cmake -S . -B DIR && cmake --build DIR --target
# batond bench_transport`). --reps: rounds (default 6; each round runs old
# and new once, the order alternating). --mib: the stream size (default 64).
# Prints one `#` line per cell (round, position, arm, MB/s) and then, per
# figure, the medians with min..max and new / old. Figures only, never a
# test.
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/transport_ab.sh $*"

old="" new="" reps=6 mib=64 enc=()
while [ $# -gt 0 ]; do
    case $1 in
    --old | --new | --reps | --mib) [ $# -ge 2 ] || { echo "transport_ab.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --encrypt) enc=(--encrypt); shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "transport_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$old" ] && [ -n "$new" ] || { echo "transport_ab.sh: --old and --new are required (see --help)" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]?$ ]] || { echo "transport_ab.sh: --reps must be 1..99" >&2; exit 2; }
[[ $mib =~ ^[1-9][0-9]{0,3}$ ]] || { echo "transport_ab.sh: --mib must be 1..9999" >&2; exit 2; }
for d in "$old" "$new"; do
    for b in batond bench/bench_transport; do
        [ -x "$d/$b" ] || bench_die "$d/$b is missing (build the batond and bench_transport targets there)"
    done
done
BENCH_BATON=$new/baton
[ -x "$BENCH_BATON" ] || BENCH_BATON=$old/baton
[ -x "$BENCH_BATON" ] || bench_die "no baton in $new or $old (for baton keygen)"
bench_header
"$BENCH_BATON" keygen -o "$BENCH_TMP/ab.key" >/dev/null 2>&1 || bench_die "baton keygen failed"
BENCH_BATOND=$old/batond bench_start_batond OLD --key "$BENCH_TMP/ab.key" "${enc[@]+"${enc[@]}"}"
BENCH_BATOND=$new/batond bench_start_batond NEW --key "$BENCH_TMP/ab.key" "${enc[@]+"${enc[@]}"}"
raw=$BENCH_TMP/raw
: >"$raw"
for ((r = 1; r <= reps; r++)); do
    order=(old new)
    [ $((r % 2)) = 0 ] && order=(new old)
    pos=0
    for arm in "${order[@]}"; do
        pos=$((pos + 1))
        if [ "$arm" = old ]; then dir=$old port=$OLD; else dir=$new port=$NEW; fi
        out=$("$dir/bench/bench_transport" "$port" --key "$BENCH_TMP/ab.key" --phase stream \
            --mib-list "$mib") || bench_die "bench_transport ($arm) failed"
        echo "# round $r, position $pos, $arm: $(tr '\n' ' ' <<<"$out")"
        sed "s/^/${arm}_/" <<<"$out" >>"$raw"
    done
done
stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
for fig in set get; do
    k="baton_${fig}_${mib}MiB_MBs"
    o=$(get "old_$k" 2) n=$(get "new_$k" 2)
    [ -n "$o" ] && [ -n "$n" ] || continue
    awk -v f="$fig" -v m="$mib" -v o="$o" -v n="$n" -v omin="$(get "old_$k" 3)" \
        -v omax="$(get "old_$k" 4)" -v nmin="$(get "new_$k" 3)" -v nmax="$(get "new_$k" 4)" \
        -v e="${enc[*]+encrypted}" 'BEGIN {
        printf "%s_%sMiB%s old=%.1f MB/s (%.1f..%.1f) new=%.1f MB/s (%.1f..%.1f) new/old=%.3f\n",
            f, m, (e != "" ? "_encrypted" : "_mac"), o, omin, omax, n, nmin, nmax, n / o }'
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
