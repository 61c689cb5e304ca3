#!/bin/bash
# The benchmark scripts run end to end with tiny sizes and print their
# documented line formats (bench/roofline.sh, bench/compare-llamacpp.sh,
# bench/transport.sh), and their --json files (read by bench/plot.py) parse
# and hold the rows. Figures are not checked: speed is never asserted.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
for b in bench_triad bench_rawtcp bench_transport; do
    if [ ! -x "$BUILD_DIR/bench/$b" ]; then
        echo "SKIP: $BUILD_DIR/bench/$b not built (BATON_BENCH=OFF?)" >&2
        exit 77
    fi
done
num='[0-9]+(\.[0-9]+)?'
# check_json FILE BENCH N KEY...: FILE is JSON of BENCH with N rows, each
# row having a number in every KEY
check_json() {
    python3 - "$@" <<'PY' || fail "$1: not the JSON bench/plot.py reads"
import json, sys
f, bench, n, keys = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
j = json.load(open(f))
assert j["bench"] == bench, j["bench"]
assert j["date"] and "command" in j and "host" in j
rows = j["rows"]
assert len(rows) == n, (len(rows), n)
for r in rows:
    for k in keys:
        assert isinstance(r[k], (int, float)), (k, r)
PY
}

# roofline: one cell line per type and thread count
"$SRC_DIR/bench/roofline.sh" --build "$BUILD_DIR" --no-build --small \
    --json "$TMP/roofline.json" >"$TMP/roofline.out" 2>&1 ||
    { cat "$TMP/roofline.out" >&2; fail "roofline.sh exited non-zero"; }
for t in F16 Q8_0 Q4_0; do
    for n in 1 2; do
        grep -Eq "^$t threads=$n decode_tok_s=$num bandwidth_GBs=$num roofline=$num read_1GiB_GBs=$num triad_GBs=$num roofline_triad=$num\$" "$TMP/roofline.out" ||
            { cat "$TMP/roofline.out" >&2; fail "roofline.sh: no $t threads=$n line"; }
    done
done
grep -Eq "^# weight bytes per token: q8_0 [1-9][0-9]*\$" "$TMP/roofline.out" ||
    fail "roofline.sh: no weight bytes line"
grep -q "^# load average at start: " "$TMP/roofline.out" || fail "roofline.sh: no machine header"
check_json "$TMP/roofline.json" roofline 6 threads decode_tok_s bandwidth_GBs roofline

# compare: the baton arms (llama.cpp needs node and the npm package: not here)
"$SRC_DIR/bench/compare-llamacpp.sh" --build "$BUILD_DIR" --no-build --small --no-llamacpp \
    --threads 1 --json "$TMP/compare.json" >"$TMP/compare.out" 2>&1 ||
    { cat "$TMP/compare.out" >&2; fail "compare-llamacpp.sh exited non-zero"; }
grep -Eq "^baton_inproc type=q8_0 threads=1 prefill_tok_s=$num decode_tok_s=$num decode_d0_tok_s=$num\$" \
    "$TMP/compare.out" || { cat "$TMP/compare.out" >&2; fail "compare-llamacpp.sh: no baton_inproc line"; }
for arm in baton_batond1 baton_batond2; do
    grep -Eq "^$arm type=q8_0 threads=1 prefill_tok_s=$num decode_tok_s=$num\$" "$TMP/compare.out" ||
        { cat "$TMP/compare.out" >&2; fail "compare-llamacpp.sh: no $arm line"; }
done
grep -Eq "^ratio baton_batond1/baton_inproc type=q8_0 threads=1 decode=$num cost_pct=-?$num\$" "$TMP/compare.out" ||
    fail "compare-llamacpp.sh: no batond cost line"
grep -q "^# llamacpp: not run (--no-llamacpp)" "$TMP/compare.out" ||
    fail "compare-llamacpp.sh: llama.cpp arm not reported as skipped"
check_json "$TMP/compare.json" compare-llamacpp 3 stages threads prefill_tok_s decode_tok_s

# kernel-ab: the working tree against HEAD, one tiny case (needs git and a
# clone; not in the sanitizer build, whose libraries need the sanitizer's
# runtime that kernel-ab's plain link does not bring)
if [ -z "${BATON_ASAN:-}" ] && git -C "$SRC_DIR" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
    "$SRC_DIR/bench/kernel-ab.sh" --build "$BUILD_DIR" --rev HEAD --calls 3 q4_k:512:9:2 q8_0:256:16:1 \
        >"$TMP/kab.out" 2>&1 || { cat "$TMP/kab.out" >&2; fail "kernel-ab.sh exited non-zero"; }
    for t in "q4_k k=512 rows=9 matrices=2" "q8_0 k=256 rows=16 matrices=1"; do
        grep -Eq "^kernel_ab type=$t calls=3 A_best_GBs=$num A_median_GBs=$num B_best_GBs=$num B_median_GBs=$num B_over_A_median=$num bits=equal\$" \
            "$TMP/kab.out" || { cat "$TMP/kab.out" >&2; fail "kernel-ab.sh: no $t line"; }
    done
    # both files: the level the CPU has runs, the one it lacks exits 3 (not
    # SIGILL: kernel_ab checks before it calls a kernel)
    has512=1
    for f in avx512f avx512bw avx512dq avx512vl avx512_vnni; do
        grep -m1 '^flags' /proc/cpuinfo | grep -qw "$f" || has512=0
    done
    for f in matmul_avx2.c:0 matmul_avx512.c:$((1 - has512)); do
        want=$((${f#*:} * 3))
        rc=0; "$SRC_DIR/bench/kernel-ab.sh" --build "$BUILD_DIR" --rev HEAD --calls 2 \
            --file "src/compute/cpu/${f%:*}" q4_0:64:8:1 >"$TMP/kab2.out" 2>&1 || rc=$?
        [ "$rc" -eq "$want" ] || { cat "$TMP/kab2.out" >&2; fail "kernel-ab.sh --file ${f%:*}: rc $rc, want $want"; }
        [ "$want" -eq 0 ] || grep -q "^kernel_ab: this CPU lacks the avx512 level" "$TMP/kab2.out" ||
            fail "kernel-ab.sh --file ${f%:*}: no 'lacks the level' message"
    done
    rc=0; "$SRC_DIR/bench/kernel-ab.sh" --build "$BUILD_DIR" --rev no-such-rev >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || fail "kernel-ab.sh --rev no-such-rev: rc $rc, want 2"
    for bad in "--calls 0" "q9_k:256:1:1" "q4_k:256:1" "q4_k:100:1:1" "q4_0:32:0:1"; do
        # shellcheck disable=SC2086
        rc=0; "$SRC_DIR/bench/kernel-ab.sh" --build "$BUILD_DIR" $bad >/dev/null 2>&1 || rc=$?
        [ "$rc" -eq 2 ] || fail "kernel-ab.sh $bad: rc $rc, want 2"
    done
fi

# transport: raw references, both batond arms, the hand-off arms
"$SRC_DIR/bench/transport.sh" --build "$BUILD_DIR" --no-build --small \
    --json "$TMP/transport.json" >"$TMP/transport.out" 2>&1 ||
    { cat "$TMP/transport.out" >&2; fail "transport.sh exited non-zero"; }
grep -Eq "^raw send_1MiB=$num MB/s\$" "$TMP/transport.out" || fail "transport.sh: no raw stream line"
grep -Eq "^raw rtt_1B=$num us\$" "$TMP/transport.out" || fail "transport.sh: no raw round trip line"
for arm in nokey key; do
    for f in set_1MiB get_1MiB; do
        grep -Eq "^$arm $f=$num MB/s raw=$num ratio=$num\$" "$TMP/transport.out" ||
            { cat "$TMP/transport.out" >&2; fail "transport.sh: no $arm $f line"; }
    done
    for f in get_4B_rtt graph_compute_rtt handoff_hub_16KiB; do
        grep -Eq "^$arm $f=$num us raw=$num ratio=$num diff_us=-?$num\$" "$TMP/transport.out" ||
            { cat "$TMP/transport.out" >&2; fail "transport.sh: no $arm $f line"; }
    done
    grep -Eq "^$arm handoff_direct_16KiB=" "$TMP/transport.out" ||
        fail "transport.sh: no $arm direct hand-off line"
done
# raw: 4 figures; nokey, key: 5 each and the direct hand-off
check_json "$TMP/transport.json" transport 16
# transport_ab: two builds (here the same one twice), keyed, both figures
"$SRC_DIR/bench/transport_ab.sh" --old "$BUILD_DIR" --new "$BUILD_DIR" --reps 2 --mib 1 \
    >"$TMP/ab.out" 2>&1 || { cat "$TMP/ab.out" >&2; fail "transport_ab.sh exited non-zero"; }
for f in set get; do
    grep -Eq "^${f}_1MiB_mac old=$num MB/s \($num\.\.$num\) new=$num MB/s \($num\.\.$num\) new/old=$num\$" \
        "$TMP/ab.out" || { cat "$TMP/ab.out" >&2; fail "transport_ab.sh: no $f line"; }
done
[ "$(grep -c '^# round [12], position [12], \(old\|new\): ' "$TMP/ab.out")" -eq 4 ] ||
    { cat "$TMP/ab.out" >&2; fail "transport_ab.sh: not 4 cells"; }
rc=0
"$SRC_DIR/bench/transport_ab.sh" --old "$BUILD_DIR" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "transport_ab.sh without --new: exit $rc, want 2"
# llamacpp-build.sh: a missing or bad --jobs / --dir is a usage error (2)
# named on stderr, before any download or build
for bad in "--jobs" "--jobs abc" "--jobs 0" "--jobs 2x" "--dir"; do
    rc=0
    # shellcheck disable=SC2086  # $bad is split into its words on purpose
    "$SRC_DIR/bench/llamacpp-build.sh" $bad >/dev/null 2>"$TMP/llb.err" || rc=$?
    [ "$rc" -eq 2 ] || fail "llamacpp-build.sh $bad: exit $rc, want 2"
    grep -q -- "${bad%% *}" "$TMP/llb.err" || fail "llamacpp-build.sh $bad: stderr names no option"
done
# rawtcp's lists: a bad one is a usage error (2) before any connection;
# lenient spellings ("1,,2", "064", " 4") were taken, and transport.sh then
# looked up per-call figures under the list's spelling and printed none
for bad in "" "," "0," ",0" "1,,2" "064" " 4" "+4" "-1" "4x" "1048577" \
    "99999999999999999999999" "1,2,3,4,5,6,7,8,9"; do
    rc=0
    "$BUILD_DIR/bench/bench_rawtcp" run 1 --call-kib-list "$bad" >/dev/null 2>"$TMP/raw.err" || rc=$?
    [ "$rc" = 2 ] && grep -q "^rawtcp: --call-kib-list: '$bad': " "$TMP/raw.err" ||
        fail "rawtcp --call-kib-list '$bad': exit $rc: $(cat "$TMP/raw.err")"
done
# good lists get as far as the connection (port 1: refused, exit 1)
for good in 0 1048576 0,64,256,1024,4096,1,2,3; do
    rc=0
    "$BUILD_DIR/bench/bench_rawtcp" run 1 --call-kib-list "$good" >/dev/null 2>"$TMP/raw.err" || rc=$?
    [ "$rc" = 1 ] && grep -q "connect" "$TMP/raw.err" ||
        fail "rawtcp --call-kib-list '$good': exit $rc: $(cat "$TMP/raw.err")"
done
# the tools' --help: exit 0 on stdout (bench_triad's said "usage: triad"
# on stderr with exit 2, and nothing of --kernel read's meaning)
for b in bench_triad bench_rawtcp; do
    rc=0
    "$BUILD_DIR/bench/$b" --help >"$TMP/help.out" 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 0 ] && [ ! -s "$TMP/help.err" ] && grep -q "^usage: $b " "$TMP/help.out" ||
        fail "$b --help: exit $rc: $(cat "$TMP/help.out" "$TMP/help.err")"
done
"$BUILD_DIR/bench/bench_triad" --help | grep -q "^  --kernel read " || fail "bench_triad --help: --kernel read"
if [ -x "$BUILD_DIR/bench/bench_kernels" ]; then
    "$BUILD_DIR/bench/bench_kernels" --help | grep -q "iq4_nl,iq4_xs (default all)" || fail "bench_kernels --help"
    rc=0; "$BUILD_DIR/bench/bench_kernels" --types q5_0,q4_k_m >/dev/null 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 2 ] && grep -q "^bench_kernels: --types: 'q4_k_m' (want " "$TMP/help.err" ||
        fail "bench_kernels --types q4_k_m: exit $rc: $(cat "$TMP/help.err")"
    rc=0; "$BUILD_DIR/bench/bench_kernels" --isa sse >/dev/null 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "bench_kernels --isa sse: exit $rc (it ran as avx512)"
fi
# an option without its value: a usage error naming it (bash said "$2:
# unbound variable", exit 1)
for sv in "roofline.sh --types" "transport.sh --reps" "compare-llamacpp.sh --types" "topology.sh --model" \
    "ring_latency.sh --npl" "batched-llamacpp.sh --llamacpp-dir"; do
    rc=0; "$SRC_DIR/bench/${sv% *}" "${sv#* }" >/dev/null 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 2 ] && grep -qx "${sv% *}: ${sv#* } needs a value (see --help)" "$TMP/help.err" ||
        fail "$sv: exit $rc: $(cat "$TMP/help.err")"
done
# a bad value is a usage error too (exit 2), named before anything builds
for sv in "--shape|d999|roofline.sh: --shape must be d768 or d4096, not 'd999' (see --help)" \
    "--reps|0|roofline.sh: --reps must be >= 1 (see --help)"; do
    opt=${sv%%|*}; rest=${sv#*|}; val=${rest%%|*}; want=${rest#*|}
    rc=0; "$SRC_DIR/bench/roofline.sh" "$opt" "$val" >/dev/null 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 2 ] && grep -qxF -- "$want" "$TMP/help.err" ||
        fail "roofline.sh $opt $val: exit $rc: $(cat "$TMP/help.err")"
done
rc=0; "$SRC_DIR/bench/direct_path.sh" --help >"$TMP/help.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "^# bench/direct_path.sh BUILD_DIR \[REPS\]" "$TMP/help.out" ||
    fail "direct_path.sh --help: exit $rc: $(cat "$TMP/help.out")"
if [ -x "$BUILD_DIR/bench/bench_kernels" ]; then
    rc=0; "$BUILD_DIR/bench/bench_kernels" --reps 0 >/dev/null 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 2 ] && grep -qx -- "bench_kernels: --reps: '0' (want 1..41)" "$TMP/help.err" ||
        fail "bench_kernels --reps 0: exit $rc (it ran 9): $(cat "$TMP/help.err")"
    for bad in "--m|0|bench_kernels: --m: '0' (want 1..4096 columns)" \
        "--threads|0|bench_kernels: --threads: '0' (want one or two counts 1..64, e.g. 1,2)" \
        "--threads|2,|bench_kernels: --threads: '2,' (want one or two counts 1..64, e.g. 1,2)" \
        "--k|96x|bench_kernels: --k: '96x' (want a multiple of 32 in 32..65536)"; do
        opt=${bad%%|*}; rest=${bad#*|}; val=${rest%%|*}; want=${rest#*|}
        rc=0; "$BUILD_DIR/bench/bench_kernels" "$opt" "$val" >/dev/null 2>"$TMP/help.err" || rc=$?
        [ "$rc" = 2 ] && grep -qxF -- "$want" "$TMP/help.err" ||
            fail "bench_kernels $opt $val: exit $rc: $(cat "$TMP/help.err")"
    done
    rc=0; "$BUILD_DIR/bench/bench_kernels" --m >/dev/null 2>"$TMP/help.err" || rc=$?
    [ "$rc" = 2 ] && grep -qx -- "bench_kernels: --m needs a value (--help)" "$TMP/help.err" ||
        fail "bench_kernels --m (no value): exit $rc: $(cat "$TMP/help.err")"
fi
rc=0; "$BUILD_DIR/bench/bench_triad" --kernel write >/dev/null 2>"$TMP/help.err" || rc=$?
[ "$rc" = 2 ] && grep -q "^usage: bench_triad " "$TMP/help.err" || fail "bench_triad --kernel write: exit $rc"
echo "PASS: bench scripts run and print their formats and JSON"
