# Shared helpers for the benchmark scripts in bench/ (sourced, not run).
# shellcheck shell=bash
# Servers started here are stopped on exit, by PID, and only those.
#
# Provides: bench_build BUILD TARGET..., bench_header, bench_start_batond,
# bench_stop_all, bench_stats (median/min/max of key=value lines),
# bench_json_median FILE FIGURE (reads `baton bench --json`), and
# bench_json_row / bench_json_write (the --json FILE of the scripts, read by
# bench/plot.py), bench_llamacpp_find / _bin / _run (the llama.cpp tools of
# bench/llamacpp-build.sh), bench_host_flags.

BENCH_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_PIDS=()
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")

bench_stop_all() {
    local p
    for p in "${BENCH_PIDS[@]+"${BENCH_PIDS[@]}"}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${BENCH_PIDS[@]+"${BENCH_PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
    BENCH_PIDS=()
    rm -rf "$BENCH_TMP"
}
trap bench_stop_all EXIT

bench_die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

# bench_usage_die MESSAGE: a bad option value, exit 2 (as an unknown option).
bench_usage_die() {
    echo "$(basename "$0"): $* (see --help)" >&2
    exit 2
}

# bench_build BUILD TARGET...: configures BUILD (RelWithDebInfo, benchmarks
# on) when it has no cache yet, then builds the targets (-j2: the
# development host has 2 cores).
bench_build() {
    local build=$1
    shift
    if [ ! -f "$build/CMakeCache.txt" ]; then
        cmake -S "$BENCH_SRC" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_BENCH=ON \
            >/dev/null || bench_die "cmake configure of $build failed"
    fi
    cmake --build "$build" -j2 --target "$@" >"$BENCH_TMP/build.log" 2>&1 ||
        { cat "$BENCH_TMP/build.log" >&2; bench_die "build of $* in $build failed"; }
}

# bench_need_bins BUILD NAME...: fails unless each BUILD/NAME is executable.
bench_need_bins() {
    local build=$1 b
    shift
    for b in "$@"; do
        [ -x "$build/$b" ] || bench_die "$build/$b missing (build it, or drop --no-build)"
    done
}

# Machine details and load, as comment lines (date and host also kept in
# BENCH_DATE and BENCH_HOST for bench_json_write).
bench_header() {
    BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    BENCH_HOST=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
    echo "# date: $BENCH_DATE"
    echo "# host: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)," \
        "$(nproc) CPUs ($(lscpu 2>/dev/null | sed -n 's/^Core(s) per socket: *//p' | head -n 1)" \
        "cores per socket, $(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core: *//p' | head -n 1)" \
        "threads per core)$(lscpu 2>/dev/null | grep -q '^Hypervisor vendor' &&
            printf ', %s guest' "$(lscpu | sed -n 's/^Hypervisor vendor: *//p')")"
    echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# command: $BENCH_COMMAND"
}

# bench_start_batond VAR [batond flags...]: starts batond on 127.0.0.1,
# port 0, and sets VAR to its port and VAR_PID to its PID. BATOND_EXTRA may
# hold more flags; sanitizer builds (BATON_ASAN=1, as `make test-asan` sets)
# get --no-seccomp, as in tests/integration/lib.sh.
bench_start_batond() {
    local var=$1 pf extra=()
    shift
    pf="$BENCH_TMP/port.$var"
    rm -f "$pf"
    # shellcheck disable=SC2206
    [ -n "${BATOND_EXTRA:-}" ] && extra=(${BATOND_EXTRA})
    [ "${BATON_ASAN:-}" = "1" ] && extra+=(--no-seccomp)
    "$BENCH_BATOND" --host 127.0.0.1 --port 0 --port-file "$pf" --quiet \
        "${extra[@]+"${extra[@]}"}" "$@" 2>"$BENCH_TMP/batond.$var.log" &
    local pid=$!
    BENCH_PIDS+=("$pid")
    for _ in $(seq 400); do
        [ -s "$pf" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.025
    done
    if [ ! -s "$pf" ]; then
        if [ "${BENCH_TRY:-0}" = 1 ]; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            return 1
        fi
        cat "$BENCH_TMP/batond.$var.log" >&2
        bench_die "batond ($var) did not start"
    fi
    printf -v "$var" '%s' "$(cat "$pf")"
    printf -v "${var}_PID" '%s' "$pid"
}

# bench_try_start_batond VAR [flags...]: as bench_start_batond, but returns
# 1 (and leaves nothing running) when batond does not start, e.g. because
# this build does not know a flag.
bench_try_start_batond() {
    BENCH_TRY=1 bench_start_batond "$@"
}

# bench_stop PID: stops one server started here.
bench_stop() {
    local pid=$1 p keep=()
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${BENCH_PIDS[@]+"${BENCH_PIDS[@]}"}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
    BENCH_PIDS=("${keep[@]+"${keep[@]}"}")
}

# bench_stats < lines of `key=value`: one line per key, in first-seen
# order: `key median min max n` (numeric values only; the median of an even
# count is the mean of the two middle values).
bench_stats() {
    awk -F= '
        $2 ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ {
            if (!($1 in n)) order[++nk] = $1
            v[$1, ++n[$1]] = $2 + 0
        }
        END {
            for (k = 1; k <= nk; k++) {
                key = order[k]; m = n[key]
                for (i = 1; i <= m; i++) a[i] = v[key, i]
                for (i = 2; i <= m; i++) {            # insertion sort
                    x = a[i]; j = i - 1
                    while (j >= 1 && a[j] > x) { a[j + 1] = a[j]; j-- }
                    a[j + 1] = x
                }
                med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
                printf "%s %.6g %.6g %.6g %d\n", key, med, a[1], a[m], m
            }
        }'
}

# bench_json_median FILE FIGURE: the median of FIGURE ("prefill",
# "decode", ...) in a `baton bench --json` file.
bench_json_median() {
    grep -o "\"$2\": {[^}]*}" "$1" | grep -o '"median": [-0-9.eE+]*' | head -n 1 |
        sed 's/"median": //'
}

# bench_weight_bytes_per_token MODEL: bytes of every matrix a decode step
# reads: all 2-D tensors except the token embedding (one row of it is read),
# plus the embedding when there is no separate output.weight (tied head).
# Reads the tensor table of `baton inspect --json`.
bench_weight_bytes_per_token() {
    "$BENCH_BATON" inspect "$1" --json | awk '
        /"name": "/ && /"shape": \[/ {
            name = $0; sub(/.*"name": "/, "", name); sub(/".*/, "", name)
            shape = $0; sub(/.*"shape": \[/, "", shape); sub(/\].*/, "", shape)
            bytes = $0; sub(/.*"bytes": /, "", bytes); sub(/[^0-9].*/, "", bytes)
            if (shape !~ /,/) next                    # 1-D: norms
            if (name == "token_embd.weight") { embd = bytes; next }
            if (name == "output.weight") head = 1
            total += bytes
        }
        END { if (!head) total += embd; printf "%.0f\n", total }'
}

# bench_json_row KEY=VALUE...: one result row for bench_json_write; a VALUE
# that is a number is written as a JSON number, anything else as a string.
bench_json_row() {
    local kv k v sep="" out="{"
    for kv in "$@"; do
        k=${kv%%=*} v=${kv#*=}
        if [[ $v =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then
            out+="$sep\"$k\": $v"
        else
            v=${v//\\/\\\\}
            out+="$sep\"$k\": \"${v//\"/\\\"}\""
        fi
        sep=", "
    done
    echo "$out}" >>"$BENCH_TMP/json.rows"
}

# bench_json_write FILE NAME: writes the rows so far as
#   {"bench": NAME, "date": ..., "host": ..., "command": ..., "rows": [...]}
# (nothing when FILE is empty).
bench_json_write() {
    local file=$1 name=$2 q='"'
    [ -n "$file" ] || return 0
    mkdir -p "$(dirname "$file")"
    {
        printf '{"bench": "%s", "date": "%s", "host": "%s", "command": "%s",\n "rows": [\n' \
            "$name" "${BENCH_DATE:-}" "${BENCH_HOST//$q/}" "${BENCH_COMMAND//$q/}"
        [ -f "$BENCH_TMP/json.rows" ] && sed '$!s/$/,/; s/^/  /' "$BENCH_TMP/json.rows"
        printf ' ]}\n'
    } >"$file"
}

# bench_llamacpp_find DIR: the llama.cpp tools that bench/llamacpp-build.sh
# built in DIR. Sets BENCH_LLAMA_BUILDS to the builds that have both
# llama-bench and llama-batched-bench ("native" and/or "prebuilt", in that
# order; empty when none), and BENCH_LLAMA_LIBS to the folder of the npm
# package's prebuilt libraries (the prebuilt tools' working directory).
bench_llamacpp_find() {
    local dir=$1 b
    BENCH_LLAMA_DIR=$dir
    BENCH_LLAMA_LIBS=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
    BENCH_LLAMA_BUILDS=()
    for b in native prebuilt; do
        if [ -x "$(bench_llamacpp_bin "$b")/llama-bench" ] &&
            [ -x "$(bench_llamacpp_bin "$b")/llama-batched-bench" ]; then
            BENCH_LLAMA_BUILDS+=("$b")
        fi
    done
}

# bench_llamacpp_bin BUILD: the folder of BUILD's tools (after
# bench_llamacpp_find).
bench_llamacpp_bin() {
    case $1 in
    native) echo "$BENCH_LLAMA_DIR/build-native/bin" ;;
    prebuilt) echo "$BENCH_LLAMA_DIR/prebuilt" ;;
    esac
}

# bench_llamacpp_run BUILD TOOL ARGS...: runs BUILD's TOOL (llama-bench or
# llama-batched-bench); the prebuilt tools run in BENCH_LLAMA_LIBS, where
# libggml looks for its per-CPU backends. Paths in ARGS must be absolute.
bench_llamacpp_run() {
    local build=$1 tool=$2 bin
    shift 2
    bin=$(bench_llamacpp_bin "$build")
    if [ "$build" = prebuilt ]; then
        (cd "$BENCH_LLAMA_LIBS" && "$bin/$tool" "$@")
    else
        (cd "$bin" && "$bin/$tool" "$@")
    fi
}

# bench_host_flags: the `Flags:` line of lscpu, as a comment line.
bench_host_flags() {
    echo "# cpu flags: $(lscpu 2>/dev/null | sed -n 's/^Flags: *//p' | head -n 1)"
}
