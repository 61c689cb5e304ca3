#!/bin/bash
# The real model (stories260K) on 3 keyed servers gives the reference token
# ids (REF_IDS of test_model_reference.sh), with --key and with
# BATON_KEY_FILE, with one server encrypting, and on keyed in-process
# stages; without a key the run fails naming the stage and the remedy.
source "$(dirname "$0")/lib.sh"
need_model

REF_IDS='[432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432]'

K="$TMP/client.key"
"$BATON" keygen -o "$K" 2>/dev/null
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K" start_server a
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --encrypt" start_server b
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K" start_server c
SERVERS=127.0.0.1:$PORT_a,127.0.0.1:$PORT_b,127.0.0.1:$PORT_c

run_arm() { # run_arm NAME ARGS...
    local name=$1
    shift
    if ! "$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 48 \
        --ids-file "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        cat "$TMP/$name.err" >&2
        fail "arm $name exited non-zero"
    fi
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated"])' "$TMP/$name.json")
    [ "$got" = "$REF_IDS" ] || fail "$name: generated $got"
    echo "ok: $name"
}
run_arm keyed3 --servers "$SERVERS" --split 1,1,1 --key "$K"
BATON_KEY_FILE="$K" run_arm keyfile_env --servers "$SERVERS" --split 1,1,1
run_arm local_keyed --servers local --split 1,1,1 --key "$K"
for s in a b c; do
    grep -q "authenticated (client role" "$TMP/batond.$s.log" || fail "server $s: no authenticated session"
done
grep -q "authenticated (client role, encrypted)" "$TMP/batond.b.log" || fail "server b did not encrypt"

rc=0
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 4 --servers "$SERVERS" \
    >"$TMP/nokey.out" 2>"$TMP/nokey.err" || rc=$?
[ "$rc" -eq 1 ] || fail "a run without a key exited $rc"
grep -q "stage 1 (127.0.0.1:$PORT_a): connect failed: E_AUTH.*--key" "$TMP/nokey.err" ||
    fail "no clear message without a key: $(cat "$TMP/nokey.err")"
echo "PASS"
