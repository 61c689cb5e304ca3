#!/usr/bin/env bash
# fuzz/coverage.sh — line coverage of the committed fuzz corpus replay, per
# source file, against the committed floors (`make coverage`, part of
# `make test`).
#
# 1. Configures (once) a separate tree with gcc --coverage -O0 (no
#    benchmarks) and builds the replay driver of every fuzz target
#    (the custom target fuzz-replay-all).
# 2. Deletes the previous counts and runs `ctest -L fuzz-replay` there: every
#    target's fuzz/corpus/<target> and fuzz/regressions/<target> replayed.
# 3. gcovr (Debian package gcovr; scripts/install-deps.sh --full) summarises
#    the counts per file under src/; prints a table (lines, covered, %, the
#    floor) and writes BUILD/coverage.json (gcovr's JSON summary) and
#    BUILD/coverage.txt (the table).
# 4. Fails when a file listed in fuzz/coverage-floors.txt (`path floor%`,
#    one a line, '#' comments) is below its floor, or has no counts at all.
# 5. verify/reach.py lists every function input reaches with its status
#    (proven, fuzzed: run by the replay, or neither) into
#    BUILD/reachable.md, and fails when the committed verify/REACHABLE.md
#    calls a function proven or fuzzed that no longer is.
#
# Environment:
#   COVERAGE_BUILD_DIR  the tree (default: <repo>/build-coverage)
#   COVERAGE_FLOORS     the floors file (default: fuzz/coverage-floors.txt)
#   JOBS                build and replay parallelism (2)
# Exit: 0 every floor holds; 1 a floor does not hold or a step failed;
# 77 gcovr or gcc is missing (and CI is not true).
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build=${COVERAGE_BUILD_DIR:-$src_dir/build-coverage}
floors=${COVERAGE_FLOORS:-$src_dir/fuzz/coverage-floors.txt}
jobs=${JOBS:-2}

for tool in gcc gcov gcovr python3 cmake; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "coverage: $tool not found (scripts/install-deps.sh --full)" >&2
        [ "${CI:-}" = "true" ] && exit 1
        exit 77
    fi
done

mkdir -p "$build"
log=$build/coverage.log
: >"$log"
# -fprofile-update=atomic: the server's threads (connections, peer links) run
# the same lines at once; with plain counters an update can be lost, and gcov
# then derived a negative branch count that gcovr 5.2 refused ("branch 1 taken
# -3578") and then hung on (a CI run, 2026-12-04)
cflags="--coverage -O0 -fprofile-update=atomic"
if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "coverage: configuring $build (gcc $cflags)"
    CC=gcc cmake -S "$src_dir" -B "$build" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="--coverage" \
        -DBATON_BENCH=OFF >>"$log" 2>&1 ||
        { tail -30 "$log"; echo "coverage: configure failed" >&2; exit 1; }
else
    cmake "$build" -DCMAKE_C_FLAGS="$cflags" >>"$log" 2>&1 ||
        { tail -30 "$log"; echo "coverage: reconfigure failed" >&2; exit 1; }
fi
echo "coverage: building the replay drivers"
cmake --build "$build" -j"$jobs" --target fuzz-replay-all >>"$log" 2>&1 ||
    { tail -40 "$log"; echo "coverage: build failed (log: $log)" >&2; exit 1; }

find "$build" -name '*.gcda' -delete
echo "coverage: replaying every target's corpus and regressions"
(cd "$build" && ctest -j"$jobs" -L fuzz-replay -E fuzz_corpus_current --output-on-failure) \
    >>"$log" 2>&1 || { tail -40 "$log"; echo "coverage: a replay failed (log: $log)" >&2; exit 1; }

echo "coverage: gcovr"
# bounded: gcovr 5.2 hangs (instead of exiting) after a worker's parse error
(cd "$src_dir" && timeout 900 gcovr -r "$src_dir" --object-directory "$build" \
    -f "$src_dir/src/" -j "$jobs" --json-summary-pretty -o "$build/coverage.json") >>"$log" 2>&1 ||
    { tail -20 "$log"; echo "coverage: gcovr failed (log: $log)" >&2; exit 1; }

python3 - "$build/coverage.json" "$floors" "$build/coverage.txt" <<'EOF'
import json, sys

summary, floors_path, table_path = sys.argv[1:4]
files = {}
for f in json.load(open(summary))["files"]:
    files[f["filename"]] = (f["line_total"], f["line_covered"])

floors = {}
with open(floors_path) as fp:
    for n, line in enumerate(fp, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].endswith("%"):
            sys.exit(f"coverage: {floors_path}:{n}: expected 'path floor%'")
        floors[parts[0]] = float(parts[1][:-1])

rows, failed = [], []
for path in sorted(set(files) | set(floors)):
    total, covered = files.get(path, (0, 0))
    pct = 100.0 * covered / total if total else 0.0
    floor = floors.get(path)
    mark = ""
    if floor is not None and (total == 0 or pct < floor):
        mark = "  BELOW FLOOR"
        failed.append(path)
    rows.append(f"{path:<40} {total:>6} {covered:>6} {pct:>6.1f}%"
                + (f" {floor:>6.1f}%" if floor is not None else "        ") + mark)
tot = sum(t for t, _ in files.values())
cov = sum(c for _, c in files.values())
head = f"{'file':<40} {'lines':>6} {'hit':>6} {'cover':>7} {'floor':>7}"
out = [head] + rows + [f"{'total':<40} {tot:>6} {cov:>6} {100.0 * cov / max(tot, 1):>6.1f}%"]
open(table_path, "w").write("\n".join(out) + "\n")
print("\n".join(out))
if failed:
    print(f"coverage: {len(failed)} file(s) below their floor in {floors_path}: "
          + ", ".join(failed), file=sys.stderr)
    sys.exit(1)
print(f"coverage: every floor of {floors_path} holds ({len(floors)} files)")
EOF

# Every function that input reaches, with its status (proven / fuzzed /
# neither: verify/reach.py); the committed verify/REACHABLE.md may claim no
# more than this run shows.
echo "coverage: functions reached by input (verify/reach.py)"
python3 "$src_dir/verify/reach.py" --build "$build" --gcov "$build" -o "$build/reachable.md" \
    --check "$src_dir/verify/REACHABLE.md" || exit 1
