#!/usr/bin/env bash
# `make bench`: the issue-7 benchmarks and the hub/direct comparison in
# sequence, modest defaults, then PNG plots of them.
#
#   bench/run.sh [--quick]        (BUILD_DIR selects the build, default build;
#                                  BENCH_OUT the output folder, default
#                                  BUILD_DIR/bench-results)
#
# Builds once, then runs bench/roofline.sh (3 repetitions), bench/
# compare-llamacpp.sh (Q8_0, 5 repetitions; against llama-bench, which
# bench/llamacpp-build.sh builds on the first run, for many minutes; --quick
# neither builds it nor needs it), bench/transport.sh (5
# repetitions), each printing its own machine header, and bench/
# direct_path.sh (5 repetitions; only when MODEL_DIR, default
# ../shared/models, has stories260K.gguf). The output is also kept in
# BUILD_DIR/bench-results.txt; each script's JSON (--json) goes to
# BENCH_OUT, where bench/plot.py then writes stages.png, hub_direct.png,
# roofline.png and transport.png (with python3 and matplotlib, Debian's
# python3-matplotlib, which `make bench` installs; without it the plots are
# skipped with a note). --quick: the smallest settings (a look at the
# formats, not figures to report). Figures only, never a test; the machine
# should be otherwise idle for figures worth keeping.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-$here/../build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
quick=0
[ "${1:-}" = "--quick" ] && quick=1
export BUILD_DIR=$build
res=${BENCH_OUT:-$build/bench-results}
case $res in /*) ;; *) res=$PWD/$res ;; esac
mkdir -p "$res"
rm -f "$res"/*.json "$res"/*.png
model=${MODEL_DIR:-$here/../../shared/models}/stories260K.gguf

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$here/.." -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_BENCH=ON >/dev/null
fi
cmake --build "$build" -j2 --target baton batond bench_triad bench_rawtcp bench_transport >/dev/null

out=$build/bench-results.txt
{
    if [ "$quick" = 1 ]; then
        echo "== bench/roofline.sh --small"
        "$here/roofline.sh" --no-build --small --json "$res/roofline.json"
        echo
        echo "== bench/compare-llamacpp.sh --small"
        "$here/compare-llamacpp.sh" --no-build --small --json "$res/compare-llamacpp.json"
        echo
        echo "== bench/transport.sh --small"
        "$here/transport.sh" --no-build --small --json "$res/transport.json"
        direct_reps=1
    else
        echo "== bench/roofline.sh --reps 3"
        "$here/roofline.sh" --no-build --reps 3 --json "$res/roofline.json"
        echo
        echo "== bench/compare-llamacpp.sh --reps 5 --types q8_0"
        "$here/compare-llamacpp.sh" --no-build --reps 5 --types q8_0 --json "$res/compare-llamacpp.json"
        echo
        echo "== bench/transport.sh --reps 5"
        "$here/transport.sh" --no-build --reps 5 --json "$res/transport.json"
        direct_reps=5
    fi
    echo
    if [ -f "$model" ]; then
        echo "== bench/direct_path.sh $build $direct_reps $model"
        "$here/direct_path.sh" "$build" "$direct_reps" "$model" "$res/direct_path.json"
    else
        echo "== bench/direct_path.sh: not run: no $model (set MODEL_DIR)"
    fi
} 2>&1 | tee "$out"
echo "bench: results kept in $out, JSON in $res"

# The plots: the first python3 that has matplotlib (Debian's is /usr/bin/python3).
py=$("$here/plot-python.sh") || py=""
if [ -n "$py" ]; then
    "$py" "$here/plot.py" "$res"
else
    echo "bench: no plots: no python3 with matplotlib (scripts/install-deps.sh --bench installs python3-matplotlib)"
fi
