#!/usr/bin/env bash
# fuzz/run.sh TARGET SECONDS — one AFL++ campaign, non-interactive.
# fuzz/run.sh --build TARGET... — step 1 only, for all the TARGETs at once.
# TARGET: one of the fuzz/fuzz_TARGET.c files (--help lists them); SECONDS: a
# whole number of seconds (afl-fuzz -V takes no fractions).
#
# 1. Configures (once) and builds a separate CMake tree with afl-clang-fast,
#    ASan+UBSan (BATON_SANITIZE=ON) and BATON_FUZZ_ENGINE=afl, and builds
#    fuzz_TARGET_afl (libAFLDriver, persistent mode, shared-memory input) and
#    fuzz_TARGET (the replay driver, same instrumentation).
# 2. Runs `afl-fuzz -V SECONDS -m none` from fuzz/corpus/TARGET plus
#    fuzz/regressions/TARGET, with fuzz/dict/TARGET.dict.
# 3. Prints the campaign's numbers (execs/s, corpus count, edges) and appends
#    them to BUILD/campaigns/summary.tsv.
# 4. Replays every saved crash and hang with the replay driver (ASan+UBSan,
#    LeakSanitizer on); exits 1 if any of them reproduces.
#
# Environment:
#   FUZZ_BUILD_DIR   the AFL build tree (default: <repo>/build-fuzz-afl)
#   FUZZ_EXTRA_CFLAGS  added to CMAKE_C_FLAGS when the tree is configured
#   FUZZ_CMAKE_ARGS    more configure arguments (e.g. -DBATON_WERROR=OFF)
#   FUZZ_OUT_DIR     campaign output (default: FUZZ_BUILD_DIR/campaigns/TARGET;
#                    emptied first)
#   FUZZ_TIMEOUT_MS  per-input timeout (default 1000; dispatcher 3000)
#   FUZZ_HANG_S      a saved hang reproduces if its replay takes longer (10)
#   FUZZ_PREBUILT    1: skip step 1; the binaries must already be built (by
#                    --build). Campaigns that run at the same time must not
#                    build in one tree: two makes would write the same files.
#   JOBS             build parallelism (2)
# Exit: 0 campaign ran and nothing reproduced (--build: all built); 1 a
# crash or hang reproduced or a step failed; 2 usage; 77 AFL++ is not
# installed (and CI is not true).
# Nothing is written to the source tree.
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir=$src_dir/fuzz
# every target, from the fuzz/fuzz_TARGET.c files, so the list cannot go stale
all_targets=()
for f in "$fuzz_dir"/fuzz_*.c; do
    [ -f "$f" ] || continue
    t=${f##*/fuzz_}
    all_targets+=("${t%.c}")
done
# usage [STATUS]: the usage on stderr, exit 2; usage 0 (--help): on stdout, exit 0
usage() {
    local rc=${1:-2} line=" " t
    {
        echo "usage: $0 TARGET SECONDS"
        echo "       $0 --build TARGET..."
        echo "SECONDS is a whole number of seconds (afl-fuzz -V). TARGET is one of"
        echo "the fuzz/fuzz_TARGET.c files:"
        for t in $(printf '%s\n' "${all_targets[@]}" | sort); do
            if [ $((${#line} + ${#t})) -gt 76 ]; then
                echo "$line"
                line=" "
            fi
            line="$line $t"
        done
        echo "$line"
    } >&"$([ "$rc" -eq 0 ] && echo 1 || echo 2)"
    exit "$rc"
}
case "${1:-}" in -h | --help) usage 0 ;; esac
build_only=0
if [ "${1:-}" = "--build" ]; then
    shift
    [ $# -ge 1 ] || usage
    build_only=1
    FUZZ_PREBUILT=0 # --build always builds
    targets=("$@")
    target=$1
    seconds=0
else
    [ $# -eq 2 ] || usage
    target=$1
    seconds=$2
    targets=("$target")
fi
case "$seconds" in
    '' | *[!0-9]*)
        echo "run.sh: SECONDS must be a whole number of seconds, not '$seconds'" >&2
        usage
        ;;
esac
seconds=$((10#$seconds)) # 010 is ten seconds, not octal
for t in "${targets[@]}"; do
    [ -f "$fuzz_dir/fuzz_$t.c" ] || { echo "run.sh: unknown target '$t'" >&2; usage; }
done

cc=afl-clang-fast
for tool in afl-fuzz "$cc" cmake; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "run.sh: $tool not found (install afl++ and clang; scripts/install-deps.sh)" >&2
        [ "${CI:-}" = "true" ] && exit 1
        exit 77
    fi
done

build=${FUZZ_BUILD_DIR:-$src_dir/build-fuzz-afl}
out=${FUZZ_OUT_DIR:-$build/campaigns/$target}
jobs=${JOBS:-2}
hang_s=${FUZZ_HANG_S:-10}
case "$target" in
    dispatcher) tmo=${FUZZ_TIMEOUT_MS:-3000} ;;
    *) tmo=${FUZZ_TIMEOUT_MS:-1000} ;;
esac
[ "$build_only" -eq 1 ] ||
    case "$(cd "$(dirname "$out")" 2>/dev/null && pwd || echo "$out")/" in
        "$fuzz_dir"/*) echo "run.sh: refusing to write campaign output under fuzz/" >&2; exit 2 ;;
    esac

mkdir -p "$build"
if [ "$build_only" -eq 1 ]; then log=$build/run-build.log; else log=$build/run-$target.log; fi
: >"$log"

# ---- build ----
export AFL_QUIET=1
fuzzer=$build/fuzz/fuzz_${target}_afl
replay=$build/fuzz/fuzz_${target}
if [ "${FUZZ_PREBUILT:-0}" = 1 ]; then
    for f in "$fuzzer" "$replay"; do
        [ -x "$f" ] ||
            { echo "run.sh: FUZZ_PREBUILT=1 but $f is not built (run.sh --build)" >&2; exit 1; }
    done
elif [ ! -f "$build/CMakeCache.txt" ]; then
    echo "run.sh: configuring $build ($cc, ASan+UBSan)"
    CC=$cc cmake -S "$src_dir" -B "$build" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Fuzz \
        -DCMAKE_C_FLAGS="-O2 -g ${FUZZ_EXTRA_CFLAGS:-}" -DBATON_SANITIZE=ON -DBATON_FUZZ_ENGINE=afl ${FUZZ_CMAKE_ARGS:-} \
        >>"$log" 2>&1 || { tail -30 "$log"; echo "run.sh: configure failed" >&2; exit 1; }
else
    # a build dir made before a target was added does not know it yet, and
    # make fails on an unknown target before CMake could regenerate
    cmake "$build" >>"$log" 2>&1 || { tail -30 "$log"; echo "run.sh: reconfigure failed" >&2; exit 1; }
fi
if [ "${FUZZ_PREBUILT:-0}" != 1 ]; then
    names=()
    for t in "${targets[@]}"; do names+=("fuzz_${t}_afl" "fuzz_${t}"); done
    echo "run.sh: building ${names[*]}"
    cmake --build "$build" -j"$jobs" --target "${names[@]}" >>"$log" 2>&1 ||
        { tail -40 "$log"; echo "run.sh: build failed (log: $log)" >&2; exit 1; }
fi
unset AFL_QUIET
if [ "$build_only" -eq 1 ]; then
    summary=$build/campaigns/summary.tsv
    mkdir -p "$(dirname "$summary")"
    [ -f "$summary" ] ||
        printf 'target\tseconds\texecs\texecs_per_sec\tcorpus\tedges\tbitmap_cvg\tcrashes\thangs\twhen\n' >"$summary"
    echo "run.sh: built ${#targets[@]} target(s) in $build"
    exit 0
fi

# ---- seeds ----
rm -rf "$out"
mkdir -p "$out/in"
for d in "$fuzz_dir/corpus/$target" "$fuzz_dir/regressions/$target"; do
    [ -d "$d" ] || continue
    for f in "$d"/*; do
        [ -f "$f" ] || continue
        case "$(basename "$f")" in .* | README*) continue ;; esac
        cp "$f" "$out/in/$(basename "$d")-$(basename "$f")"
    done
done
if [ -z "$(ls -A "$out/in")" ]; then
    echo "run.sh: no seeds for $target (run: cmake --build BUILD --target fuzz-corpus)" >&2
    exit 1
fi
dict_args=()
[ -f "$fuzz_dir/dict/$target.dict" ] && dict_args=(-x "$fuzz_dir/dict/$target.dict")

# ---- campaign ----
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_NO_AFFINITY=1 AFL_FAST_CAL=1 AFL_NO_WARN_INSTABILITY=1
export AFL_SKIP_CRASHES=1
export ASAN_OPTIONS=abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=0:max_allocation_size_mb=2048:hard_rss_limit_mb=4096
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=0:symbolize=0
export MODEL_DIR=${MODEL_DIR:-$src_dir/../shared/models}
echo "run.sh: afl-fuzz $target for ${seconds}s (timeout ${tmo} ms, output $out)"
set +e
timeout --kill-after=30 $((seconds + 300)) \
    afl-fuzz -i "$out/in" -o "$out" "${dict_args[@]}" -m none -t "${tmo}+" -V "$seconds" \
    -- "$fuzzer" >"$out/afl-fuzz.log" 2>&1
afl_rc=$?
set -e
stats=$out/default/fuzzer_stats
if [ ! -f "$stats" ]; then
    tail -40 "$out/afl-fuzz.log"
    echo "run.sh: afl-fuzz did not run (exit $afl_rc; log $out/afl-fuzz.log)" >&2
    exit 1
fi
field() { sed -n "s/^$1 *: *//p" "$stats" | head -1; }
line=$(printf '%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s' "$target" "$(field run_time)" \
    "$(field execs_done)" "$(field execs_per_sec)" "$(field corpus_count)" \
    "$(field edges_found)" "$(field total_edges)" "$(field bitmap_cvg)" \
    "$(field saved_crashes)" "$(field saved_hangs)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
summary=$build/campaigns/summary.tsv
mkdir -p "$(dirname "$summary")"
[ -f "$summary" ] ||
    printf 'target\tseconds\texecs\texecs_per_sec\tcorpus\tedges\tbitmap_cvg\tcrashes\thangs\twhen\n' >"$summary"
printf '%s\n' "$line" >>"$summary"
echo "run.sh: $target: $(field run_time) s, $(field execs_done) execs ($(field execs_per_sec)/s)," \
    "corpus $(field corpus_count), edges $(field edges_found)/$(field total_edges)" \
    "($(field bitmap_cvg)), crashes $(field saved_crashes), hangs $(field saved_hangs)"
if [ "$afl_rc" -ne 0 ]; then
    tail -20 "$out/afl-fuzz.log"
    echo "run.sh: afl-fuzz exited with $afl_rc" >&2
    exit 1
fi

# ---- replay what it saved ----
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:symbolize=1:allocator_may_return_null=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
sym=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
[ -n "$sym" ] && export ASAN_SYMBOLIZER_PATH=$sym
failed=0
for kind in crashes hangs; do
    for f in "$out/default/$kind"/id:*; do
        [ -f "$f" ] || continue
        set +e
        timeout --kill-after=5 "$hang_s" "$replay" "$f" >"$f.replay.log" 2>&1
        rc=$?
        set -e
        if [ "$rc" -eq 0 ]; then
            echo "run.sh: $kind/$(basename "$f"): does not reproduce on replay"
            continue
        fi
        failed=$((failed + 1))
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "run.sh: REPRODUCED hang ($hang_s s): $f"
        else
            echo "run.sh: REPRODUCED crash (exit $rc): $f"
        fi
        tail -40 "$f.replay.log"
    done
done
if [ "$failed" -ne 0 ]; then
    echo "run.sh: $failed input(s) reproduce; keep them with:" >&2
    echo "  cp '$out/default/crashes/id:...' $fuzz_dir/regressions/$target/<name>" >&2
    exit 1
fi
echo "run.sh: $target: no crash or hang reproduces"
