#!/usr/bin/env bash
# batond's policy on the command line: --policy FILE (errors name the file
# and line, exit 1 like a refused key file), flags override the file
# wherever they stand (errors name the flag as typed, exit 2),
# --print-policy, the example policy/batond.policy equals the defaults, and
# a server started from a policy file enforces it (a small max_connections)
# with the seccomp allow-list on. Ephemeral loopback ports; every batond is
# stopped by its PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${SRC_DIR:?}"

# expect_exit CODE REGEX ARGS...: batond's exit status and a line of its output
expect_exit() {
    local want=$1 pattern=$2
    shift 2
    local rc=0
    timeout 10 "$BATOND" "$@" >"$TMP/out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || { cat "$TMP/out" >&2; fail "batond $* exited $rc, want $want"; }
    grep -Eq -- "$pattern" "$TMP/out" || { cat "$TMP/out" >&2; fail "batond $*: no '$pattern'"; }
}

printf 'max_connections = 5\n# comment\n\nbogus = 1\n' >"$TMP/bad1"
expect_exit 1 "policy: $TMP/bad1:4: unknown key 'bogus'" --policy "$TMP/bad1"
printf 'port = 1\nport = 2\n' >"$TMP/bad2"
expect_exit 1 "$TMP/bad2:2: duplicate key 'port' \(first set on line 1\)" --policy "$TMP/bad2"
printf 'frame_timeout = 10 s\n' >"$TMP/bad3"
expect_exit 1 "$TMP/bad3:1: frame_timeout: expected a duration" --policy "$TMP/bad3"
expect_exit 1 "$TMP/missing: No such file" --policy "$TMP/missing"
expect_exit 2 "needs a value" --policy
expect_exit 2 "needs a value" --max-connections
expect_exit 2 "^batond: --max-connections \(max_connections\): '0' is too small \(at least 1\)\$" \
    --max-connections 0
expect_exit 2 "^batond: --max_connections: '0' is too small \(at least 1\)\$" --max_connections 0
printf 'max_connections = 2000\n' >"$TMP/bad4"
expect_exit 1 "^batond: policy: $TMP/bad4:1: max_connections: '2000' is too large \(at most 1024\)\$" \
    --policy "$TMP/bad4"
expect_exit 2 "unknown argument: --max-connectionz" --max-connectionz 3
# a peer that does not resolve: named as given, "policy:" only with a --policy file
"$BATON" keygen -o "$TMP/client.key" >/dev/null 2>&1
"$BATON" keygen -o "$TMP/peer.key" >/dev/null 2>&1
expect_exit 1 "^batond: peer nosuchhost\.invalid:5000: cannot resolve nosuchhost\.invalid\$" \
    --key "$TMP/client.key" --peer-key "$TMP/peer.key" --port 0 --peer nosuchhost.invalid:5000
printf 'peer = nosuchhost.invalid:5000\n' >"$TMP/badpeer"
expect_exit 1 "^batond: policy: peer nosuchhost\.invalid:5000: cannot resolve nosuchhost\.invalid\$" \
    --key "$TMP/client.key" --peer-key "$TMP/peer.key" --port 0 --policy "$TMP/badpeer"
# a usage error is said before any name is looked up: a peer without the
# peer key (exit 2), whether the peer's name or the host's resolves or not
expect_exit 2 "^batond: --peer \(peer\) needs --peer-key" \
    --insecure-no-auth --port 0 --peer nosuchhost.invalid:5000
expect_exit 2 "^batond: --peer \(peer\) needs --peer-key" \
    --insecure-no-auth --host nosuchhost.invalid --port 0 --peer 127.0.0.1:9
# ... and so are those that need the key files read: one key for two roles
expect_exit 2 "^batond: --peer-key: $TMP/client.key holds the same key as --key $TMP/client.key" \
    --key "$TMP/client.key" --peer-key "$TMP/client.key" --port 0 --peer nosuchhost.invalid:5000
printf 'client = a %s\n' "$TMP/client.key" >"$TMP/samekey"
expect_exit 2 "^batond: client a: $TMP/client.key holds the same key as the --key \(key_file\)" \
    --key "$TMP/client.key" --peer-key "$TMP/peer.key" --policy "$TMP/samekey" --port 0 \
    --host nosuchhost.invalid
# a key the service manager gave (a credential) is named as such
mkdir -p "$TMP/cred" && cp "$TMP/peer.key" "$TMP/cred/peer.key" && chmod 400 "$TMP/cred/peer.key"
rc=0; CREDENTIALS_DIRECTORY="$TMP/cred" timeout 10 "$BATOND" --port 0 >"$TMP/out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "^batond: the credential peer.key needs a client key" "$TMP/out" ||
    fail "a credential peer.key alone: rc $rc: $(cat "$TMP/out")"
cp "$TMP/peer.key" "$TMP/cred/client.key" && chmod 400 "$TMP/cred/client.key"
rc=0; CREDENTIALS_DIRECTORY="$TMP/cred" timeout 10 "$BATOND" --port 0 >"$TMP/out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "^batond: the credential peer.key: $TMP/cred/peer.key holds the same key as the credential client.key" "$TMP/out" ||
    fail "credentials with one key for both roles: rc $rc: $(cat "$TMP/out")"

# the example file documents the defaults
"$BATOND" --print-policy >"$TMP/defaults"
"$BATOND" --print-policy --policy "$SRC_DIR/policy/batond.policy" >"$TMP/example"
cmp -s "$TMP/defaults" "$TMP/example" || fail "policy/batond.policy differs from the defaults"
grep -qx "max_connections = 64" "$TMP/defaults" || fail "default max_connections"
grep -qx "handshake_timeout = 5s" "$TMP/defaults" || fail "default handshake_timeout"

# flags override the file, before or after --policy; --peer replaces the list
printf 'max_connections = 5\nidle_timeout = 7s\npeer = 10.0.0.1:1\npeer = 10.0.0.2:2\n' >"$TMP/p"
"$BATOND" --max-connections 9 --policy "$TMP/p" --idle-timeout 250ms --peer '[::1]:3' \
    --print-policy >"$TMP/eff"
grep -qx "max_connections = 9" "$TMP/eff" || fail "flag before --policy did not override"
grep -qx "idle_timeout = 250ms" "$TMP/eff" || fail "flag after --policy did not override"
[ "$(grep -c '^peer = ' "$TMP/eff")" -eq 1 ] && grep -qx 'peer = \[::1\]:3' "$TMP/eff" ||
    fail "--peer did not replace the file's peers"
# what --print-policy writes is a policy file that gives the same
"$BATOND" --print-policy --policy "$TMP/eff" >"$TMP/eff2"
cmp -s "$TMP/eff" "$TMP/eff2" || fail "--print-policy output does not read back the same"

# a server from a policy file: 2 connections at most, seccomp on
printf 'max_connections = 2\nlog_rate = 100\n' >"$TMP/run.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/run.policy"
start_server a
log="$TMP/batond.a.log"
if [ "${BATON_ASAN:-}" != "1" ]; then
    grep -q "seccomp allow-list not installed" "$log" && fail "seccomp is off by default"
fi
# Connections count against max_connections once they are READY (the
# lobby holds them before that, src/server/lobby.c): two READY connections
# (a HELLO each; this server has no key), then the third's HELLO is
# answered with one 24-byte E_LIMIT frame (status 10 at bytes 6..7)
# instead of a HELLO reply. HELLO: "BATN", cmd 1, seq 1, len 48; payload
# versions 1..1, role 1 (client), no features, a zero nonce.
hello() {
    printf 'BATN\001\000\000\000\001\000\000\000\000\000\000\000\060\000\000\000\000\000\000\000'
    printf '\001\000\001\000\001\000\000\000'
    head -c 40 /dev/zero
}
for fd in 5 6 7; do
    eval "exec $fd<>/dev/tcp/127.0.0.1/$PORT_a"
    hello >&"$fd"
    reply=$(timeout 5 od -An -tx1 -N24 <&"$fd" | tr -d ' \n')
    if [ "$fd" != 7 ]; then
        # HELLO reply: status 0, len 48; read its payload too
        [ "${reply:0:10}" = "4241544e01" ] && [ "${reply:12:4}" = "0000" ] ||
            fail "connection $fd: no HELLO reply (got '$reply')"
        timeout 5 od -An -tx1 -N48 <&"$fd" >/dev/null
    fi
done
[ "${reply:0:8}" = "4241544e" ] && [ "${reply:12:4}" = "0a00" ] ||
    fail "third connection: no E_LIMIT frame (got '$reply')"
exec 5>&- 6>&- 7>&-
grep -q "refused 127.0.0.1:[0-9]*: connection limit reached" "$log" ||
    fail "no log line for the refused connection"
stop_server a
echo "PASS"
