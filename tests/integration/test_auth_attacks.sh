#!/usr/bin/env bash
# Attacks on a keyed batond (tests/integration/auth_tamper.c): without a key,
# with a wrong key, with the client key claiming the peer role, reflecting
# the server's own proof or nonce, nothing beyond HELLO/AUTH is served and
# the connection closes; through a relay, a request altered, replayed,
# reordered or dropped after the handshake closes that connection without a
# reply, and an altered reply is refused by the client. After each attack
# the server still serves a fresh client and the attacked session's buffers
# are freed. Keys are made with `baton keygen` in the test's directory.
source "$(dirname "$0")/lib.sh"

"$BATON" keygen -o "$TMP/client.key" 2>/dev/null
"$BATON" keygen -o "$TMP/peer.key" 2>/dev/null
"$BATON" keygen -o "$TMP/other.key" 2>/dev/null

# every failure is counted in the log below: no rate limit in the way
printf 'log_rate = 10000\n' >"$TMP/attacks.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/attacks.policy --key $TMP/client.key --peer-key $TMP/peer.key" start_server a
grep -q "authentication required (client key, peer key)" "$TMP/batond.a.log" ||
    fail "no authentication line at start: $(cat "$TMP/batond.a.log")"

for mode in nokey wrongkey peerrole reflect nonce none flipreq replay swap drop flipreply; do
    if ! timeout 120 "$BUILD_DIR/tests/auth_tamper" "$PORT_a" "$TMP/client.key" "$TMP/peer.key" \
        "$TMP/other.key" "$mode" >"$TMP/tamper.$mode" 2>&1; then
        cat "$TMP/tamper.$mode" >&2
        cat "$TMP/batond.a.log" >&2
        fail "auth_tamper $mode"
    fi
    echo "ok: $mode ($(grep -c '^ok' "$TMP/tamper.$mode") checks)"
done

log="$TMP/batond.a.log"
[ "$(grep -c 'authentication failed' "$log")" -ge 8 ] || fail "authentication failures not logged"
[ "$(grep -c 'bad frame tag, closing without a reply' "$log")" -eq 4 ] ||
    fail "want 4 bad-tag closes (flipreq, replay, swap, drop): $(grep 'bad frame tag' "$log")"
grep -q "ALLOC_BUFFER: bad frame tag" "$log" || fail "the replayed ALLOC was not the one refused"
# no key material or data in the log: only batond lines
if grep -qv '^batond: ' "$log"; then fail "unexpected log output"; fi
kill -0 "$PID_a" || fail "batond died"
echo "PASS"
