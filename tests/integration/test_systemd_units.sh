#!/usr/bin/env bash
# packaging/batond.service and batond@.service: systemd-analyze verify finds
# nothing to say (their man: pages included, from a staged install); the
# hardening an exposed daemon needs is there; their SystemCallFilter= admits
# every call of batond's own seccomp list and its setup
# (syscall_filter_check.py); `systemd-analyze security --offline` scores them
# (printed, and held at "OK" or better: exposure <= 2.0). Then batond's side
# of LoadCredential=: keys from $CREDENTIALS_DIRECTORY.
. "$(dirname "$0")/lib.sh"
: "${SRC_DIR:?}"

UNITS=("$SRC_DIR/packaging/batond.service" "$SRC_DIR/packaging/batond@.service")
if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze not installed (package systemd)" >&2
    exit 77
fi
if ! systemd-analyze syscall-filter --no-pager @known >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze cannot run here: $(systemd-analyze syscall-filter @known 2>&1 | head -1)" >&2
    exit 77
fi

# the units as installed, but naming this build's batond
mkdir -p "$TMP/units"
for u in "${UNITS[@]}"; do
    sed "s|^ExecStart=/usr/bin/batond |ExecStart=$BATOND |" "$u" >"$TMP/units/$(basename "$u")"
    grep -q "^ExecStart=$BATOND --policy /etc/baton/" "$TMP/units/$(basename "$u")" ||
        fail "$(basename "$u"): ExecStart is not /usr/bin/batond --policy /etc/baton/..."
done
# verify also runs `man` on each Documentation=man: page; MANPATH points it
# at this build's pages, installed into a staging prefix
man_check=--man=yes
if [ -n "${BUILD_DIR:-}" ] && command -v man >/dev/null; then
    cmake --install "$BUILD_DIR" --prefix "$TMP/stage/usr" >"$TMP/install.log" 2>&1 ||
        fail "cmake --install: $(tail -5 "$TMP/install.log")"
    export MANPATH="$TMP/stage/usr/share/man"
else
    echo "note: no BUILD_DIR or no man: systemd-analyze verify --man=no" >&2
    man_check=--man=no
fi
out=$(cd "$TMP/units" && systemd-analyze verify "$man_check" batond.service batond@.service 2>&1) ||
    fail "systemd-analyze verify $man_check: $out"
[ -z "$out" ] || fail "systemd-analyze verify has something to say: $out"
echo "ok: systemd-analyze verify $man_check"

for u in "${UNITS[@]}"; do
    for d in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
        PrivateTmp=yes PrivateDevices=yes CapabilityBoundingSet= \
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX" RestrictNamespaces=yes \
        MemoryDenyWriteExecute=yes SystemCallArchitectures=native \
        LoadCredential=client.key:/etc/baton/keys/client.key LimitCORE=0; do
        grep -qxF "$d" "$u" || fail "$(basename "$u") lacks $d"
    done
    # what batond does before its own filter: exec, open the policy and
    # keys, listen, write the port file, setrlimit, install its filter, start
    # threads (clone3 first: it must get through for glibc's fallback to run)
    python3 "$SRC_DIR/tests/integration/syscall_filter_check.py" "$u" \
        "$SRC_DIR/policy/seccomp.list" execve openat read fstat close bind listen socket \
        fcntl setsockopt prlimit64 rename fsync seccomp prctl clone3 getrandom mlock ||
        fail "$(basename "$u"): SystemCallFilter= refuses a call batond makes"
done
[ "$(sed 's/%i/NAME/g; s/ (NAME)$//; s|/etc/baton/NAME.policy|/etc/baton/batond.policy|' \
    "${UNITS[1]}" | grep -v '^#')" = "$(grep -v '^#' "${UNITS[0]}")" ] ||
    fail "batond@.service differs from batond.service in more than its instance name"

# systemd-analyze security scores a unit file without a running systemd
# with --offline=true (systemd 252 and later)
for u in batond.service batond@.service; do
    name=$u
    [ "$u" = batond@.service ] && { cp "$TMP/units/$u" "$TMP/units/batond@stage1.service"; name=batond@stage1.service; }
    sec=$(cd "$TMP/units" && systemd-analyze security --offline=true --no-pager "$name" 2>&1) || true
    line=$(grep -o 'Overall exposure level for [^:]*: [0-9.]* [A-Z]*' <<<"$sec" || true)
    if [ -z "$line" ]; then
        echo "note: systemd-analyze security --offline gave no score here: $(tail -2 <<<"$sec")" >&2
        continue
    fi
    score=$(awk '{print $(NF-1)}' <<<"$line")
    echo "ok: $line"
    awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$u: exposure $score above 2.0"
done

# batond's side of LoadCredential=: with no key configured it loads
# $CREDENTIALS_DIRECTORY/client.key (a credential may be 0440, root's)
make_keys
CRED="$TMP/cred"
mkdir -m 0700 "$CRED"
cp "$K" "$CRED/client.key"
chmod 0440 "$CRED/client.key"
CREDENTIALS_DIRECTORY=$CRED "$BATOND" --port 0 --port-file "$TMP/port.c" --threads 1 \
    ${BATOND_EXTRA:-} 2>"$TMP/batond.c.log" &
PIDS+=("$!")
wait_port_file c "$!" || fail "batond with a credential did not start: $(cat "$TMP/batond.c.log")"
PORT=$(cat "$TMP/port.c")
grep -q "authentication required" "$TMP/batond.c.log" ||
    fail "batond did not take the credential: $(cat "$TMP/batond.c.log")"
"$BATON" info --servers "127.0.0.1:$PORT" --key "$K" >"$TMP/info.out" 2>&1 ||
    fail "baton info with the key: $(cat "$TMP/info.out")"
if BATON_KEY_FILE= "$BATON" info --servers "127.0.0.1:$PORT" >"$TMP/info2.out" 2>&1; then
    fail "a client without the key was served"
fi
# a credential others can read is refused (exit 1, naming it)
chmod 0444 "$CRED/client.key"
rc=0
CREDENTIALS_DIRECTORY=$CRED "$BATOND" --port 0 --threads 1 2>"$TMP/batond.d.log" || rc=$?
[ "$rc" -eq 1 ] || fail "batond with a 0444 credential exited $rc"
grep -q "credential client.key: .*a credential must be read-only" "$TMP/batond.d.log" ||
    fail "0444 credential: $(cat "$TMP/batond.d.log")"
# an explicit --key wins over the credentials directory
rc=0
CREDENTIALS_DIRECTORY=$CRED timeout 10 "$BATOND" --port 0 --key "$K" --print-policy >/dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "--print-policy with credentials exited $rc"
echo "ok: keys from \$CREDENTIALS_DIRECTORY"
echo "PASS"
