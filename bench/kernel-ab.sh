#!/usr/bin/env bash
# Same-process A/B of a kernel file: a git revision against the working tree.
#
#   bench/kernel-ab.sh [--rev REV] [--file F] [--build DIR] [--calls N] [CASE...]
#
# Builds F (default: src/compute/cpu/matmul_avx512.c on a CPU whose
# /proc/cpuinfo flags name AVX-512 F, BW, DQ, VL and VNNI, else matmul_avx2.c;
# or the one --file names) twice
# into one program, bench/kernel_ab.c: arm A from REV (default HEAD; its
# src/ and include/ extracted with git archive, so A compiles against its own
# headers), arm B from the working tree, each table renamed (-D) to
# baton_mm_ab_A / _B. The rest (baton_mm_drive, the activation quantizers)
# comes from DIR's libbaton_compute.a (default $BUILD_DIR or build; built here
# unless present; a plain build, not a sanitizer one), so REV must share the
# working tree's struct baton_mm and kernel table layout. The arms alternate call by call: on a host whose speed
# moves by 1.5x within minutes, only arms of one run compare.
#
# A CASE is TYPE:K:ROWS:MATRICES (kernel_ab's arguments; MATRICES > 1 reads
# beyond the caches when their total is). Default cases: Q4_K and Q6_K at
# k 4096 (256 rows, from cache; 4096 rows x 8 matrices, streamed) and k 14336
# (64 rows; 2048 rows x 4), and Q4_K at k 768 (768 rows).
# Prints kernel_ab's line per case (A = REV, B = working tree). Exit status:
# 0, 1 a build failed or some case's bits differ (whatever other cases did),
# 2 usage (a case kernel_ab refuses too), 3 the CPU lacks the file's level (kernel_ab checks with
# baton_cpu_isa_detect before it calls a kernel). Figures only, never a test.
set -euo pipefail
# shellcheck source=bench/lib.sh disable=SC2034  # BENCH_* are read by lib.sh
source "$(dirname "$0")/lib.sh"
BENCH_COMMAND="bench/kernel-ab.sh $*"

rev=HEAD file=auto build=${BUILD_DIR:-$BENCH_SRC/build} calls=200
cases=()
while [ $# -gt 0 ]; do
    case $1 in
    --rev | --file | --build | --calls) [ $# -ge 2 ] || { echo "kernel-ab.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --rev) rev=$2; shift 2 ;;
    --file) file=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "kernel-ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
    esac
done
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has512=1
for f in avx512f avx512bw avx512dq avx512vl avx512_vnni; do
    [[ " $cpu_flags " == *" $f "* ]] || has512=0
done
if [ "$file" = auto ]; then
    file=src/compute/cpu/matmul_avx2.c
    [ "$has512" -eq 0 ] || file=src/compute/cpu/matmul_avx512.c
fi
case $file in
src/compute/cpu/matmul_avx512.c) table=baton_mm_avx512 isa=BATON_CPU_ISA_AVX512 ;;
src/compute/cpu/matmul_avx2.c) table=baton_mm_avx2 isa=BATON_CPU_ISA_AVX2 ;;
*) echo "kernel-ab.sh: --file must be src/compute/cpu/matmul_avx512.c or matmul_avx2.c" >&2; exit 2 ;;
esac
# before the build when the flags already say so (kernel_ab checks again,
# by CPUID, before it calls a kernel)
if [ "$isa" = BATON_CPU_ISA_AVX512 ] && [ -n "$cpu_flags" ] && [ "$has512" -eq 0 ]; then
    echo "kernel_ab: this CPU lacks the avx512 level (/proc/cpuinfo: no AVX-512 F, BW, DQ, VL and VNNI); nothing to compare" >&2
    exit 3
fi
[ ${#cases[@]} -gt 0 ] || cases=(q4_k:4096:256:1 q4_k:4096:4096:8 q4_k:14336:64:1 q4_k:14336:2048:4
    q4_k:768:768:1 q6_k:4096:256:1 q6_k:4096:4096:8 q6_k:14336:64:1 q6_k:14336:2048:4)
[[ $calls =~ ^[1-9][0-9]{0,5}$ ]] || { echo "kernel-ab.sh: --calls wants 1..999999, not '$calls'" >&2; exit 2; }
for c in "${cases[@]}"; do
    [[ $c =~ ^(q8_0|q4_0|q2_k|q3_k|q4_k|q5_k|q6_k):[0-9]+:[0-9]+:[0-9]+$ ]] ||
        { echo "kernel-ab.sh: case '$c': want TYPE:K:ROWS:MATRICES, TYPE one of q8_0 q4_0 q2_k..q6_k" >&2; exit 2; }
    IFS=: read -r t k rows mats <<<"$c"
    blk=256
    [[ $t != q8_0 && $t != q4_0 ]] || blk=32
    # kernel_ab's own limits, checked before the build
    [ "${#k}" -le 7 ] && [ "$k" -ge "$blk" ] && [ "$k" -le 1048576 ] && [ $((10#$k % blk)) -eq 0 ] ||
        { echo "kernel-ab.sh: case '$c': K must be a multiple of $blk in $blk..1048576 for $t" >&2; exit 2; }
    [ "${#rows}" -le 7 ] && [ "$rows" -ge 1 ] && [ "$rows" -le 1048576 ] ||
        { echo "kernel-ab.sh: case '$c': ROWS must be 1..1048576" >&2; exit 2; }
    [ "${#mats}" -le 4 ] && [ "$mats" -ge 1 ] && [ "$mats" -le 4096 ] ||
        { echo "kernel-ab.sh: case '$c': MATRICES must be 1..4096" >&2; exit 2; }
done
git -C "$BENCH_SRC" rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
    { echo "kernel-ab.sh: $rev is not a commit of $BENCH_SRC" >&2; exit 2; }

bench_build "$build" baton_compute baton_core
old=$BENCH_TMP/rev
mkdir -p "$old"
git -C "$BENCH_SRC" archive "$rev" src include | tar -x -C "$old"
flags=(-O2 -g -DNDEBUG -std=c11 -D_GNU_SOURCE)
cc=${CC:-cc}
"$cc" "${flags[@]}" -I"$old/include" -I"$old/src" "-D$table=baton_mm_ab_A" \
    -c "$old/$file" -o "$BENCH_TMP/a.o" || bench_die "$file at $rev does not compile"
"$cc" "${flags[@]}" -I"$BENCH_SRC/include" -I"$BENCH_SRC/src" "-D$table=baton_mm_ab_B" \
    -c "$BENCH_SRC/$file" -o "$BENCH_TMP/b.o" || bench_die "$file of the working tree does not compile"
# the file's other external functions (matmul_avx2.c has some: the
# activation quantizers, ...) get an arm suffix in each object, so the two
# arms and the library's copy link side by side
for arm in a b; do
    renames=()
    while read -r _ kind sym; do
        [ "$kind" = T ] && [[ $sym != baton_mm_ab_* ]] && renames+=(--redefine-sym "$sym=${sym}_kab_$arm")
    done < <(nm "$BENCH_TMP/$arm.o")
    [ ${#renames[@]} -eq 0 ] || objcopy "${renames[@]}" "$BENCH_TMP/$arm.o" ||
        bench_die "objcopy of arm $arm failed"
done
"$cc" "${flags[@]}" -I"$BENCH_SRC/include" -I"$BENCH_SRC/src" "-DKAB_ISA=$isa" \
    "$BENCH_SRC/bench/kernel_ab.c" \
    "$BENCH_TMP/a.o" "$BENCH_TMP/b.o" "$build/libbaton_compute.a" "$build/libbaton_core.a" \
    -lm -lpthread -o "$BENCH_TMP/kernel_ab" || bench_die "linking kernel_ab failed"

bench_header
echo "# kernel-ab: A = $file at $(git -C "$BENCH_SRC" rev-parse --short "$rev"), B = the working tree; $calls calls per arm"
status=0
for c in "${cases[@]}"; do
    IFS=: read -r t k rows mats <<<"$c"
    rc=0; "$BENCH_TMP/kernel_ab" "$t" "$k" "$rows" "$mats" "$calls" || rc=$?
    [ "$rc" -ne 3 ] || exit 3
    # a case whose bits differ (1) outranks one kernel_ab refused (2)
    if [ "$rc" -eq 1 ]; then status=1; elif [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
done
exit $status
