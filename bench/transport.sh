#!/usr/bin/env bash
# batond's transport against raw loopback TCP (issue 7).
#
#   bench/transport.sh [--build DIR] [--no-build] [--reps R] [--mib-list 1,64]
#                      [--call-kib-list 0,64,256,1024,4096] [--rtt-iters N] [--handoff-kib K] [--no-key] [--no-pin]
#                      [--small] [--json FILE]
#
# In one run: builds (unless --no-build) batond, baton and the two tools in
# DIR (default $BUILD_DIR or build), starts a bench/rawtcp.c server, two
# batond without a key and two with a key (`baton keygen`; frames MAC'd), all
# on 127.0.0.1 port 0, then runs R repetitions (default 5) of three arms,
# the order rotating per repetition:
#   raw       bench_rawtcp: a bare socket, no protocol; its stream figure is
#             the best over send/recv call sizes (--call-kib-list, KiB;
#             0 = one call for the whole buffer), each size printed in a
#             `#` line, since which call size a raw stream needs to reach
#             its best differs between hosts, and the reader batond itself
#             uses (recv(MSG_DONTWAIT) + poll; "poll reader" in that line);
#             the baseline is the best of those medians
#   nokey     bench_transport against the unkeyed batond pair
#   key       bench_transport against the keyed pair (frame integrity)
# Each arm measures a stream phase (SET/GET or send/get of each size in
# --mib-list, default 1 and 64 MiB; sizes below 64 MiB repeated to 64 MiB)
# and a latency phase (--rtt-iters round trips, default 2000: 1-byte echo
# for raw, 4-byte GET_TENSOR and a trivial GRAPH_COMPUTE for batond; and a
# --handoff-kib boundary hand-off, default 256 KiB: raw = get K KiB then
# send them back; hub = GET from server 1 then SET into server 2; direct =
# COPY_TENSOR_TO from server 1 into a write grant on server 2, keyed arm
# only, as the peer link needs the peer key: "not available" without it or
# in a build without the direct path).
# Pinning: the latency phase runs the
# client and the servers on CPU 0 (`taskset`; a cross-core round trip on
# this VM costs about 4x a same-core one and swings with the load); the
# stream phase is not pinned. --no-pin leaves everything unpinned.
#
# Output: one line per figure, medians over the repetitions, with the raw
# reference and the ratio to it (throughput: baton / raw, >= 0.8 is the
# issue's target at 64 MiB; latency: baton / raw and the difference in us,
# the 4-byte GET's target being a difference <= 10 us):
#   ARM FIGURE=VALUE UNIT raw=RAW ratio=X [diff_us=D]
# followed by `#` lines with min..max. --json FILE: the same figures as
# JSON (a row per line: arm, figure, value, unit, raw, ratio, min, max; see
# bench_json_write in bench/lib.sh; read by bench/plot.py). Figures only,
# never a test.
# --no-key: the keyed batond pair is not started (no key arm, no direct
# hand-off). --small: 1 repetition, --mib-list 1, --call-kib-list 0,256,
# --rtt-iters 40, --handoff-kib 16 (for the smoke test).
# Exit status: 0; 1 a build or a run failed; 2 usage (an unknown option, a
# missing or bad value).
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/transport.sh $*"

build=${BUILD_DIR:-$BENCH_SRC/build}
do_build=1 reps=5 mib_list=1,64 call_list=0,64,256,1024,4096 rtt_iters=2000 handoff_kib=256 use_key=1 pin=1 json=""
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --reps | --mib-list | --call-kib-list | --rtt-iters | --handoff-kib | --json) [ $# -ge 2 ] || { echo "transport.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --reps) reps=$2; shift 2 ;;
    --mib-list) mib_list=$2; shift 2 ;;
    --call-kib-list) call_list=$2; shift 2 ;;
    --rtt-iters) rtt_iters=$2; shift 2 ;;
    --handoff-kib) handoff_kib=$2; shift 2 ;;
    --no-key) use_key=0; shift ;;
    --no-pin) pin=0; shift ;;
    --small) reps=1; mib_list=1; call_list=0,256; rtt_iters=40; handoff_kib=16; shift ;;
    --json) json=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "transport.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
[ "$reps" -ge 1 ] 2>/dev/null || bench_usage_die "--reps must be >= 1"
if [ "$pin" = 1 ] && ! command -v taskset >/dev/null 2>&1; then
    echo "# taskset not found: not pinning"
    pin=0
fi

if [ "$do_build" = 1 ]; then
    bench_build "$build" baton batond bench_rawtcp bench_transport
fi
bench_need_bins "$build" baton batond bench/bench_rawtcp bench/bench_transport
BENCH_BATON=$build/baton
BENCH_BATOND=$build/batond
rawtcp=$build/bench/bench_rawtcp
transport=$build/bench/bench_transport

bench_header
echo "# sizes: $mib_list MiB; round trips: $rtt_iters; hand-off: $handoff_kib KiB; pinned latency phase: $([ "$pin" = 1 ] && echo "yes, CPU 0" || echo no)"

# servers
"$rawtcp" serve --port-file "$BENCH_TMP/port.raw" 2>"$BENCH_TMP/raw.log" &
RAW_PID=$!
BENCH_PIDS+=("$RAW_PID")
for _ in $(seq 400); do [ -s "$BENCH_TMP/port.raw" ] && break; sleep 0.025; done
[ -s "$BENCH_TMP/port.raw" ] || bench_die "rawtcp server did not start"
RAW=$(cat "$BENCH_TMP/port.raw")
bench_start_batond A1
bench_start_batond A2
arms=(raw nokey)
server_pids=("$RAW_PID" "$A1_PID" "$A2_PID")
direct=()
if [ "$use_key" = 1 ]; then
    "$BENCH_BATON" keygen -o "$BENCH_TMP/bench.key" >/dev/null 2>&1 || bench_die "baton keygen failed"
    "$BENCH_BATON" keygen -o "$BENCH_TMP/peer.key" >/dev/null 2>&1 || bench_die "baton keygen failed"
    # The direct path needs the peer key on both servers and server 2 on
    # server 1's allow-list (--peer); a build without it runs the hub only.
    if bench_try_start_batond K2 --key "$BENCH_TMP/bench.key" --peer-key "$BENCH_TMP/peer.key" &&
        bench_try_start_batond K1 --key "$BENCH_TMP/bench.key" --peer-key "$BENCH_TMP/peer.key" \
            --peer "127.0.0.1:$K2"; then
        direct=(--direct)
    else
        [ -n "${K2_PID:-}" ] && bench_stop "$K2_PID"
        bench_start_batond K1 --key "$BENCH_TMP/bench.key"
        bench_start_batond K2 --key "$BENCH_TMP/bench.key"
    fi
    arms+=(key)
    server_pids+=("$K1_PID" "$K2_PID")
fi
all_cpus=$(seq -s, 0 $(($(nproc) - 1)))
pin_servers() { # CPU list
    local p
    [ "$pin" = 1 ] || return 0
    for p in "${server_pids[@]}"; do taskset -a -p -c "$1" "$p" >/dev/null; done
}
client() { # CPU list, command...
    local cpus=$1
    shift
    if [ "$pin" = 1 ]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

raw=$BENCH_TMP/raw
: >"$raw"
n_arms=${#arms[@]}
for phase in stream rtt; do
    if [ "$phase" = rtt ]; then pin_servers 0; cpus=0; else pin_servers "$all_cpus"; cpus=$all_cpus; fi
    for ((r = 0; r < reps; r++)); do
        for ((i = 0; i < n_arms; i++)); do
            arm=${arms[$(((i + r) % n_arms))]}
            case $arm in
            raw)
                client "$cpus" "$rawtcp" run "$RAW" --phase "$phase" --mib-list "$mib_list" \
                    --call-kib-list "$call_list" \
                    --rtt-iters "$rtt_iters" --handoff-kib "$handoff_kib" >"$BENCH_TMP/out" ||
                    bench_die "rawtcp run failed" ;;
            nokey)
                client "$cpus" "$transport" "$A1" --port2 "$A2" --phase "$phase" \
                    --mib-list "$mib_list" --rtt-iters "$rtt_iters" --handoff-kib "$handoff_kib" \
                    >"$BENCH_TMP/out" || bench_die "transport (no key) failed" ;;
            key)
                client "$cpus" "$transport" "$K1" --port2 "$K2" --key "$BENCH_TMP/bench.key" \
                    --phase "$phase" --mib-list "$mib_list" --rtt-iters "$rtt_iters" \
                    --handoff-kib "$handoff_kib" "${direct[@]+"${direct[@]}"}" >"$BENCH_TMP/out" ||
                    bench_die "transport (key) failed" ;;
            esac
            sed "s/^/${arm}_/" "$BENCH_TMP/out" >>"$raw"
        done
    done
done
pin_servers "$all_cpus"

stats=$BENCH_TMP/stats
bench_stats <"$raw" >"$stats"
# The raw baseline of a stream is the best median over the call sizes and
# the poll reader (its stats line replaces rawtcp's per-repetition best,
# whose max over six noisy figures in every repetition sat above every
# call size's own median), so the ratios compare medians with a median.
IFS=, read -r -a sizes <<<"$mib_list"
IFS=, read -r -a calls <<<"$call_list"
for m in "${sizes[@]}"; do
    for dir in send get; do
        keys=()
        for c in "${calls[@]}"; do keys+=("raw_raw_${dir}_${m}MiB_call${c}KiB_MBs"); done
        keys+=("raw_raw_${dir}_${m}MiB_poll_MBs")
        awk -v best="raw_raw_${dir}_${m}MiB_MBs" -v list="${keys[*]}" '
            BEGIN { n = split(list, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
            { line[NR] = $0; key[NR] = $1 }
            ($1 in want) && (!found || $2 > bv) { found = 1; bv = $2; bl = $0; bk = $1 }
            END {
                for (i = 1; i <= NR; i++) {
                    if (key[i] == best && found) {
                        split(bl, f, " "); print best, f[2], f[3], f[4], f[5]
                        print "raw_best_of_" best, bk
                    } else print line[i]
                }
            }' "$stats" >"$stats.new"
        mv "$stats.new" "$stats"
    done
done
get() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$stats"; }
spread() { printf '#   min..max %s..%s, %s repetitions\n' "$(get "$1" 3)" "$(get "$1" 4)" "$(get "$1" 5)"; }
# row ARM FIGURE UNIT KEY [RAWKEY]: the JSON row of one figure
row() {
    local rk=()
    [ -n "${5:-}" ] && rk=(raw="$(get "raw_$5" 2)" ratio="$(awk -v v="$(get "${1}_$4" 2)" \
        -v rv="$(get "raw_$5" 2)" 'BEGIN { printf "%.4f", v / rv }')")
    bench_json_row arm="$1" figure="$2" value="$(get "${1}_$4" 2)" unit="$3" \
        "${rk[@]+"${rk[@]}"}" min="$(get "${1}_$4" 3)" max="$(get "${1}_$4" 4)" reps="$(get "${1}_$4" 5)"
}
# throughput: FIGURE KEY RAWKEY
tput() {
    local arm=$1 fig=$2 key=$3 rawkey=$4 v rv
    v=$(get "${arm}_$key" 2) rv=$(get "raw_$rawkey" 2)
    [ -n "$v" ] || return 0
    awk -v a="$arm" -v f="$fig" -v v="$v" -v rv="$rv" 'BEGIN {
        printf "%s %s=%.1f MB/s raw=%.1f ratio=%.3f\n", a, f, v, rv, v / rv }'
    spread "${arm}_$key"
    row "$arm" "$fig" MB/s "$key" "$rawkey"
}
# latency: FIGURE KEY RAWKEY
lat() {
    local arm=$1 fig=$2 key=$3 rawkey=$4 v rv
    v=$(get "${arm}_$key" 2) rv=$(get "raw_$rawkey" 2)
    [ -n "$v" ] || return 0
    awk -v a="$arm" -v f="$fig" -v v="$v" -v rv="$rv" 'BEGIN {
        printf "%s %s=%.2f us raw=%.2f ratio=%.3f diff_us=%.2f\n", a, f, v, rv, v / rv, v - rv }'
    spread "${arm}_$key"
    row "$arm" "$fig" us "$key" "$rawkey"
}
IFS=, read -r -a sizes <<<"$mib_list"
for m in "${sizes[@]}"; do
    for dir in send get; do
        echo "raw ${dir}_${m}MiB=$(get "raw_raw_${dir}_${m}MiB_MBs" 2) MB/s"
        spread "raw_raw_${dir}_${m}MiB_MBs"
        per_call="#   per call size (KiB: median MB/s):"
        IFS=, read -r -a calls <<<"$call_list"
        for c in "${calls[@]}"; do
            per_call+=" $c: $(get "raw_raw_${dir}_${m}MiB_call${c}KiB_MBs" 2)"
        done
        per_call+=" poll reader: $(get "raw_raw_${dir}_${m}MiB_poll_MBs" 2)"
        bestk=$(get "raw_best_of_raw_raw_${dir}_${m}MiB_MBs" 2)
        bestk=${bestk#raw_raw_"${dir}"_"${m}"MiB_}
        bestk=${bestk%_MBs}
        case $bestk in
        poll) bestk="the poll reader" ;;
        call0KiB) bestk="one call" ;;
        call*) bestk=${bestk#call} bestk="${bestk%KiB} KiB calls" ;;
        esac
        echo "$per_call; baseline: $bestk"
        row raw "${dir}_${m}MiB" MB/s "raw_${dir}_${m}MiB_MBs"
    done
done
echo "raw rtt_1B=$(get raw_raw_rtt_us 2) us"
spread raw_raw_rtt_us
row raw rtt_1B us raw_rtt_us
echo "raw handoff_${handoff_kib}KiB=$(get raw_raw_handoff_us 2) us"
spread raw_raw_handoff_us
row raw "handoff_${handoff_kib}KiB" us raw_handoff_us
for arm in "${arms[@]}"; do
    [ "$arm" = raw ] && continue
    for m in "${sizes[@]}"; do
        tput "$arm" "set_${m}MiB" "baton_set_${m}MiB_MBs" "raw_send_${m}MiB_MBs"
        tput "$arm" "get_${m}MiB" "baton_get_${m}MiB_MBs" "raw_get_${m}MiB_MBs"
    done
    lat "$arm" get_4B_rtt baton_get4_rtt_us raw_rtt_us
    lat "$arm" graph_compute_rtt baton_graph_rtt_us raw_rtt_us
    lat "$arm" "handoff_hub_${handoff_kib}KiB" baton_handoff_hub_us raw_handoff_us
    if grep -q "^${arm}_baton_handoff_direct_us=not_available" "$raw"; then
        if [ "$arm" = nokey ]; then
            echo "$arm handoff_direct_${handoff_kib}KiB=not available (the direct path needs keys)"
            bench_json_row arm="$arm" figure="handoff_direct_${handoff_kib}KiB" value="not available"
        else
            echo "$arm handoff_direct_${handoff_kib}KiB=not available (this build has no COPY_TENSOR_TO)"
            bench_json_row arm="$arm" figure="handoff_direct_${handoff_kib}KiB" value="not available"
        fi
    elif grep -q "^${arm}_baton_handoff_direct_us=not_done" "$raw"; then
        echo "$arm handoff_direct_${handoff_kib}KiB=not done: outcome $(grep -m1 "^${arm}_baton_handoff_direct_us=not_done" "$raw" | sed 's/.*not_done_//') (enum baton_copy_outcome)"
        bench_json_row arm="$arm" figure="handoff_direct_${handoff_kib}KiB" value="not done"
    else
        lat "$arm" "handoff_direct_${handoff_kib}KiB" baton_handoff_direct_us raw_handoff_us
    fi
done
bench_json_write "$json" transport
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
