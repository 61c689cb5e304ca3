#!/bin/bash
# bench/topology.sh — a split over several "hosts" on one machine: network
# namespaces bt-coord (the coordinator) and bt-s1, bt-s2, bt-s3 (one batond
# each), joined by veth pairs through a bridge in a namespace of its own
# (bt-hub), so nothing of the machine's own network is touched. Each batond
# listens on its namespace's address with a client key, the peer key and an
# allow-list naming the next server (s1 -> s2 -> s3; s2 and s3 also s1, for the
# decode ring of a 2- or 3-stage arm), pinned with taskset to
# its core (--cores). The coordinator's link can be rate-limited in both
# directions with tc tbf (--coord-rate). Arms run in alternating order
# (ABBA: round r runs the arms forward when r is odd, backward when even);
# one line per cell, with its round and position. Every namespace and
# process is removed at the end, also on failure or Ctrl-C.
#
# usage: bench/topology.sh [options] ARM...      (as root: ip netns, tc)
#   ARM            NAME=SERVERS[:EXTRA][@RATE]: SERVERS is local, local-free, s1,
#                  s1s2 or s1s2s3 (local: in-process, pinned to s1's core;
#                  local-free: in-process, not pinned);
#                  EXTRA is passed to `baton bench` (spaces as commas are
#                  kept: write them as '+', e.g. "--pipeline+off"); @RATE
#                  limits the coordinator's link for that arm's cells (e.g.
#                  @100mbit; @none: unlimited), overriding --coord-rate
#   --build DIR    baton and batond from DIR (default ./build)
#   --model FILE   GGUF (default: the 86M Q8_0 model of bench/roofline.sh,
#                  made with `baton gen-model` when missing)
#   -p N, -n N     prompt and generated tokens per repetition (512, 32)
#   --reps N       repetitions per cell (`baton bench --reps`, default 3)
#   --rounds N     rounds over the arms (default 2: A B B A)
#   --cores LIST   cores of s1,s2,s3 (default: 0,1,1 on 2 cores; 0,1,2 on 3+)
#   --threads N    compute threads per batond (default 1)
#   --coord-rate R tc tbf rate of the coordinator's link (e.g. 1gbit,
#                  100mbit); default: none
#   --json DIR     keep each cell's `baton bench --json` there
#
# Exit status: 0 done, 1 a failure (a cell, a server, a namespace that
# exists already), 2 a usage error, 130 interrupted.
#
# Example (the prefill targets of the issue "Overlap the stages"):
#   bench/topology.sh one=s1 off=s1s2:--pipeline+off on=s1s2
# Pipeline groups (issue "Many sequences"; --npl arms print a line per B):
#   bench/topology.sh -p 32 -n 32 g1=s1s2:--npl+32 g2=s1s2:--npl+32+--groups+2
set -euo pipefail

COMMAND="$0 $*"
BUILD=./build
MODEL=
PROMPT_N=512
GEN_N=32
REPS=3
ROUNDS=2
CORES=
THREADS=1
RATE=
JSON_DIR=
ARMS=()
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --model | -p | -n | --reps | --rounds | --cores | --threads | --coord-rate | --json) [ $# -ge 2 ] || { echo "topology.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    -p) PROMPT_N=$2; shift 2 ;;
    -n) GEN_N=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --coord-rate) RATE=$2; shift 2 ;;
    --json) JSON_DIR=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "topology.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ARMS+=("$1"); shift ;;
    esac
done
[ ${#ARMS[@]} -gt 0 ] || { echo "topology.sh: no arms (see --help)" >&2; exit 2; }
for n in "$PROMPT_N" "$GEN_N" "$REPS" "$ROUNDS" "$THREADS"; do
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] ||
        { echo "topology.sh: '$n' is not a positive integer (see --help)" >&2; exit 2; }
done
for spec in "${ARMS[@]}"; do
    a=${spec%@*}
    a=${a#*=}
    a=${a%%:*}
    case $a in
    local | local-free | s1 | s1s2 | s1s2s3) ;;
    *) echo "topology.sh: arm '$spec': servers '$a' is not local, local-free, s1, s1s2 or s1s2s3" >&2; exit 2 ;;
    esac
    [[ $spec == *=* ]] || { echo "topology.sh: arm '$spec' is not NAME=SERVERS" >&2; exit 2; }
done
if [ -n "$MODEL" ] && [ ! -r "$MODEL" ]; then
    echo "topology.sh: --model $MODEL: no such readable file" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || { echo "topology.sh: needs root (ip netns, tc)" >&2; exit 2; }
BATON=$BUILD/baton
BATOND=$BUILD/batond
[ -x "$BATON" ] && [ -x "$BATOND" ] || { echo "topology.sh: $BUILD/baton(d) missing" >&2; exit 2; }
BATON=$(cd "$(dirname "$BATON")" && pwd)/baton
BATOND=$(cd "$(dirname "$BATOND")" && pwd)/batond
ncpu=$(nproc)
if [ -z "$CORES" ]; then
    if [ "$ncpu" -ge 3 ]; then CORES=0,1,2; elif [ "$ncpu" = 2 ]; then CORES=0,1,1; else CORES=0,0,0; fi
fi
IFS=, read -r CORE1 CORE2 CORE3 <<<"$CORES"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/baton-topo.XXXXXX")
NS=(bt-coord bt-s1 bt-s2 bt-s3)
ADDR=(10.77.0.1 10.77.0.11 10.77.0.12 10.77.0.13)
PIDS=()
MADE=() # the namespaces this run made: the only ones it removes
cleanup() {
    local p n
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
    for n in "${MADE[@]+"${MADE[@]}"}"; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "${NS[@]}" bt-hub; do
    if ip netns list | grep -qw "$n"; then
        echo "topology.sh: namespace $n exists (another run?); remove it with: ip netns del $n" >&2
        exit 1
    fi
done
ip netns add bt-hub
MADE+=(bt-hub)
ip -n bt-hub link add br0 type bridge
ip -n bt-hub link set br0 up
ip -n bt-hub link set lo up
for i in 0 1 2 3; do
    n=${NS[$i]}
    ip netns add "$n"
    MADE+=("$n")
    ip link add "v$i" netns bt-hub type veth peer name eth0 netns "$n"
    ip -n bt-hub link set "v$i" master br0 up
    ip -n "$n" addr add "${ADDR[$i]}/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
done
# set_rate RATE|none: both directions of the coordinator's link: its own
# egress, and the bridge port's egress towards it (a 16 KiB burst behaves
# like a real link of that rate)
CUR_RATE=none
set_rate() {
    [ "$1" = "$CUR_RATE" ] && return 0
    ip netns exec bt-coord tc qdisc del dev eth0 root 2>/dev/null || true
    ip netns exec bt-hub tc qdisc del dev v0 root 2>/dev/null || true
    if [ "$1" != none ]; then
        if ! ip netns exec bt-coord tc qdisc add dev eth0 root tbf rate "$1" burst 16kb \
            latency 50ms 2>"$TMP/tc.err" ||
            ! ip netns exec bt-hub tc qdisc add dev v0 root tbf rate "$1" burst 16kb \
                latency 50ms 2>"$TMP/tc.err"; then
            echo "topology.sh: link rate '$1': $(head -n 1 "$TMP/tc.err")" >&2
            exit 2
        fi
    fi
    CUR_RATE=$1
}

if [ -z "$MODEL" ]; then
    MODEL=$TMP/d768-q8_0.gguf
    "$BATON" gen-model --layers 12 --dim 768 --ff 2048 --heads 12 --type q8_0 --seed 1 \
        -o "$MODEL" >/dev/null 2>&1 || { echo "topology.sh: gen-model failed" >&2; exit 1; }
fi
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
"$BATON" keygen -o "$TMP/client.key" 2>/dev/null
"$BATON" keygen -o "$TMP/peer.key" 2>/dev/null

# start_server I CORE PEER_ADDRS: batond in bt-sI on port 7340, allow-listing
# each of PEER_ADDRS (space-separated) on port 7340
start_server() {
    local i=$1 core=$2 peer=$3 extra=()
    for p in $peer; do extra+=(--peer "$p:7340"); done
    ip netns exec "${NS[$i]}" taskset -c "$core" "$BATOND" --host "${ADDR[$i]}" --port 7340 \
        --port-file "$TMP/port.$i" --threads "$THREADS" --key "$TMP/client.key" \
        --peer-key "$TMP/peer.key" --quiet "${extra[@]}" 2>"$TMP/batond.$i.log" &
    PIDS+=("$!")
    for _ in $(seq 200); do [ -s "$TMP/port.$i" ] && return 0; sleep 0.025; done
    cat "$TMP/batond.$i.log" >&2
    echo "topology.sh: batond in ${NS[$i]} did not start" >&2
    exit 1
}
# s1 -> s2 -> s3, and back to s1 from the last stage of a 2- or 3-stage arm
# (the decode ring)
start_server 3 "$CORE3" "${ADDR[1]}"
start_server 2 "$CORE2" "${ADDR[3]} ${ADDR[1]}"
start_server 1 "$CORE1" "${ADDR[2]}"
S1=${ADDR[1]}:7340
S2=${ADDR[2]}:7340
S3=${ADDR[3]}:7340

echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# host: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $ncpu CPUs; flags:" \
    "$(grep -o 'avx512[a-z_]*\|avx2\|amx[a-z_]*\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# model: $MODEL; -p $PROMPT_N -n $GEN_N, $REPS reps per cell, $ROUNDS rounds;" \
    "cores s1,s2,s3 = $CORES; $THREADS thread(s) per batond; coordinator link ${RATE:-unlimited}"
echo "# command: $COMMAND"

# run_cell ARM ROUND POS
run_cell() {
    local spec=$1 round=$2 pos=$3 name servers extra=() json rate=${RATE:-none}
    if [[ $spec == *@* ]]; then
        rate=${spec##*@}
        spec=${spec%@*}
    fi
    set_rate "$rate"
    name=${spec%%=*}
    servers=${spec#*=}
    if [[ $servers == *:* ]]; then
        IFS='+' read -r -a extra <<<"${servers#*:}"
        servers=${servers%%:*}
    fi
    json=$TMP/$name.$round.json
    local pre=()
    case $servers in
    local) servers=local pre=(taskset -c "$CORE1") ;;
    local-free) servers=local ;;
    s1) servers=$S1 ;;
    s1s2) servers=$S1,$S2 ;;
    s1s2s3) servers=$S1,$S2,$S3 ;;
    *) echo "topology.sh: arm $name: servers '$servers' is not local, local-free, s1, s1s2 or s1s2s3" >&2; exit 2 ;;
    esac
    if ! ip netns exec bt-coord "${pre[@]}" "$BATON" bench --model "$MODEL" --servers "$servers" \
        --key "$TMP/client.key" -p "$PROMPT_N" -n "$GEN_N" --reps "$REPS" \
        --threads "$THREADS" --json "$json" "${extra[@]}" >"$TMP/$name.$round.out" \
        2>"$TMP/$name.$round.err"; then
        cat "$TMP/$name.$round.err" >&2
        echo "topology.sh: arm $name failed in round $round" >&2
        exit 1
    fi
    [ -n "$JSON_DIR" ] && mkdir -p "$JSON_DIR" && cp "$json" "$JSON_DIR/"
    python3 - "$json" "$name" "$round" "$pos" "$rate" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
name, rnd, pos, rate = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
if "npl" in j:  # baton bench --npl: a line per batch size
    for x in j["npl"]:
        print("round %s pos %s %-12s npl %3d groups %d  S_PP %8.1f tok/s  S_TG %8.2f tok/s "
              "(%.2f..%.2f)  TPOT %.2f ms  link %s"
              % (rnd, pos, name, x["b"], j["groups"], x["s_pp"]["median"], x["s_tg"]["median"],
                 x["s_tg"]["min"], x["s_tg"]["max"], x["tpot_ms"]["median"], rate))
    sys.exit(0)
steps = j["per_step"]
req = [sum(c["request_bytes"] for c in s.values()) for s in steps]
rep = sum(sum(c["reply_bytes"] for c in s.values()) for s in steps)
print("round %s pos %s %-12s prefill %8.1f tok/s (%.1f..%.1f)  decode %7.2f tok/s (%.2f..%.2f)"
      "  ubatch %d  waits/step %.2f  coord B/step/stage sent %s, received %.0f  link %s  ring %s"
      % (rnd, pos, name, j["prefill"]["median"], j["prefill"]["min"], j["prefill"]["max"],
         j["decode"]["median"], j["decode"]["min"], j["decode"]["max"], j["ubatch"],
         j["waits_per_step"], "/".join("%.0f" % b for b in req), rep, rate,
         "yes" if j.get("ring") else "no"))
EOF
}

for round in $(seq "$ROUNDS"); do
    order=("${ARMS[@]}")
    if [ $((round % 2)) = 0 ]; then
        order=()
        for ((i = ${#ARMS[@]} - 1; i >= 0; i--)); do order+=("${ARMS[$i]}"); done
    fi
    pos=1
    for arm in "${order[@]}"; do
        run_cell "$arm" "$round" "$pos"
        pos=$((pos + 1))
    done
done
