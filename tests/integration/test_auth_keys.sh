#!/usr/bin/env bash
# Keys and secure defaults: `baton keygen` (32 bytes, mode 0600, never
# overwrites), key files refused with a clear message (group/world
# readable, symlink, wrong size, missing), batond's key options and its
# non-loopback rule (--key, or --insecure-no-auth with a warning), and
# `baton info` with --key, BATON_KEY_FILE, no key and the wrong key against
# a keyed, an encrypting and an unkeyed server.
source "$(dirname "$0")/lib.sh"

K="$TMP/client.key"
"$BATON" keygen -o "$K" 2>"$TMP/keygen.err" || fail "keygen: $(cat "$TMP/keygen.err")"
grep -q "wrote a new key to $K" "$TMP/keygen.err" || fail "keygen message"
[ "$(stat -c %s "$K")" -eq 32 ] || fail "key is not 32 bytes"
[ "$(stat -c %a "$K")" = 600 ] || fail "key mode is $(stat -c %a "$K")"
"$BATON" keygen -o "$TMP/other.key" 2>/dev/null
cmp -s "$K" "$TMP/other.key" && fail "two keys are equal"
before=$(od -An -tx1 "$K")
rc=0; "$BATON" keygen -o "$K" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "exists" "$TMP/err" || fail "keygen over an existing file: rc $rc $(cat "$TMP/err")"
[ "$(od -An -tx1 "$K")" = "$before" ] || fail "keygen changed an existing key"
grep -q "(--force replaces it)" "$TMP/err" || fail "keygen over an existing file does not name --force"
# --force replaces it, by a rename: a new key, mode 0600, no temporary left
cp "$K" "$TMP/keep.key"
rc=0; "$BATON" keygen -o "$TMP/keep.key" --force 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] && grep -q "replaced $TMP/keep.key with a new key" "$TMP/err" || fail "keygen --force: rc $rc $(cat "$TMP/err")"
[ "$(od -An -tx1 "$TMP/keep.key")" != "$before" ] && [ "$(stat -c %s,%a "$TMP/keep.key")" = 32,600 ] ||
    fail "keygen --force did not write a new 32-byte 0600 key"
ls "$TMP" | grep -q 'keep.key.tmp' && fail "keygen --force left its temporary file"
mkdir "$TMP/dir.key"
rc=0; "$BATON" keygen -o "$TMP/dir.key" --force 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "cannot replace it: Is a directory" "$TMP/err" || fail "keygen --force onto a directory: rc $rc"
# ... and without --force it says so at once, not offering --force
rc=0; "$BATON" keygen -o "$TMP/dir.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && [ "$(cat "$TMP/err")" = "baton keygen: $TMP/dir.key: is a directory; give the key file's path" ] ||
    fail "keygen onto a directory: rc $rc: $(cat "$TMP/err")"
ln -s "$TMP/nowhere" "$TMP/link.key"
rc=0; "$BATON" keygen -o "$TMP/link.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/nowhere" ] || fail "keygen followed a symlink"
grep -q "link.key: is a symbolic link to nothing; refusing to write a key file through it (--force replaces it)" "$TMP/err" ||
    fail "keygen onto a dangling link: $(cat "$TMP/err")"
# options as every baton command takes them: --output=FILE, a prefix; usage
# errors in a line and a pointer to --help, exit 2
rc=0; "$BATON" keygen --out="$TMP/eq.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] && [ "$(stat -c %s "$TMP/eq.key")" -eq 32 ] || fail "keygen --out=FILE: rc $rc: $(cat "$TMP/err")"
rc=0; "$BATON" keygen -o "$TMP/eq.key" --forc 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] && grep -q "replaced $TMP/eq.key" "$TMP/err" || fail "keygen --forc: rc $rc: $(cat "$TMP/err")"
rc=0; "$BATON" keygen -o "$TMP/a.key" -o "$TMP/b.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/a.key" ] && [ "$(cat "$TMP/err")" = "baton keygen: -o/--output given twice (one key file a run)
(see \`baton keygen --help\`)" ] || fail "keygen -o twice: rc $rc: $(cat "$TMP/err")"
rc=0; "$BATON" keygen "$TMP/a.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/a.key" ] && [ "$(head -1 "$TMP/err")" = \
    "baton keygen: $TMP/a.key: unknown argument (the file goes after -o)" ] ||
    fail "keygen FILE without -o: rc $rc: $(cat "$TMP/err")"
# -o -: a key never goes to standard output, nor to a file named '-' unasked
rc=0; (cd "$TMP" && "$BATON" keygen -o - >"$TMP/dash.out" 2>"$TMP/err") || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/-" ] && [ ! -s "$TMP/dash.out" ] &&
    grep -q "^baton keygen: -o -: a key goes to a file of its own" "$TMP/err" ||
    fail "keygen -o -: rc $rc: $(cat "$TMP/err")"
# --force never replaces a FIFO (or a device), nor a link to one
mkfifo "$TMP/k.fifo"
ln -s "$TMP/k.fifo" "$TMP/fifo_link.key"
for f in "$TMP/k.fifo" "$TMP/fifo_link.key"; do
    rc=0; "$BATON" keygen -o "$f" --force 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 1 ] && [ -p "$TMP/k.fifo" ] && [ -L "$TMP/fifo_link.key" ] &&
        grep -qx "baton keygen: $f: not a regular file; --force replaces only a key file" "$TMP/err" ||
        fail "keygen --force onto $f: rc $rc: $(cat "$TMP/err")"
    # ... so without --force the refusal does not offer it
    rc=0; "$BATON" keygen -o "$f" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 1 ] && ! grep -q -- "--force" "$TMP/err" || fail "keygen onto $f offers --force: $(cat "$TMP/err")"
done
# a link to a directory is named as a link (--force would replace the link, not the directory)
mkdir "$TMP/kdir" && ln -s "$TMP/kdir" "$TMP/dir_link.key"
rc=0; "$BATON" keygen -o "$TMP/dir_link.key" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton keygen: $TMP/dir_link.key: is a symbolic link; refusing to write a key file through it" \
    "$TMP/err" || fail "keygen onto a link to a directory: rc $rc: $(cat "$TMP/err")"
# --force replaces the (dangling) link itself with a key file, never its target
rc=0; "$BATON" keygen -o "$TMP/link.key" --force 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] && [ ! -L "$TMP/link.key" ] && [ ! -e "$TMP/nowhere" ] &&
    [ "$(stat -c %s,%a "$TMP/link.key")" = 32,600 ] ||
    fail "keygen --force onto a dangling link: rc $rc: $(cat "$TMP/err")"
rc=0; "$BATON" keygen 2>"$TMP/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "\-o FILE is required" "$TMP/err" || fail "keygen without -o: rc $rc"
"$BATON" keygen --help >"$TMP/keygen.help"
grep -q "usage: baton keygen" "$TMP/keygen.help" && grep -q "^Exit status: 0 written, 1 " "$TMP/keygen.help" ||
    fail "keygen --help"
# every command that takes --key is named (bench was missing)
grep -q "^  baton run/bench/info --key (or BATON_KEY_FILE); " "$TMP/keygen.help" ||
    fail "keygen --help does not name run/bench/info --key: $(cat "$TMP/keygen.help")"
"$BATON" --help >"$TMP/help.out" && grep -q "keygen" "$TMP/help.out" || fail "baton --help does not list keygen"

# expect_batond CODE REGEX ARGS...: batond must exit CODE with REGEX on stderr
expect_batond() {
    local want=$1 pattern=$2 rc=0
    shift 2
    # shellcheck disable=SC2086
    timeout 10 "$BATOND" ${BATOND_EXTRA:-} "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "batond $* exited $rc, want $want: $(cat "$TMP/err")"
    grep -Eq -- "$pattern" "$TMP/err" || fail "batond $*: no '$pattern' in: $(cat "$TMP/err")"
}
cp "$K" "$TMP/loose.key"; chmod 644 "$TMP/loose.key"
printf '%s\n' "$(head -c 32 /dev/zero | tr '\0' a)" >"$TMP/long.key"; chmod 600 "$TMP/long.key"
head -c 31 /dev/zero >"$TMP/short.key"; chmod 600 "$TMP/short.key"
ln -s "$K" "$TMP/sym.key"
expect_batond 1 "--key: .*loose.key.*(group|other|permission|mode)" --port 0 --key "$TMP/loose.key"
expect_batond 1 "--key: .*long.key" --port 0 --key "$TMP/long.key"
expect_batond 1 "--key: .*short.key" --port 0 --key "$TMP/short.key"
expect_batond 1 "--key: .*sym.key.*link" --port 0 --key "$TMP/sym.key"
expect_batond 1 "--key: .*missing.key" --port 0 --key "$TMP/missing.key"
expect_batond 1 "--peer-key: .*loose.key" --port 0 --key "$K" --peer-key "$TMP/loose.key"
# a key file the policy names is called by its key there, not --key (a
# break-it review: "--key: ..." though no --key was given)
printf 'key_file = %s\n' "$TMP/loose.key" >"$TMP/key.policy"
expect_batond 1 "^batond: key_file \(policy\): $TMP/loose.key: mode 0644" --port 0 \
    --policy "$TMP/key.policy"
printf 'key_file = %s\npeer_key_file = %s\n' "$K" "$TMP/missing.key" >"$TMP/key.policy"
expect_batond 1 "^batond: peer_key_file \(policy\): $TMP/missing.key: no such key file" --port 0 \
    --policy "$TMP/key.policy"
expect_batond 2 "--peer-key .*needs a client key: --key \(key_file\) or a named client" --port 0 --peer-key "$K"
expect_batond 2 "--peer \(peer\) needs --peer-key" --port 0 --key "$K" --peer 127.0.0.1:9
printf 'peer = 127.0.0.1:9\n' >"$TMP/peer.policy"
expect_batond 2 "--peer \(peer\) needs --peer-key" --port 0 --key "$K" --policy "$TMP/peer.policy"
expect_batond 2 "--encrypt .*needs --key" --port 0 --encrypt
expect_batond 2 "contradicts --key" --port 0 --key "$K" --insecure-no-auth
expect_batond 2 "needs a value" --key
expect_batond 2 "refusing to listen on 0.0.0.0.*--key" --host 0.0.0.0 --port 0
# one key for both roles (a fresh-user review: accepted, so every client could
# open a peer-role link): refused, whether the same file or a copy of it
cp "$K" "$TMP/copy.key"; chmod 600 "$TMP/copy.key"
expect_batond 2 "--peer-key: .*$K holds the same key as --key" --port 0 --key "$K" --peer-key "$K"
expect_batond 2 "--peer-key: .*copy.key holds the same key as --key" --port 0 --key "$K" \
    --peer-key "$TMP/copy.key"
# --port-file naming a file batond reads (a break-it review: the port file's
# rename replaced the key with the port, mode 0644, and the policy alike):
# refused before anything is bound, the files unchanged
keep=$(od -An -tx1 "$K")
keep_other=$(od -An -tx1 "$TMP/other.key")
printf 'max_connections = 8\n' >"$TMP/own.policy"
ln -s "$TMP/own.policy" "$TMP/own.policy.link"
expect_batond 2 "^batond: --port-file $K and --key \(key_file\) $K are the same file; the port file would replace it" \
    --port 0 --key "$K" --port-file "$K"
expect_batond 2 "^batond: --port-file $TMP/other.key and --peer-key \(peer_key_file\) $TMP/other.key are" \
    --port 0 --key "$K" --peer-key "$TMP/other.key" --port-file "$TMP/other.key"
expect_batond 2 "^batond: --port-file $TMP/copy.key and client team-a $TMP/copy.key are the same file" \
    --port 0 --client "team-a $TMP/copy.key" --port-file="$TMP/copy.key"
expect_batond 2 "^batond: --port-file $TMP/own.policy and --policy $TMP/own.policy.link are the same file" \
    --port 0 --policy "$TMP/own.policy.link" --port-file "$TMP/own.policy"
[ "$(od -An -tx1 "$K")" = "$keep" ] && [ "$(stat -c %s,%a "$K")" = 32,600 ] &&
    [ "$(od -An -tx1 "$TMP/other.key")" = "$keep_other" ] &&
    [ "$(cat "$TMP/own.policy")" = "max_connections = 8" ] ||
    fail "a refused --port-file changed the key or the policy"
# a --key or --peer-key path the policy cannot hold: one message naming the
# flag and the file (it was "--key: --key_file: expected a path, got ...",
# and a bad --peer-key was called --key when --key was given too)
expect_key_path() { # expect_key_path EXACT-LINE ARGS...
    local want=$1 rc=0
    shift
    timeout 10 "$BATOND" --port 0 "$@" >/dev/null 2>"$TMP/err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$TMP/err")" = "$want" ] ||
        fail "batond $*: exit $rc (want 2), stderr: $(cat "$TMP/err") (want: $want)"
}
why="a key file path may not begin or end with a blank, begin with '#', have a '#' after a blank or hold control characters (it is kept in the policy, whose file could not hold it); rename the file or give another path to it"
expect_key_path "batond: --key ' k': $why" --key " k"
expect_key_path "batond: --key 'a #b': $why" --key "a #b"
expect_key_path "batond: --peer-key '#p': $why" --key "$K" --peer-key "#p"
expect_key_path "batond: --key: an empty path (give the key file, made by baton keygen)" --key ""
long=$(head -c 5000 /dev/zero | tr '\0' a)
expect_key_path "batond: --key '$(head -c 40 /dev/zero | tr '\0' a)...': the key file path is 5000 bytes; at most 4095" --key "$long"
# --print-policy shows the key options and --encrypt given as flags
"$BATOND" --print-policy --key "$K" --peer-key "$TMP/other.key" --encrypt >"$TMP/pp" ||
    fail "--print-policy with keys"
grep -qx "key_file = $K" "$TMP/pp" && grep -qx "peer_key_file = $TMP/other.key" "$TMP/pp" &&
    grep -qx "encrypt = yes" "$TMP/pp" || fail "--print-policy does not show the flags: $(cat "$TMP/pp")"
[ ! -e "$TMP/never" ] || fail "a refused server wrote a port file"

# a non-loopback address with a key, and with --insecure-no-auth (warning);
# each is stopped at once (ephemeral port)
for variant in key insecure; do
    if [ "$variant" = key ]; then extra="--key $K"; else extra="--insecure-no-auth"; fi
    # shellcheck disable=SC2086
    "$BATOND" --host 0.0.0.0 --port 0 --port-file "$TMP/port.$variant" ${BATOND_EXTRA:-} $extra \
        2>"$TMP/batond.$variant.log" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do
        [ -s "$TMP/port.$variant" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.025
    done
    [ -s "$TMP/port.$variant" ] || fail "0.0.0.0 with $variant did not start: $(cat "$TMP/batond.$variant.log")"
    kill -TERM "$pid"
    wait "$pid" || fail "batond ($variant) exited non-zero after SIGTERM"
done
grep -q "WARNING: --insecure-no-auth" "$TMP/batond.insecure.log" || fail "no --insecure-no-auth warning"
grep -q "WARNING" "$TMP/batond.key.log" && fail "a warning with a key"

# baton info against keyed, encrypting and unkeyed servers
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K" start_server keyed
BATOND_EXTRA="${BATOND_EXTRA:-} --key $K --encrypt --peer-key $TMP/other.key" start_server enc
start_server plain
KEYED=127.0.0.1:$PORT_keyed
ENC=127.0.0.1:$PORT_enc
PLAIN=127.0.0.1:$PORT_plain
info() { # info EXPECTED_RC OUTFILE ARGS...
    local want=$1 out=$2 rc=0
    shift 2
    timeout 20 "$BATON" info "$@" >"$out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "baton info $* exited $rc, want $want: $(cat "$out")"
}
info 0 "$TMP/i1" --servers "$KEYED,$ENC" --key "$K"
[ "$(grep -c "auth        key, frames MAC'd$" "$TMP/i1")" -eq 1 ] || fail "info: MAC'd line: $(cat "$TMP/i1")"
[ "$(grep -c "auth        key, frames MAC'd and encrypted" "$TMP/i1")" -eq 1 ] || fail "info: encrypted line"
[ "$(grep -c "direct path no (started without --peer-key)" "$TMP/i1")" -eq 1 ] &&
    [ "$(grep -c "direct path yes" "$TMP/i1")" -eq 1 ] &&
    [ "$(grep -c "pipeline    yes" "$TMP/i1")" -eq 2 ] || fail "info: direct path / pipeline lines: $(cat "$TMP/i1")"
BATON_KEY_FILE="$K" info 0 "$TMP/i2" --servers "$KEYED"
grep -q "name        batond cpu" "$TMP/i2" || fail "info with BATON_KEY_FILE"
# a bad key file is named as it was given (a fresh-user review: always "--key")
rc=0; BATON_KEY_FILE="$TMP/nosuch.key" "$BATON" info --servers "$KEYED" >"$TMP/i2e" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton info: BATON_KEY_FILE: $TMP/nosuch.key: no such key file" "$TMP/i2e" ||
    fail "info with a missing BATON_KEY_FILE: rc $rc: $(cat "$TMP/i2e")"
info 0 "$TMP/i3" --servers "$PLAIN"
grep -q "auth        none" "$TMP/i3" || fail "info: unkeyed server"
info 0 "$TMP/i3l" --servers local --key "$K"
grep -q "auth        key, frames MAC'd" "$TMP/i3l" || fail "info: keyed in-process server"
info 1 "$TMP/i4" --servers "$KEYED"
grep -q "E_AUTH.*requires a key: give --key FILE or BATON_KEY_FILE" "$TMP/i4" || fail "info without a key: $(cat "$TMP/i4")"
info 1 "$TMP/i5" --servers "$KEYED" --key "$TMP/other.key"
grep -q "E_AUTH.*; the server has other keys: yours is not its --key nor one of its client keys\$" "$TMP/i5" ||
    fail "info with the wrong key: $(cat "$TMP/i5")"
# ... a wrong key from the environment is named as such (a user may not know it is set)
BATON_KEY_FILE="$TMP/other.key" info 1 "$TMP/i5e" --servers "$KEYED"
grep -q "E_AUTH.*; the server has other keys: the one BATON_KEY_FILE names is not its --key nor one of its client keys\$" \
    "$TMP/i5e" || fail "info with a wrong BATON_KEY_FILE: $(cat "$TMP/i5e")"
if [ -f "$MODEL_DIR/stories260K.gguf" ]; then
    rc=0; BATON_KEY_FILE="$TMP/other.key" timeout 20 "$BATON" run --servers "$KEYED" \
        --model "$MODEL_DIR/stories260K.gguf" --prompt x -n 1 >"$TMP/r5e" 2>&1 || rc=$?
    [ "$rc" -eq 1 ] && grep -q "E_AUTH.*; the server has other keys: the one BATON_KEY_FILE names is not" "$TMP/r5e" ||
        fail "run with a wrong BATON_KEY_FILE: rc $rc: $(cat "$TMP/r5e")"
fi
info 1 "$TMP/i6" --servers "$PLAIN" --key "$K"
grep -q "E_AUTH.*; the server was started without a key and takes no client key: drop --key" \
    "$TMP/i6" || fail "a keyed client must refuse an unkeyed server, saying why: $(cat "$TMP/i6")"
# ... and that server's log says what the closed connection likely was
for _ in $(seq 50); do grep -q "before any request" "$TMP/batond.plain.log" && break; sleep 0.1; done
grep -q "closed (closed by peer before any request: a coordinator that gave up (another of its servers failed), or a client with a key, which refuses a server without one, peer 127.0.0.1:" \
    "$TMP/batond.plain.log" || fail "no line for the keyed client: $(cat "$TMP/batond.plain.log")"
info 1 "$TMP/i7" --servers "$KEYED" --key "$TMP/loose.key"
grep -q "loose.key" "$TMP/i7" || fail "info with a refused key file: $(cat "$TMP/i7")"
# the policy file's key_file and encrypt work like --key and --encrypt
printf 'key_file = %s\nencrypt = yes\n' "$K" >"$TMP/auth.policy"
BATOND_EXTRA="${BATOND_EXTRA:-} --policy $TMP/auth.policy" start_server pol
info 0 "$TMP/i8" --servers "127.0.0.1:$PORT_pol" --key "$K"
grep -q "auth        key, frames MAC'd and encrypted" "$TMP/i8" || fail "policy key_file/encrypt: $(cat "$TMP/i8")"
grep -q "session .* authenticated (client role)" "$TMP/batond.keyed.log" || fail "no authenticated line"
grep -q "authentication failed (client role)" "$TMP/batond.keyed.log" || fail "no failed-auth line"
# the keyless client (i4) gave up after HELLO: the server's log says so
for _ in $(seq 50); do grep -q "before AUTH" "$TMP/batond.keyed.log" && break; sleep 0.1; done
grep -q "closed (closed by peer before AUTH; a client without the key does this, peer 127.0.0.1:" \
    "$TMP/batond.keyed.log" || fail "no line for the keyless client: $(cat "$TMP/batond.keyed.log")"
echo "PASS"
