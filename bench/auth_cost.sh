#!/usr/bin/env bash
# Measures the throughput cost of frame integrity (bench/transport_auth.c):
# 64 MiB SET_TENSOR / GET_TENSOR over loopback TCP with no key, with a key
# (MAC'd frames) and with a key + encryption, arms alternating, median.
# Also runs bench/mac_speed.c (the MAC alone, no socket) for scale.
#
#   bench/auth_cost.sh [BUILD_DIR (default build)] [REPS (default 9)] [MIB (default 64)]
#
# Builds the libraries in BUILD_DIR with CMake, links the two bench programs
# there, and prints the machine header and both tables (paste them into
# bench/RESULTS.md). Never part of the tests.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
reps=${2:-9}
mib=${3:-64}
cmake -S "$src" -B "$build" >/dev/null
cmake --build "$build" -j2 --target baton_client baton_server >/dev/null
libs=("$build/libbaton_client.a" "$build/libbaton_server.a" "$build/libbaton_wire.a"
      "$build/libbaton_net.a" "$build/libbaton_auth.a" "$build/libbaton_compute.a"
      "$build/libbaton_core.a")
extra=$(pkg-config --libs libsodium libcrypto)
if pkg-config --exists libseccomp; then extra="$extra $(pkg-config --libs libseccomp)"; fi
# shellcheck disable=SC2086
cc -O2 -std=c11 -D_GNU_SOURCE -I"$src/include" -I"$src/src" "$src/bench/transport_auth.c" \
    "${libs[@]}" $extra -lm -lpthread -o "$build/transport_auth"
# shellcheck disable=SC2086
cc -O2 -std=c11 -D_GNU_SOURCE -I"$src/include" -I"$src/src" "$src/bench/mac_speed.c" \
    "$build/libbaton_auth.a" $extra -o "$build/mac_speed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/baton" keygen -o "$tmp/bench.key" 2>/dev/null ||
    { cmake --build "$build" -j2 --target baton >/dev/null && "$build/baton" keygen -o "$tmp/bench.key" 2>/dev/null; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "nproc: $(nproc)"
lscpu | head -n 20 | grep -E '^(Architecture|CPU\(s\)|Model name|Thread|Core|Socket|L2|L3)' || true
echo "command: bench/auth_cost.sh $build $reps $mib"
echo
"$build/transport_auth" "$tmp/bench.key" "$reps" "$mib"
echo
"$build/mac_speed" "$reps"
