#!/bin/bash
# The direct path on the real model (stories260K, greedy, 48 tokens), two
# prompts: 3 stages and 2 stages, each with --p2p on and --p2p off (and
# BATON_P2P=0), give the token ids of the in-process run (the reference ids
# of test_model_reference.sh for the first prompt). Per decode step, from
# --stats-json: the hub arm moves the hidden state with GET_TENSOR and
# SET_TENSOR at both boundaries and waits for 3 replies per step; the direct
# arm sends one GRAPH_RUN per stage (the hand-off inside it), no
# hidden-state bytes through the coordinator and at most 200 bytes per
# stage (tags included), waits once per step (for the token), and the
# middle server B receives from A and sends to C (each server counts this
# session's own peer bytes). The servers hold the peer key and
# allow-lists (A -> B -> C); a server without the peer key does not
# advertise PEER_COPY, so that boundary stays on the hub path.
source "$(dirname "$0")/lib.sh"
need_model

REF_IDS='[432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432]'
PROMPT2="Tom and his dog went to the park"

make_keys
start_chain a b c # the allow-lists name the next server
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K" start_server nopeer
A=127.0.0.1:$PORT_a
B=127.0.0.1:$PORT_b
C=127.0.0.1:$PORT_c

# run_arm NAME PROMPT ARGS...
run_arm() {
    local name=$1 prompt=$2
    shift 2
    if ! "$BATON" run --model "$MODEL" --prompt "$prompt" -n 48 --key "$K" \
        --ids-file "$TMP/$name.json" --stats-json "$TMP/$name.stats" --quiet "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        cat "$TMP/$name.err" >&2
        fail "arm $name exited non-zero"
    fi
}

for p in 1 2; do
    prompt="Once upon a time"
    [ $p = 2 ] && prompt=$PROMPT2
    run_arm "p${p}_local" "$prompt" --servers local
    want=$(field "$TMP/p${p}_local.json" 'j["generated"]')
    if [ $p = 1 ]; then
        [ "$want" = "$REF_IDS" ] || fail "in-process run: $want"
    fi
    for arm in "s3on|--servers $A,$B,$C --split 1,1,1 --p2p on" \
        "s3off|--servers $A,$B,$C --split 1,1,1 --p2p off" \
        "s2on|--servers $B,$C --split 1,1 --p2p on" \
        "s2off|--servers $B,$C --split 1,1 --p2p off"; do
        name=p${p}_${arm%%|*}
        # shellcheck disable=SC2086
        run_arm "$name" "$prompt" ${arm#*|}
        [ "$(field "$TMP/$name.json" 'j["generated"]')" = "$want" ] ||
            fail "$name: ids differ from the in-process run"
        echo "ok: prompt $p ${arm%%|*}: in-process ids"
    done
    BATON_P2P=0 run_arm "p${p}_env" "$prompt" --servers "$A,$B,$C" --split 1,1,1
    [ "$(field "$TMP/p${p}_env.json" 'j["generated"]')" = "$want" ] || fail "BATON_P2P=0: ids"
    [ "$(field "$TMP/p${p}_env.stats" 'j["direct_boundaries"]')" = 0 ] || fail "BATON_P2P=0 used the direct path"
done

# per decode step, 3 stages (hidden state: 64 floats = 256 bytes per token)
S=$TMP/p1_s3off.stats
check() { # check FILE EXPR MESSAGE
    [ "$(field "$1" "$2")" = True ] || fail "$3: $(cat "$1")"
}
st='j["per_step"]["stages"]'
check "$S" 'j["direct_boundaries"] == 0 and j["decode_steps"] == 47' "hub arm: boundaries"
check "$S" '"COPY_TENSOR_TO" not in j["per_step"]["commands"]' "hub arm: a COPY_TENSOR_TO"
check "$S" "$st[0][\"hidden_gets\"] == 1 and $st[1][\"hidden_sets\"] == 1 and $st[1][\"hidden_gets\"] == 1 and $st[2][\"hidden_sets\"] == 1" \
    "hub arm: hidden-state GET and SET at both boundaries"
check "$S" "$st[0][\"commands\"][\"GET_TENSOR\"][\"count\"] == 1 and $st[1][\"commands\"][\"SET_TENSOR\"][\"count\"] == 1" \
    "hub arm: GET_TENSOR / SET_TENSOR counts"
check "$S" 'j["per_step"]["coordinator_waits"] == 3' "hub arm: waits per step"
check "$S" 'j["per_step"]["hidden_state_bytes"] == 4 * 256' "hub arm: hidden-state bytes"
check "$S" "all(s[\"peer_bytes_sent\"] == 0 and s[\"peer_bytes_received\"] == 0 for s in $st)" \
    "hub arm: peer bytes"
echo "ok: hub arm: hidden state GET + SET at both boundaries, no COPY_TENSOR_TO, 1024 B/step through the coordinator"

S=$TMP/p1_s3on.stats
check "$S" 'j["direct_boundaries"] == 2' "direct arm: boundaries"
check "$S" 'j["per_step"]["commands"]["GRAPH_RUN"]["count"] == 3 and "COPY_TENSOR_TO" not in j["per_step"]["commands"]' "direct arm: one GRAPH_RUN per stage"
check "$S" "all(list(s['commands'].keys()) == ['GRAPH_RUN'] and s['commands']['GRAPH_RUN']['request_bytes'] <= 200 for s in $st)" \
    "direct arm: at most 200 bytes per stage"
check "$S" 'j["per_step"]["coordinator_waits"] == 1' "direct arm: waits per step"
check "$S" 'j["per_step"]["hidden_state_bytes"] == 0' "direct arm: hidden-state bytes through the coordinator"
check "$S" "all(s[\"hidden_gets\"] == 0 and s[\"hidden_sets\"] == 0 for s in $st)" "direct arm: hub transfers"
check "$S" "$st[0][\"copies_done\"] == 1 and $st[1][\"copies_done\"] == 1 and $st[0][\"copies_not_done\"] == 0" \
    "direct arm: copies done"
# three endpoints in one run: B receives from A and sends to C; a
# PEER_WRITE of one token is 24 + 40 + 256 + 16 = 336 bytes
check "$S" "$st[0][\"peer_bytes_sent\"] == 336 and $st[0][\"peer_bytes_received\"] == 0" "direct arm: A's peer bytes"
check "$S" "$st[1][\"peer_bytes_received\"] == 336 and $st[1][\"peer_bytes_sent\"] == 336" "direct arm: B's peer bytes"
check "$S" "$st[2][\"peer_bytes_received\"] == 336 and $st[2][\"peer_bytes_sent\"] == 0" "direct arm: C's peer bytes"
check "$S" "'GET_TENSOR' not in $st[0][\"commands\"] and 'GET_TENSOR' not in $st[1][\"commands\"]" \
    "direct arm: a hidden-state GET"
grep -q "plan: stage 1 -> 2 direct" "$TMP/p1_s3on.err" && grep -q "plan: stage 2 -> 3 direct" "$TMP/p1_s3on.err" ||
    fail "direct arm: plan lines"
grep -q "hub" "$TMP/p1_s3on.err" && fail "direct arm: a hub plan line"
grep -qx "plan: stage 1 -> 2 hub (--p2p off)" "$TMP/p1_s3off.err" && grep -qx "plan: stage 2 -> 3 hub (--p2p off)" "$TMP/p1_s3off.err" ||
    fail "hub arm: plan lines: $(cat "$TMP/p1_s3off.err")"
grep -qx "plan: stage 1 -> 2 hub (BATON_P2P=0)" "$TMP/p1_env.err" || fail "BATON_P2P=0: plan line"
grep -q "authenticated (peer role" "$TMP/batond.b.log" && grep -q "authenticated (peer role" "$TMP/batond.c.log" ||
    fail "no peer-role sessions on B and C"
echo "ok: direct arm: one GRAPH_RUN (<= 200 B) per stage, 1 wait, 0 hidden-state bytes through the coordinator; B received from A and sent to C"
check "$TMP/p1_s2on.stats" 'j["direct_boundaries"] == 1 and j["per_step"]["hidden_state_bytes"] == 0' "2 stages direct"

# a server without the peer key: that boundary stays on the hub path
run_arm nopeer "Once upon a time" --servers "$A,$B,127.0.0.1:$PORT_nopeer" --split 1,1,1 --p2p on
[ "$(field "$TMP/nopeer.json" 'j["generated"]')" = "$REF_IDS" ] || fail "nopeer: ids"
check "$TMP/nopeer.stats" "j['direct_boundaries'] == 1 and $st[0]['direct_to_next'] and not $st[1]['direct_to_next']" \
    "nopeer: only stage 1 -> 2 direct"
grep -q "^plan: stage 1 -> 2 direct" "$TMP/nopeer.err" &&
    grep -qx "plan: stage 2 -> 3 hub (stage 3 at 127.0.0.1:$PORT_nopeer does not offer the direct path: batond without --peer-key)" \
        "$TMP/nopeer.err" || fail "nopeer: plan lines: $(cat "$TMP/nopeer.err")"
# ... and the decode ring's line names which end lacks the key
grep -qx "plan: decode ring off: tokens through the coordinator (stage 1 and the last stage both need the peer key (batond --peer-key); the last stage has none)" \
    "$TMP/nopeer.err" || fail "nopeer: ring line: $(grep 'decode ring' "$TMP/nopeer.err")"
check "$TMP/nopeer.stats" 'j["per_step"]["hidden_state_bytes"] == 2 * 256' "nopeer: one hub boundary"
echo "ok: a server without the peer key keeps its boundary on the hub path"

# a notice while the text streams (the ring is not allow-listed: said at its
# first hand-off, during decode) leaves redirected stdout exactly the text
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 16 --servers local \
    >"$TMP/text_local.out" 2>/dev/null || fail "local text run"
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 16 --key "$K" --servers "$A,$B,$C" \
    >"$TMP/text_split.out" 2>"$TMP/text_split.err" || fail "split text run"
grep -q "(decode ring): .* does not allow-list stage 1" "$TMP/text_split.err" ||
    fail "no ring notice: $(cat "$TMP/text_split.err")"
cmp "$TMP/text_local.out" "$TMP/text_split.out" ||
    fail "stdout is not the text: $(od -c "$TMP/text_split.out" | head)"
echo "ok: a notice during decode leaves redirected stdout exactly the generated text"

# --stats prints the same, and usage errors
"$BATON" run --model "$MODEL" --prompt "Once upon a time" -n 4 --key "$K" --servers "$A,$B,$C" \
    --stats --quiet >/dev/null 2>"$TMP/stats.err" || fail "--stats run"
# peer bytes are per decode step, as the table's heading says (336 per
# PEER_WRITE of one token; the totals over the window would be 3 x 336)
grep -q "^stats: per decode step (average over 3 steps), direct path" "$TMP/stats.err" &&
    grep -q "^  1      GRAPH_RUN " "$TMP/stats.err" &&
    grep -q "^  coordinator waits for a reply it needs: 1.00 per step (pipelined)$" "$TMP/stats.err" &&
    grep -q "^  stage 1: .*, peer bytes sent 336.0 received 0.0 per step (counted by the server, this session only)$" "$TMP/stats.err" &&
    grep -q "^  stage 2: .*, peer bytes sent 336.0 received 336.0 per step " "$TMP/stats.err" ||
    fail "--stats output: $(cat "$TMP/stats.err")"
rc=0
"$BATON" run --model "$MODEL" --prompt x --p2p maybe >/dev/null 2>"$TMP/usage.err" || rc=$?
[ $rc = 2 ] && grep -q -- "--p2p: 'maybe' is not on or off" "$TMP/usage.err" || fail "--p2p maybe: exit $rc"
rc=0
"$BATON" run --model "$MODEL" --prompt x --servers "$A@nohost" >/dev/null 2>"$TMP/usage.err" || rc=$?
[ $rc = 2 ] || fail "--servers with a bad peer address: exit $rc"
echo "PASS"
