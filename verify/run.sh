#!/usr/bin/env bash
# Proof gate for the wire decoders (issue 5, verify/PROVEN.md).
#
# Runs Frama-C WP with run-time-error goals over the pure decoder files of
# src/wire and src/core/types.c, with the flags they are built with (from the
# build dir's compile_commands.json), and fails unless every goal is proved
# and at least as many goals are proved as verify/goals.min records.
#
# usage: verify/run.sh [BUILD_DIR]          (default: ./build)
# env:   BATON_WP_TIMEOUT  prover timeout per goal, seconds (default 10)
#        BATON_WP_ROOT     source tree to prove (default: this checkout);
#                          used by the proof_bites test on a broken copy
#        BATON_WP_FCT      prove only these functions of the first group
#                          (comma-separated); such a partial run never
#                          checks goals.min
#        BATON_WP_LOGS     directory for the Frama-C logs (default: BUILD_DIR/proof-logs)
# exit:  0 iff all goals are proved (and, for a full run, count >= goals.min).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=${BATON_WP_ROOT:-$(cd "$here/.." && pwd)}
build=$(cd "${1:-$root/build}" && pwd) || { echo "proof: no build dir" >&2; exit 2; }
timeout=${BATON_WP_TIMEOUT:-10}
db=$build/compile_commands.json

# The proven set, in groups that are closed under calls (a function and every
# proven function it calls are in one group), so each group is one Frama-C run
# whose report is complete; the groups run in parallel. Every .c file of the
# wire library must be in a group or in UNPROVEN (reason in PROVEN.md).
PROOF_GROUPS=("src/wire/bounds.c src/wire/decode.c src/core/types.c" "src/wire/peer.c" "src/wire/pipeline.c")
PROOF_GROUPS+=("src/core/access.c") # server/graph address arithmetic (issue 16)
UNPROVEN=(src/wire/encode.c) # encoders: write host values, never read wire bytes
PROOF_FILES=()
for g in "${PROOF_GROUPS[@]}"; do PROOF_FILES+=($g); done

for tool in frama-c why3 z3 cvc4; do
    command -v "$tool" >/dev/null || { echo "proof: $tool not installed" >&2; exit 2; }
done
[ -f "$db" ] || { echo "proof: $db missing (configure with CMake first)" >&2; exit 2; }
# Why3 must know the provers, or Frama-C stops with "Prover not found".
provers=$(why3 config list-provers 2>/dev/null)
if ! grep -q '^Z3 ' <<<"$provers" || ! grep -q '^CVC4 ' <<<"$provers"; then
    why3 config detect >/dev/null 2>&1
fi

# Gate the file list against what the wire library is actually built from.
wire_files=$(grep -o '"file": *"[^"]*/src/wire/[^"]*\.c"' "$db" | sed 's/.*"\([^"]*\)"$/\1/' |
             sed "s|^$root/||" | sort -u)
if [ -z "$wire_files" ]; then
    echo "proof: no src/wire files in $db" >&2
    exit 2
fi
for f in $wire_files; do
    case " ${PROOF_FILES[*]} ${UNPROVEN[*]} " in
    *" $f "*) ;;
    *) echo "proof: $f is built into baton_wire but neither proven nor excluded" >&2; exit 1 ;;
    esac
done

logs=${BATON_WP_LOGS:-$build/proof-logs}
mkdir -p "$logs"
rm -f "$logs"/wp*.log "$logs"/first-try-wp*.log
wp=(frama-c -json-compilation-database "$build" -machdep x86_64
    -warn-unsigned-overflow -warn-unsigned-downcast -warn-signed-downcast
    -wp -wp-rte -wp-prover cvc4,z3 -wp-timeout "$timeout" -wp-par 2)
gate=(-then -report-classify -report-unclassified-unknown ERROR)

start=$(date +%s)
pids=()
i=0
for g in "${PROOF_GROUPS[@]}"; do
    files=()
    for f in $g; do files+=("$root/$f"); done
    if [ -n "${BATON_WP_FCT:-}" ]; then
        # a partial run proves only the named functions, in the first group
        [ "$i" -eq 0 ] || break
        "${wp[@]}" "${files[@]}" -wp-fct "$BATON_WP_FCT" "${gate[@]}" >"$logs/wp$i.log" 2>&1 &
    else
        "${wp[@]}" "${files[@]}" "${gate[@]}" >"$logs/wp$i.log" 2>&1 &
    fi
    pids+=($!)
    i=$((i + 1))
done
rcs=()
for pid in "${pids[@]}"; do
    r=0
    wait "$pid" || r=1
    rcs+=("$r")
done
# A goal that timed out (a loaded host: the groups run side by side, each
# with 2 prover processes) is tried again: the group alone, with 3 x the
# timeout. The gate below still wants every goal proved.
rc=0
for ((i = 0; i < ${#rcs[@]}; i++)); do
    log=$logs/wp$i.log
    line=$(grep -m1 'Proved goals:' "$log" || true)
    p=$(sed 's/.*Proved goals: *\([0-9]*\) *\/ *\([0-9]*\).*/\1/' <<<"$line")
    t=$(sed 's/.*Proved goals: *\([0-9]*\) *\/ *\([0-9]*\).*/\2/' <<<"$line")
    if [ "${rcs[$i]}" -eq 0 ] && [ -n "$line" ] && [ "$p" = "$t" ]; then
        continue
    fi
    if grep -q 'Timeout\|Unknown error' "$log" && [ -z "${BATON_WP_FCT:-}" ]; then
        echo "proof: group $((i + 1)): $((t - p)) goal(s) not proved within ${timeout}s; trying the group again alone with $((3 * timeout))s"
        mv "$log" "$logs/first-try-wp$i.log"
        files=()
        for f in ${PROOF_GROUPS[$i]}; do files+=("$root/$f"); done
        retry=("${wp[@]}")
        retry[${#retry[@]} - 3]=$((3 * timeout))
        "${retry[@]}" "${files[@]}" "${gate[@]}" >"$log" 2>&1 || rc=1
    else
        rc=1
    fi
done
elapsed=$(( $(date +%s) - start ))

proved=0
total=0
for log in "$logs"/wp*.log; do
    line=$(grep -m1 'Proved goals:' "$log" || true)
    if [ -z "$line" ]; then
        echo "proof: no goal count in $log"
        rc=1
        continue
    fi
    p=$(sed 's/.*Proved goals: *\([0-9]*\) *\/ *\([0-9]*\).*/\1/' <<<"$line")
    t=$(sed 's/.*Proved goals: *\([0-9]*\) *\/ *\([0-9]*\).*/\2/' <<<"$line")
    proved=$((proved + p))
    total=$((total + t))
done
unproved=$((total - proved))
echo "proof: $proved / $total goals proved, $unproved unproved, ${elapsed}s (logs: $logs)"
grep -h -A2 '^\[wp\] \[Failed\]\|^\[wp\] \[Unknown\]' "$logs"/wp*.log | head -40

status=0
if [ "$rc" -ne 0 ] || [ "$unproved" -ne 0 ] || [ "$total" -eq 0 ]; then
    echo "proof: FAILED (frama-c exit $rc)"
    grep -h 'ERROR\|Error' "$logs"/wp*.log | head -20
    status=1
elif [ -z "${BATON_WP_FCT:-}" ]; then
    min=$(tr -dc '0-9' <"$here/goals.min")
    if [ "$proved" -lt "${min:-0}" ]; then
        echo "proof: FAILED: $proved goals proved, fewer than verify/goals.min ($min)"
        status=1
    else
        echo "proof: OK (goals.min $min)"
    fi
else
    echo "proof: OK for $BATON_WP_FCT (partial run, goals.min not checked)"
fi
exit $status
