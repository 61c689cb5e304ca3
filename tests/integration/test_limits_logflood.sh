#!/usr/bin/env bash
# Log rate limits under a flood (issue 3, adversarial review): a keyed
# batond with log_rate = 5 gets 300 connections that each send one frame of
# bad magic, then a client with a wrong key and a client with the right key.
# Error, connection and authentication lines have separate budgets, so the
# flood cannot hide the authentication outcomes (both logged, with the peer
# address), and what a window dropped is summarized once the window is over
# even when no further line comes.
source "$(dirname "$0")/lib.sh"

"$BATON" keygen -o "$TMP/client.key" 2>/dev/null
"$BATON" keygen -o "$TMP/wrong.key" 2>/dev/null
printf 'log_rate = 5\n' >"$TMP/flood.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/flood.policy --key $TMP/client.key" start_server a
log="$TMP/batond.a.log"

for _ in $(seq 300); do
    # bash's /dev/tcp: connect, one 24-byte frame header of bad magic, close
    if exec 3<>"/dev/tcp/127.0.0.1/$PORT_a"; then
        printf 'XXXXXXXXXXXXXXXXXXXXXXXX' >&3 || true
        exec 3>&-
    fi
done
# the flood's last connections may still hold the unauthenticated slots
# (a refused client is not an authentication failure): retry, bounded
for _ in $(seq 50); do
    rc=0
    "$BATON" info --servers "127.0.0.1:$PORT_a" --key "$TMP/wrong.key" >/dev/null 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || fail "info with the wrong key succeeded"
    grep -q "authentication failed" "$log" && break
    sleep 0.1
done
ok=0
for _ in $(seq 50); do
    if "$BATON" info --servers "127.0.0.1:$PORT_a" --key "$TMP/client.key" >/dev/null 2>&1; then
        ok=1
        break
    fi
    sleep 0.1
done
[ "$ok" -eq 1 ] || fail "info with the right key failed"

# the summaries of the last window come out without further traffic
for _ in $(seq 60); do
    grep -Eq "^batond: \([0-9]+ connection log lines suppressed\)" "$log" && break
    sleep 0.1
done
grep -Eq "^batond: \([0-9]+ connection log lines suppressed\)" "$log" ||
    fail "connection lines: no suppressed count (log: $(tail -5 "$log"))"
grep -Eq "^batond: \([0-9]+ error log lines suppressed\)" "$log" ||
    fail "error lines: no suppressed count"
grep -Eq "from 127\.0\.0\.1:[0-9]+: authentication failed \(client role\)" "$log" ||
    fail "the wrong key's authentication failure is not in the log"
grep -Eq "from 127\.0\.0\.1:[0-9]+ authenticated \(client role\)" "$log" ||
    fail "the right key's session is not in the log"
lines=$(wc -l <"$log")
[ "$lines" -lt 200 ] || fail "$lines log lines for 300 connections (not rate-limited)"

stop_server a
echo "PASS"
