#!/usr/bin/env bash
# Proof gate for the wire code (issues 5 and 16, verify/PROVEN.md).
#
# Runs Frama-C WP with run-time-error goals over the proven files, with the
# flags they are built with (from the build dir's compile_commands.json), and
# fails unless every goal is proved, no group takes a callee's contract on
# trust, and the proven functions, behaviors and lemmas are exactly those
# named in verify/proven.list.
#
# usage: verify/run.sh [--update-list] [BUILD_DIR]       (default: ./build)
#   --update-list  after a full run with every goal proved, rewrite
#                  verify/proven.list from this run's report (then review the
#                  diff and commit it)
# env:   BATON_WP_TIMEOUT  prover timeout per goal, seconds (default 60: five
#                          times the slowest goal measured on a loaded 2-core
#                          machine, PROVEN.md)
#        BATON_WP_ROOT     source tree to prove (default: this checkout);
#                          used by the proof_bites test on a broken copy
#        BATON_WP_FCT      prove only these functions (comma-separated) of
#                          group BATON_WP_GROUP (default 1); such a partial
#                          run never checks verify/proven.list
#        BATON_WP_LOGS     directory for the Frama-C logs (default: BUILD_DIR/proof-logs)
# exit:  0 iff all goals are proved (and, for a full run, the proven set
#        equals verify/proven.list).
set -u

here=$(cd "$(dirname "$0")" && pwd)
update=0
if [ "${1:-}" = "--update-list" ]; then
    update=1
    shift
fi
root=${BATON_WP_ROOT:-$(cd "$here/.." && pwd)}
build=$(cd "${1:-$root/build}" && pwd) || { echo "proof: no build dir" >&2; exit 2; }
timeout=${BATON_WP_TIMEOUT:-60}
db=$build/compile_commands.json
list=$here/proven.list

# The proven set, in groups that are closed under calls (a function and every
# proven function it calls are in one group), so each group is one Frama-C run
# whose report is complete; the groups run in parallel. One line per group;
# a new group's functions then go into proven.list (--update-list). Every .c
# file of the wire library must be in a group or in UNPROVEN (reason in
# PROVEN.md).
PROOF_GROUPS=(
    "src/wire/bounds.c src/wire/decode.c src/core/types.c"
    "src/wire/peer.c"
    "src/wire/pipeline.c"
    "src/wire/encode.c"
    "src/core/access.c" # server and graph address arithmetic (issue 16)
)
UNPROVEN=()
PROOF_FILES=()
for g in "${PROOF_GROUPS[@]}"; do PROOF_FILES+=($g); done

if [ "$update" -eq 1 ] && [ -n "${BATON_WP_FCT:-}" ]; then
    echo "proof: --update-list needs a full run (unset BATON_WP_FCT)" >&2
    exit 2
fi
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
rm -f "$logs"/wp*.log "$logs"/first-try-wp*.log "$logs"/proven.now
wp_base=(frama-c -json-compilation-database "$build" -machdep x86_64
         -warn-unsigned-overflow -warn-unsigned-downcast -warn-signed-downcast
         -wp -wp-rte -wp-prover cvc4,z3 -wp-par 2)
# -report prints each property's consolidated status, per function and
# behavior (the named list is read from it); -report-classify makes any
# unproved goal a Frama-C error (exit 1).
gate=(-then -report -report-classify -report-unclassified-unknown ERROR)

# prove_group INDEX TIMEOUT: one Frama-C run over group INDEX into wpINDEX.log.
prove_group() {
    local files=() f
    for f in ${PROOF_GROUPS[$1]}; do files+=("$root/$f"); done
    if [ -n "${BATON_WP_FCT:-}" ]; then
        files+=(-wp-fct "$BATON_WP_FCT")
    fi
    "${wp_base[@]}" -wp-timeout "$2" "${files[@]}" "${gate[@]}" >"$logs/wp$1.log" 2>&1
}

# goals LOG: "proved total" from a log's summary line (empty without one).
goals() {
    sed -n 's/.*Proved goals: *\([0-9]*\) *\/ *\([0-9]*\).*/\1 \2/p' "$1" | head -1
}

start=$(date +%s)
groups=()
if [ -n "${BATON_WP_FCT:-}" ]; then
    groups=($((${BATON_WP_GROUP:-1} - 1)))
else
    for ((i = 0; i < ${#PROOF_GROUPS[@]}; i++)); do groups+=("$i"); done
fi
pids=()
for i in "${groups[@]}"; do
    prove_group "$i" "$timeout" &
    pids+=($!)
done
rcs=()
for pid in "${pids[@]}"; do
    r=0
    wait "$pid" || r=1
    rcs+=("$r")
done
# A group with a goal that was not proved in time (a loaded host: the groups
# run side by side, each with 2 prover processes) is tried once more alone,
# with twice the timeout. The gate below still wants every goal proved.
rc=0
for ((k = 0; k < ${#groups[@]}; k++)); do
    i=${groups[$k]}
    read -r p t <<<"$(goals "$logs/wp$i.log")"
    if [ "${rcs[$k]}" -eq 0 ] && [ -n "${t:-}" ] && [ "$p" = "$t" ]; then
        continue
    fi
    if grep -q 'Timeout\|Unknown error' "$logs/wp$i.log" && [ -z "${BATON_WP_FCT:-}" ]; then
        echo "proof: group $((i + 1)): $((${t:-0} - ${p:-0})) goal(s) not proved within ${timeout}s; trying the group again alone with $((2 * timeout))s"
        mv "$logs/wp$i.log" "$logs/first-try-wp$i.log"
        prove_group "$i" $((2 * timeout)) || rc=1
    else
        rc=1
    fi
done
elapsed=$(( $(date +%s) - start ))

proved=0
total=0
for log in "$logs"/wp*.log; do
    read -r p t <<<"$(goals "$log")"
    if [ -z "${t:-}" ]; then
        echo "proof: no goal count in $log"
        rc=1
        continue
    fi
    proved=$((proved + p))
    total=$((total + t))
done
unproved=$((total - proved))
echo "proof: $proved / $total goals proved, $unproved unproved, ${elapsed}s (logs: $logs)"
grep -h -A2 '^\[wp\] \[Failed\]\|^\[wp\] \[Unknown\]' "$logs"/wp*.log | head -40

# The slowest proved goal: its prover time (Qed's, when Qed alone proved it),
# against the timeout it must stay five times below.
grep -h '^\[wp\] \[[^]]*\] Goal [^ ]* : Valid' "$logs"/wp*.log | awk -v limit="$timeout" '
    {
        ms = 0
        rest = $0
        sub(/.*: Valid/, "", rest)
        n = split(rest, part, "(")
        for (j = 2; j <= n; j++) {
            v = part[j]
            sub(/\).*/, "", v)
            if (v ~ /^[0-9.]+ms$/) { sub(/ms$/, "", v); t = v + 0 }
            else if (v ~ /^[0-9.]+s$/) { sub(/s$/, "", v); t = v * 1000 }
            else if (v ~ /^[0-9]+\047[0-9.]*s?$/) { split(v, mm, "\047"); sub(/s$/, "", mm[2]); t = (mm[1] * 60 + mm[2]) * 1000 }
            else continue
            if (t > ms) ms = t
        }
        if (ms > max) {
            max = ms
            name = $0
            sub(/.* Goal /, "", name)
            sub(/ .*/, "", name)
        }
    }
    END {
        if (name == "") exit
        printf "proof: slowest goal %s: %.1fs (timeout %ds)\n", name, max / 1000, limit
        if (max * 5 > limit * 1000)
            printf "proof: WARNING: the slowest goal needs more than a fifth of the timeout; raise the default of BATON_WP_TIMEOUT in run.sh (and PROVEN.md)\n"
    }'

# Named, not counted: the functions, behaviors and lemmas whose every
# property Frama-C reports as Valid (the consolidated status: a property
# proved under a hypothesis that is not itself proved is not Valid), one per
# line: `function`, `function:behavior`, `lemma:name`.
proven_set() {
    awk '
        /^--- Global Properties/ { sec = "\001"; next }
        /^--- Properties of Function \047/ {
            sec = $0
            sub(/^--- Properties of Function \047/, "", sec)
            sub(/\047.*$/, "", sec)
            seen[sec] = 1
            next
        }
        /^--- / { sec = ""; next }
        sec != "" && /^\[[^]]*\] / {
            st = $0
            sub(/^\[ */, "", st)
            sub(/ *\].*$/, "", st)
            if (sec == "\001") {
                if ($0 ~ /\] Lemma \047/ && st == "Valid") {
                    n = $0; sub(/.*Lemma \047/, "", n); sub(/\047.*/, "", n)
                    print "lemma:" n
                }
                next
            }
            if (st != "Valid")
                bad[sec] = 1
            if ($0 ~ /\] Behavior \047/ && st == "Valid") {
                b = $0; sub(/.*Behavior \047/, "", b); sub(/\047.*/, "", b)
                print sec ":" b
            }
        }
        END { for (f in seen) if (!(f in bad)) print f }
    ' "$@" | LC_ALL=C sort -u
}

# Functions whose contract a group assumes without proving it (Frama-C's
# "Extern": no body in that run): a group that is not closed under calls.
extern_fcts() {
    awk '
        /^--- Properties of Function \047/ {
            sec = $0
            sub(/^--- Properties of Function \047/, "", sec)
            sub(/\047.*$/, "", sec)
            next
        }
        /^--- / { sec = ""; next }
        sec != "" && /^\[ *Extern *\] / { print sec }
    ' "$@" | LC_ALL=C sort -u
}

status=0
extern=$(extern_fcts "$logs"/wp*.log)
if [ -n "$extern" ]; then
    echo "proof: FAILED: a group relies on contracts it does not prove (not closed under calls):"
    sed 's/^/  /' <<<"$extern"
    status=1
fi
if [ "$rc" -ne 0 ] || [ "$unproved" -ne 0 ] || [ "$total" -eq 0 ]; then
    echo "proof: FAILED (frama-c exit $rc)"
    grep -h 'ERROR\|Error' "$logs"/wp*.log | head -20
    status=1
elif [ "$status" -ne 0 ]; then
    :
elif [ -n "${BATON_WP_FCT:-}" ]; then
    echo "proof: OK for $BATON_WP_FCT (partial run, verify/proven.list not checked)"
else
    proven_set "$logs"/wp*.log >"$logs/proven.now"
    n_now=$(wc -l <"$logs/proven.now")
    if [ "$update" -eq 1 ]; then
        {
            echo "# Proven by verify/run.sh: every property of each function, behavior and"
            echo "# lemma below is Valid. Generated by verify/run.sh --update-list; the gate"
            echo "# fails when one of these is not proven or a proven one is missing here."
            cat "$logs/proven.now"
        } >"$list"
        echo "proof: OK; wrote $n_now entries to $list (review the diff and commit it)"
    else
        listed=$(grep -v '^#' "$list" 2>/dev/null | grep -v '^ *$' | LC_ALL=C sort -u)
        missing=$(LC_ALL=C comm -23 <(echo "$listed") "$logs/proven.now" | grep -v '^$')
        extra=$(LC_ALL=C comm -13 <(echo "$listed") "$logs/proven.now")
        if [ -n "$missing" ]; then
            echo "proof: FAILED: listed in verify/proven.list but not proven in this run:"
            sed 's/^/  /' <<<"$missing"
            status=1
        fi
        if [ -n "$extra" ]; then
            echo "proof: FAILED: proven but not named in verify/proven.list:"
            sed 's/^/  /' <<<"$extra"
            echo "proof: if that is intended, run 'verify/run.sh --update-list $build' and commit verify/proven.list"
            status=1
        fi
        if [ "$status" -eq 0 ]; then
            echo "proof: OK ($n_now functions, behaviors and lemmas, as named in verify/proven.list)"
        fi
    fi
fi
exit $status
