#!/bin/bash
# Direct path, destination side (docs/PROTOCOL.md "Direct path"): GRANT_WRITE
# and REVOKE_GRANT; every refused PEER_WRITE (no grant, revoked, another
# buffer's, past the range, after FREE_BUFFER, on a client-role
# connection) leaves the destination's bytes unchanged and closes the link;
# FREE_BUFFER while a PEER_WRITE is landing in it (a slow peer, through
# tests/integration/peer_relay.c) is safe, also under ASan (make test-asan);
# one session cannot hold more than max_peer_links_per_session links.
source "$(dirname "$0")/lib.sh"
CASES="$BUILD_DIR/tests/peer_cases"
RELAY="$BUILD_DIR/tests/peer_relay"

K="$TMP/client.key"
P="$TMP/peer.key"
"$BATON" keygen -o "$K" 2>/dev/null
"$BATON" keygen -o "$P" 2>/dev/null
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --peer-key $P --max-grants-per-session 3" start_server d

"$CASES" grants "$PORT_d" "$K" "$P" >"$TMP/grants.out" 2>&1 || {
    cat "$TMP/grants.out" >&2
    fail "grant and PEER_WRITE cases"
}
cat "$TMP/grants.out"
grep -q "PEER_WRITE: E_NOT_FOUND, closing" "$TMP/batond.d.log" || fail "no log line for a refused PEER_WRITE"

# a slow peer: 16 KiB every 5 ms towards the destination, held for 2 s
# once 1 MiB has passed, so the case's FREE_BUFFER and DEVICE_INFO come
# while the write still holds its pin (the next piece ends the write: under
# ASan load the 20 ms to it were once too short)
"$RELAY" --to "$PORT_d" --port-file "$TMP/port.relay" --mode slow --chunk 16384 --delay-ms 5 \
    --mark-after 1048576 --mark-file "$TMP/inflight" --hold-ms 2000 2>"$TMP/relay.log" &
PIDS+=("$!")
for _ in $(seq 200); do [ -s "$TMP/port.relay" ] && break; sleep 0.025; done
[ -s "$TMP/port.relay" ] || fail "relay did not start"
"$CASES" inflight "$PORT_d" "$(cat "$TMP/port.relay")" "$TMP/inflight" "$K" "$P" \
    >"$TMP/inflight.out" 2>&1 || {
    cat "$TMP/inflight.out" >&2
    fail "FREE_BUFFER during PEER_WRITE"
}
cat "$TMP/inflight.out"
kill -0 "$PID_d" || fail "the destination died"
# per-session peer links (max_peer_links_per_session): a source with one
# link per session and two allowed destinations
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --peer-key $P" start_server e
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --peer-key $P --peer 127.0.0.1:$PORT_d \
--peer 127.0.0.1:$PORT_e --max-peer-links-per-session 1" start_server s
"$CASES" links "$PORT_s" "$PORT_d" "$PORT_e" "$K" >"$TMP/links.out" 2>&1 || {
    cat "$TMP/links.out" >&2
    fail "per-session peer links"
}
cat "$TMP/links.out"
# a named client key's peer links together (client ... max_peer_links=1)
printf 'client = team %s max_peer_links=1\n' "$K" >"$TMP/team.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/team.policy --peer-key $P \
--peer 127.0.0.1:$PORT_d --peer 127.0.0.1:$PORT_e" start_server t
"$CASES" keylinks "$PORT_t" "$PORT_d" "$PORT_e" "$K" >"$TMP/keylinks.out" 2>&1 || {
    cat "$TMP/keylinks.out" >&2
    fail "a named client key's peer links"
}
cat "$TMP/keylinks.out"
# a clean stop (under ASan: LeakSanitizer checks grants and sessions at exit)
kill -TERM "$PID_d"
rc=0
wait "$PID_d" || rc=$?
[ $rc = 0 ] || fail "batond exited $rc after SIGTERM: $(tail -5 "$TMP/batond.d.log")"
echo "PASS"
