#!/usr/bin/env bash
# `make bench`: the three issue-7 benchmarks in sequence, modest defaults.
#
#   bench/run.sh [--quick]        (BUILD_DIR selects the build, default build)
#
# Builds once, then runs bench/roofline.sh (3 repetitions), bench/
# compare-llamacpp.sh (Q8_0, 5 repetitions) and bench/transport.sh (5
# repetitions), each printing its own machine header. The output is also
# kept in BUILD_DIR/bench-results.txt. --quick: the smallest settings (a
# look at the formats, not figures to report). Figures only, never a test;
# the machine should be otherwise idle for figures worth keeping.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-$here/../build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
quick=0
[ "${1:-}" = "--quick" ] && quick=1
export BUILD_DIR=$build

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$here/.." -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_BENCH=ON >/dev/null
fi
cmake --build "$build" -j2 --target baton batond bench_triad bench_rawtcp bench_transport >/dev/null

out=$build/bench-results.txt
{
    if [ "$quick" = 1 ]; then
        echo "== bench/roofline.sh --small"
        "$here/roofline.sh" --no-build --small
        echo
        echo "== bench/compare-llamacpp.sh --small"
        "$here/compare-llamacpp.sh" --no-build --small
        echo
        echo "== bench/transport.sh --small"
        "$here/transport.sh" --no-build --small
    else
        echo "== bench/roofline.sh --reps 3"
        "$here/roofline.sh" --no-build --reps 3
        echo
        echo "== bench/compare-llamacpp.sh --reps 5"
        "$here/compare-llamacpp.sh" --no-build --reps 5
        echo
        echo "== bench/transport.sh --reps 5"
        "$here/transport.sh" --no-build --reps 5
    fi
} 2>&1 | tee "$out"
echo "bench: results kept in $out"
