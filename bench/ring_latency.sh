#!/bin/bash
# bench/ring_latency.sh — the decode ring against a slow coordinator link.
#
# 3 keyed batond on loopback (peer key; allow-lists s1 -> s2 -> s3 -> s1, so
# the last stage may hand each token to stage 1), and in front of each
# server's client port a peer_relay in delay mode: what the coordinator
# sends and receives arrives DELAY ms later (one way), while the servers
# reach each other directly. Arms: ring on / off (`baton bench --ring`),
# each with the coordinator's links direct ("0 ms") and through the
# delaying relays ("DELAY ms"); rounds in ABBA order (round r runs the arms
# forward when r is odd, backward when even); one line per cell. Then, per
# ring setting, what the delay added to TPOT (median over the rounds), and
# the ring's share of the ring-off arm's.
#
# usage: bench/ring_latency.sh [--build DIR] [--model FILE] [--delay MS]
#                              [-p N] [-n N] [--reps N] [--rounds N]
#                              [--npl B [--groups G]]
#   --build DIR   baton, batond and tests/peer_relay from DIR (default ./build)
#   --model FILE  GGUF (default: ../shared/models/stories260K.gguf)
#   --delay MS    one-way delay of the coordinator's links (default 2)
#   -p N, -n N    prompt and generated tokens (default 16, 128)
#   --reps N      `baton bench --reps` per cell (default 3)
#   --rounds N    rounds over the arms (default 2)
#   --npl B       B sequences decoded together (`baton bench --npl B`; TPOT:
#                 a decode step's time, every sequence's token); default one
#   --groups G    with --npl: G pipeline groups (`--groups G --slots G`)
# Exit status: 0 done, 1 a failure, 2 a usage error.
set -euo pipefail

BUILD=./build
MODEL=$(dirname "$0")/../../shared/models/stories260K.gguf
DELAY=2
PROMPT_N=16
GEN_N=128
REPS=3
ROUNDS=2
NPL=0
NGROUPS=1
while [ $# -gt 0 ]; do
    case $1 in # an option without its value is a usage error (it was bash's "$2: unbound variable", exit 1)
    --build | --model | --delay | -p | -n | --reps | --rounds | --npl | --groups) [ $# -ge 2 ] || { echo "ring_latency.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    -p) PROMPT_N=$2; shift 2 ;;
    -n) GEN_N=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --npl) NPL=$2; shift 2 ;;
    --groups) NGROUPS=$2; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "ring_latency.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for f in "$BUILD/baton" "$BUILD/batond" "$BUILD/tests/peer_relay"; do
    [ -x "$f" ] || { echo "ring_latency.sh: $f: not built (make build)" >&2; exit 1; }
done
[ -r "$MODEL" ] || { echo "ring_latency.sh: $MODEL: no such model" >&2; exit 1; }
case "$DELAY$PROMPT_N$GEN_N$REPS$ROUNDS$NPL$NGROUPS" in *[!0-9]*) echo "ring_latency.sh: numbers only" >&2; exit 2 ;; esac
BATCH=()
if [ "$NPL" != 0 ]; then
    BATCH=(--npl "$NPL")
    [ "$NGROUPS" -gt 1 ] && BATCH+=(--groups "$NGROUPS" --slots "$NGROUPS")
elif [ "$NGROUPS" != 1 ]; then
    echo "ring_latency.sh: --groups needs --npl" >&2
    exit 2
fi

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$BUILD/baton" keygen -o "$TMP/c.key" 2>/dev/null
"$BUILD/baton" keygen -o "$TMP/p.key" 2>/dev/null
start_server() { # NAME PORT PEER_PORT
    rm -f "$TMP/port.$1"
    "$BUILD/batond" --host 127.0.0.1 --port "$2" --port-file "$TMP/port.$1" --key "$TMP/c.key" \
        --peer-key "$TMP/p.key" --peer "127.0.0.1:$3" --threads 1 --quiet 2>"$TMP/$1.log" &
    SPIDS+=("$!")
    PIDS+=("$!")
}
wait_files() { # FILE...: each written, within 5 s; 1 if one is not
    for f in "$@"; do
        for _ in $(seq 200); do [ -s "$TMP/$f" ] && break; sleep 0.025; done
        [ -s "$TMP/$f" ] || return 1
    done
}
# three free ports, so that the allow-lists can name each other (a ring);
# another process may take one before its server listens: then the three
# are stopped and started again on three new ports (5 tries)
for try in 1 2 3 4 5; do
    read -r P1 P2 P3 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
    SPIDS=()
    start_server s1 "$P1" "$P2"
    start_server s2 "$P2" "$P3"
    start_server s3 "$P3" "$P1"
    wait_files port.s1 port.s2 port.s3 && break
    for p in "${SPIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    if [ "$try" = 5 ]; then
        echo "ring_latency.sh: the servers did not start: $(cat "$TMP"/s?.log)" >&2
        exit 1
    fi
done
start_relay() { # NAME TO_PORT
    "$BUILD/tests/peer_relay" --to "$2" --port-file "$TMP/rport.$1" --mode delay \
        --delay-ms "$DELAY" 2>"$TMP/relay.$1.log" &
    PIDS+=("$!")
}
start_relay s1 "$P1"
start_relay s2 "$P2"
start_relay s3 "$P3"
wait_files rport.s1 rport.s2 rport.s3 || { echo "ring_latency.sh: a relay did not start" >&2; exit 1; }
R1=$(cat "$TMP/rport.s1")
R2=$(cat "$TMP/rport.s2")
R3=$(cat "$TMP/rport.s3")
DIRECT="127.0.0.1:$P1,127.0.0.1:$P2,127.0.0.1:$P3"
SLOW="127.0.0.1:$R1@127.0.0.1:$P1,127.0.0.1:$R2@127.0.0.1:$P2,127.0.0.1:$R3@127.0.0.1:$P3"

echo "host: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs; flags: $(grep -o -w 'avx2\|avx512f\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "model: $MODEL; 3 stages on loopback, coordinator links 0 / $DELAY ms one way; -p $PROMPT_N -n $GEN_N, $REPS reps per cell${BATCH[*]:+; ${BATCH[*]}}"
ARMS=(on@0 on@$DELAY off@0 off@$DELAY)
for round in $(seq "$ROUNDS"); do
    order=("${ARMS[@]}")
    if [ $((round % 2)) = 0 ]; then
        order=()
        for ((i = ${#ARMS[@]} - 1; i >= 0; i--)); do order+=("${ARMS[$i]}"); done
    fi
    pos=0
    for arm in "${order[@]}"; do
        pos=$((pos + 1))
        ring=${arm%@*}
        delay=${arm#*@}
        servers=$DIRECT
        [ "$delay" != 0 ] && servers=$SLOW
        if ! "$BUILD/baton" bench --model "$MODEL" --servers "$servers" --key "$TMP/c.key" \
            --split 1,1,1 -p "$PROMPT_N" -n "$GEN_N" --reps "$REPS" --ring "$ring" \
            "${BATCH[@]+"${BATCH[@]}"}" --json "$TMP/cell.$round.$arm.json" >"$TMP/cell.out" 2>"$TMP/cell.err"; then
            echo "ring_latency.sh: round $round arm $arm failed:" >&2
            cat "$TMP/cell.err" >&2
            exit 1
        fi
        python3 - "$TMP/cell.$round.$arm.json" "$round" "$pos" "$arm" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
if "npl" in j:  # one batch size: its row, TPOT a step's time
    row = j["npl"][0]
    j = {"tpot": row["tpot_ms"], "decode": row["s_tg"], "ring": row["ring"]}
print("round %s pos %s ring %-3s delay %-3s ms  tpot %8.3f ms (%.3f..%.3f)  decode %9.1f tok/s  ring used %s"
      % (sys.argv[2], sys.argv[3], sys.argv[4].split("@")[0], sys.argv[4].split("@")[1],
         j["tpot"]["median"], j["tpot"]["min"], j["tpot"]["max"], j["decode"]["median"],
         "yes" if j["ring"] else "no"))
EOF
    done
done
python3 - "$TMP" "$ROUNDS" "$DELAY" <<'EOF'
import json, statistics, sys
tmp, rounds, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def one(path):
    j = json.load(open(path))
    return j["npl"][0]["tpot_ms"]["median"] if "npl" in j else j["tpot"]["median"]
def tpot(arm):
    return statistics.median(one(f"{tmp}/cell.{r}.{arm}.json") for r in range(1, rounds + 1))
on0, on_d, off0, off_d = tpot("on@0"), tpot(f"on@{d}"), tpot("off@0"), tpot(f"off@{d}")
print("TPOT added by the delay (medians over the rounds): ring on %.3f ms (%.3f -> %.3f), "
      "ring off %.3f ms (%.3f -> %.3f); ring / off %.3f"
      % (on_d - on0, on0, on_d, off_d - off0, off0, off_d,
         (on_d - on0) / (off_d - off0) if off_d != off0 else float("nan")))
EOF
