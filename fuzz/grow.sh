#!/usr/bin/env bash
# fuzz/grow.sh [TARGET...] — longer AFL++ campaigns whose findings are kept:
# `make fuzz-grow` (fuzz/README.md, "Growing the corpus").
#
# For each target (default: every fuzz/fuzz_<target>.c):
# 1. fuzz/run.sh TARGET SECONDS (the AFL++ tree, the campaign from
#    fuzz/corpus/TARGET + fuzz/regressions/TARGET with the dictionary, then
#    the replay of every saved crash and hang); a crash or hang that
#    reproduces stops the growth of that target (keep it as a regression,
#    fix the bug, grow again) and makes the script exit 1.
# 2. afl-cmin over the committed seeds, the regressions and the campaign's
#    queue together: the smallest set with the same edge coverage.
# 3. The inputs of that set that are not committed yet (compared by
#    content) are new; with FUZZ_GROW_TMIN=1 each is first shrunk by
#    afl-tmin (same path, fewer bytes).
# 4. Each new input is copied to fuzz/corpus/TARGET/<BLAKE2b-128 hex of its
#    bytes> (the naming of gen_corpus.c, `b2sum -l 128`), so growing twice
#    never duplicates a file, and replayed there by the replay driver; the
#    CI campaigns (fuzz/run.sh from ctest) start from them.
# Committed seeds are never removed or changed. Commit the new files after
# `make check` (fuzz_replay_TARGET, fuzz_corpus_current).
#
# Environment:
#   FUZZ_GROW_SECONDS  campaign length per target (default 600)
#   FUZZ_GROW_TMIN     1: afl-tmin each new input (default 0)
#   FUZZ_GROW_MAX_NEW  at most this many new inputs per target, the smallest
#                      first (default 200)
#   FUZZ_BUILD_DIR     the AFL++ tree (run.sh's; default <repo>/build-fuzz-afl)
#   JOBS               build parallelism (2)
# Exit: 0 every target grew (or had nothing new); 1 a crash or hang
# reproduced or a step failed; 2 usage; 77 AFL++ is not installed.
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir=$src_dir/fuzz
seconds=${FUZZ_GROW_SECONDS:-600}
tmin=${FUZZ_GROW_TMIN:-0}
max_new=${FUZZ_GROW_MAX_NEW:-200}
build=${FUZZ_BUILD_DIR:-$src_dir/build-fuzz-afl}
export FUZZ_BUILD_DIR=$build
case "$seconds$max_new" in '' | *[!0-9]*) echo "grow.sh: FUZZ_GROW_SECONDS and FUZZ_GROW_MAX_NEW are numbers" >&2; exit 2 ;; esac

for tool in afl-fuzz afl-cmin afl-tmin afl-clang-fast b2sum; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "grow.sh: $tool not found (scripts/install-deps.sh --full)" >&2
        exit 77
    fi
done

if [ $# -eq 0 ]; then
    set --
    for f in "$fuzz_dir"/fuzz_*.c; do
        t=$(basename "$f" .c)
        set -- "$@" "${t#fuzz_}"
    done
fi
for t in "$@"; do
    [ -f "$fuzz_dir/fuzz_$t.c" ] || { echo "grow.sh: unknown target '$t'" >&2; exit 2; }
done

export AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_QUIET=1
export ASAN_OPTIONS=abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=0:max_allocation_size_mb=2048:hard_rss_limit_mb=4096
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=0:symbolize=0
export MODEL_DIR=${MODEL_DIR:-$src_dir/../shared/models}

status=0
for target in "$@"; do
    out=$build/grow/$target
    echo "grow.sh: $target: ${seconds}s campaign"
    if ! FUZZ_OUT_DIR=$out/campaign bash "$fuzz_dir/run.sh" "$target" "$seconds"; then
        echo "grow.sh: $target: the campaign failed or found a crash; nothing added" >&2
        status=1
        continue
    fi
    fuzzer=$build/fuzz/fuzz_${target}_afl
    replay=$build/fuzz/fuzz_${target}
    case "$target" in dispatcher) tmo=3000 ;; *) tmo=1000 ;; esac

    # committed seeds and regressions + the queue, minimized together
    rm -rf "$out/all" "$out/cmin" "$out/new"
    mkdir -p "$out/all" "$out/new"
    for d in "$fuzz_dir/corpus/$target" "$fuzz_dir/regressions/$target"; do
        [ -d "$d" ] || continue
        for f in "$d"/*; do
            [ -f "$f" ] || continue
            case "$(basename "$f")" in .* | README*) continue ;; esac
            cp "$f" "$out/all/c-$(basename "$(dirname "$f")")-$(basename "$f")"
        done
    done
    for f in "$out/campaign/default/queue"/id:*; do
        [ -f "$f" ] && cp "$f" "$out/all/q-$(b2sum -l 128 "$f" | cut -d' ' -f1)"
    done
    if ! afl-cmin -i "$out/all" -o "$out/cmin" -m none -t "$tmo" -- "$fuzzer" \
        >"$out/cmin.log" 2>&1; then
        tail -20 "$out/cmin.log"
        echo "grow.sh: $target: afl-cmin failed (log $out/cmin.log)" >&2
        status=1
        continue
    fi

    # the kept inputs that are not committed yet, smallest first
    declare -A have=()
    for d in "$fuzz_dir/corpus/$target" "$fuzz_dir/regressions/$target"; do
        [ -d "$d" ] || continue
        for f in "$d"/*; do
            [ -f "$f" ] && have[$(b2sum -l 128 "$f" | cut -d' ' -f1)]=1
        done
    done
    n_new=0
    while read -r size f; do
        h=$(b2sum -l 128 "$f" | cut -d' ' -f1)
        [ -n "${have[$h]:-}" ] && continue
        [ "$n_new" -ge "$max_new" ] && break
        if [ "$tmin" = 1 ]; then
            afl-tmin -i "$f" -o "$out/new/tmp" -m none -t "$tmo" -- "$fuzzer" >/dev/null 2>&1 &&
                f=$out/new/tmp
            h=$(b2sum -l 128 "$f" | cut -d' ' -f1)
            [ -n "${have[$h]:-}" ] && { rm -f "$out/new/tmp"; continue; }
        fi
        cp "$f" "$out/new/$h"
        rm -f "$out/new/tmp"
        have[$h]=1
        n_new=$((n_new + 1))
    done < <(find "$out/cmin" -maxdepth 1 -type f -printf '%s %p\n' | sort -n)
    unset have

    # they must replay cleanly (ASan+UBSan replay driver) before they are kept
    if [ "$n_new" -gt 0 ] && ! "$replay" -q "$out/new" >"$out/new-replay.log" 2>&1; then
        tail -20 "$out/new-replay.log"
        echo "grow.sh: $target: a new input fails its replay; nothing added" >&2
        status=1
        continue
    fi
    [ "$n_new" -gt 0 ] && cp "$out/new"/* "$fuzz_dir/corpus/$target/"
    kept=$(find "$out/cmin" -maxdepth 1 -type f | wc -l)
    echo "grow.sh: $target: queue $(find "$out/campaign/default/queue" -maxdepth 1 -name 'id:*' | wc -l)," \
        "minimized set $kept, $n_new new input(s) added to fuzz/corpus/$target"
done
exit "$status"
