#!/bin/bash
# make demo: start three batond on loopback ephemeral ports, run the model
# split 1,1,1 across them, stream the text, print the summary, stop the
# servers (only the ones this script started, by PID).
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
model=${MODEL:-}
if [ -z "$model" ]; then
    # the default: shared/models/ beside the repository (README, "Quick start")
    model="$(cd "$here/.." && pwd)/shared/models/stories260K.gguf"
    if [ ! -f "$model" ]; then
        echo "demo: no model at $model: put stories260K.gguf there (docs/USAGE.md, 'The demo model', says where it comes from)" \
            "or run: make demo MODEL=/path/to/model.gguf" >&2
        exit 2
    fi
elif [ -d "$model" ]; then
    echo "demo: MODEL=$model: is a directory: $(realpath -m -- "$model"); pass MODEL=/path/to/model.gguf" >&2
    exit 2
elif [ ! -f "$model" ]; then
    echo "demo: MODEL=$model: no such file: $(realpath -m -- "$model"); pass MODEL=/path/to/model.gguf" >&2
    exit 2
fi
prompt=${PROMPT:-"Once upon a time"}

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

servers=""
for i in 1 2 3; do
    "$BUILD_DIR/batond" --host 127.0.0.1 --port 0 --port-file "$tmp/port$i" --threads 1 --quiet \
        2>"$tmp/batond$i.log" &
    pids+=($!)
done
for i in 1 2 3; do
    for _ in $(seq 100); do [ -s "$tmp/port$i" ] && break; sleep 0.05; done
    [ -s "$tmp/port$i" ] || { echo "demo: batond $i did not start:" >&2; cat "$tmp/batond$i.log" >&2; exit 1; }
    servers="${servers:+$servers,}127.0.0.1:$(cat "$tmp/port$i")"
done
echo "demo: model $model"
echo "demo: servers $servers"
"$BUILD_DIR/baton" run --model "$model" --servers "$servers" --split 1,1,1 \
    --prompt "$prompt" -n "${N:-64}"
