#!/bin/bash
# bench/direct_path.sh BUILD_DIR [REPS] [MODEL] [JSON] — the hub path against the
# direct path on 3 stages (3 keyed batond on loopback, peer key, allow-lists
# A -> B -> C), with `baton run --stats-json`: per decode step, the commands
# and bytes on each coordinator link, the hidden-state bytes through the
# coordinator and each server's peer bytes (exact counts, the same on every
# repetition), and decode tokens/s (median, min, max over REPS runs per
# arm, arms alternating). Greedy, 48 tokens, prompt "Once upon a time".
# JSON: also write the per-arm figures there (read by bench/plot.py).
set -euo pipefail
case ${1:-} in
-h | --help) sed -n '2,9p' "$0"; exit 0 ;;
-*) echo "direct_path.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
BUILD=${1:?usage: bench/direct_path.sh BUILD_DIR [REPS] [MODEL] [JSON]}
REPS=${2:-5}
MODEL=${3:-$(dirname "$0")/../../shared/models/stories260K.gguf}
JSON=${4:-}
COMMAND="bench/direct_path.sh $*"
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

"$BUILD/baton" keygen -o "$TMP/c.key" 2>/dev/null
"$BUILD/baton" keygen -o "$TMP/p.key" 2>/dev/null
start() { # start NAME PEER_ARGS...
    local name=$1
    shift
    "$BUILD/batond" --port 0 --port-file "$TMP/port.$name" --key "$TMP/c.key" \
        --peer-key "$TMP/p.key" --quiet "$@" 2>"$TMP/$name.log" &
    PIDS+=("$!")
    for _ in $(seq 200); do [ -s "$TMP/port.$name" ] && return; sleep 0.025; done
    echo "batond $name did not start" >&2
    exit 1
}
start c
start b --peer "127.0.0.1:$(cat "$TMP/port.c")"
start a --peer "127.0.0.1:$(cat "$TMP/port.b")"
SERVERS="127.0.0.1:$(cat "$TMP/port.a"),127.0.0.1:$(cat "$TMP/port.b"),127.0.0.1:$(cat "$TMP/port.c")"

for r in $(seq "$REPS"); do
    arms="hub direct"
    [ $((r % 2)) = 0 ] && arms="direct hub"
    for arm in $arms; do
        p2p=off
        [ $arm = direct ] && p2p=on
        "$BUILD/baton" run --model "$MODEL" --prompt "Once upon a time" -n 48 --key "$TMP/c.key" \
            --servers "$SERVERS" --split 1,1,1 --p2p $p2p --quiet \
            --stats-json "$TMP/$arm.$r.json" >/dev/null 2>"$TMP/$arm.$r.err"
    done
done

python3 - "$TMP" "$REPS" "$JSON" "$COMMAND" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" \
    "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)" <<'EOF'
import json, re, statistics, sys
tmp, reps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(arm, r): return json.load(open(f"{tmp}/{arm}.{r}.json"))
def tps(arm, r):
    m = re.search(r"decode ([0-9.]+) tok/s", open(f"{tmp}/{arm}.{r}.err").read())
    return float(m.group(1))
cmds = ["SET_TENSOR", "GET_TENSOR", "GRAPH_RUN", "GRAPH_COMPUTE", "COPY_TENSOR_TO"]
print("per decode step (average over %d steps), 3 stages, stories260K (n_embd 64: 256 B of hidden state per token)"
      % load("hub", 1)["decode_steps"])
print("%-7s %-6s %-15s %6s %10s %10s" % ("arm", "stage", "command", "count", "request B", "reply B"))
for arm in ["hub", "direct"]:
    j = load(arm, 1)
    for s in j["per_step"]["stages"]:
        for c in cmds:
            if c in s["commands"]:
                v = s["commands"][c]
                print("%-7s %-6d %-15s %6.2f %10.1f %10.1f" % (arm, s["stage"], c, v["count"],
                                                               v["request_bytes"], v["reply_bytes"]))
print()
print("%-7s %9s %11s %11s %11s %12s %12s %12s" % ("arm", "commands", "request B", "reply B",
      "hidden B", "token/id B", "peer sent B", "peer recv B"))
for arm in ["hub", "direct"]:
    j = load(arm, 1)
    ps = j["per_step"]
    n = sum(v["count"] for v in ps["commands"].values())
    rq = sum(v["request_bytes"] for v in ps["commands"].values())
    rp = sum(v["reply_bytes"] for v in ps["commands"].values())
    sent = sum(s["peer_bytes_sent"] or 0 for s in ps["stages"])
    recv = sum(s["peer_bytes_received"] or 0 for s in ps["stages"])
    print("%-7s %9.2f %11.1f %11.1f %11.1f %12.1f %12.1f %12.1f" % (arm, n, rq, rp,
          ps["hidden_state_bytes"], ps["token_bytes"], sent, recv))
    for r in range(2, reps + 1):
        assert load(arm, r)["per_step"] == ps, "per-step counts differ between repetitions"
print()
print("decode tok/s over %d runs per arm (arms alternating): median, min, max" % reps)
for arm in ["hub", "direct"]:
    v = [tps(arm, r) for r in range(1, reps + 1)]
    print("%-7s %8.1f %8.1f %8.1f" % (arm, statistics.median(v), min(v), max(v)))
if out:
    rows = []
    for arm in ["hub", "direct"]:
        v = [tps(arm, r) for r in range(1, reps + 1)]
        ps = load(arm, 1)["per_step"]
        rows.append({"arm": arm, "stages": 3, "decode_tok_s": statistics.median(v),
                     "decode_min": min(v), "decode_max": max(v), "reps": reps,
                     "commands_per_step": sum(c["count"] for c in ps["commands"].values()),
                     "request_bytes_per_step": sum(c["request_bytes"] for c in ps["commands"].values()),
                     "reply_bytes_per_step": sum(c["reply_bytes"] for c in ps["commands"].values())})
    with open(out, "w") as f:
        json.dump({"bench": "direct_path", "date": sys.argv[5], "host": sys.argv[6],
                   "command": sys.argv[4], "rows": rows}, f, indent=1)
EOF
