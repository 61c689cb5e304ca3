#!/usr/bin/env bash
# batond's log forms on a live server: --log-format json gives one JSON
# object a line (ts near now, level, kind, msg, the listening line's fields
# matching the port file), for startup, connections, authentication and
# stop; under journald ($JOURNAL_STREAM naming stderr) "<N>message" lines
# without program name or timestamp; text by default; a bad format is a
# usage error, and --help lists the option; usage and setup errors take the
# chosen format too, wherever --log-format stands.
. "$(dirname "$0")/lib.sh"

grep -q -- "--log-format text|json|journal" <<<"$("$BATOND" --help)" || fail "--help lacks --log-format"
rc=0
"$BATOND" --log-format yaml 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--log-format yaml exited $rc"
grep -q "expected text, json or journal" "$TMP/bad.err" || fail "bad format message: $(cat "$TMP/bad.err")"

# errors before the server runs take the format too, wherever --log-format
# stands (they were plain text): one JSON object with level err, kind usage
# (exit 2) or startup (exit 1), and no usage text
json_error() { # json_error CODE KIND MSG ARGS...
    local want=$1 kind=$2 msg=$3 rc=0
    shift 3
    "$BATOND" "$@" >/dev/null 2>"$TMP/err.json" || rc=$?
    [ "$rc" -eq "$want" ] || fail "batond $*: exit $rc, want $want: $(cat "$TMP/err.json")"
    python3 - "$TMP/err.json" "$kind" "$msg" <<'PY' || fail "batond $*: $(cat "$TMP/err.json")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
o = json.loads(lines[0])
assert (o["level"], o["kind"], o["msg"]) == ("err", sys.argv[2], sys.argv[3]), o
PY
}
json_error 2 usage "unknown argument: --bogus (see batond --help)" --log-format json --bogus
json_error 2 usage "unknown argument: --bogus (see batond --help)" --bogus --log-format=json
json_error 2 usage "--port needs a value (see batond --help)" --log-format json --port
json_error 2 usage "--quiet takes no value (see --help)" --quiet=1 --log-format json
json_error 2 usage "--max-connections (max_connections): 'x' is not an integer" --log-format json --max-connections x
json_error 2 usage "--port: 'abc' is not an integer" --log-format json --port abc
json_error 2 usage "--threads: '0' is too small (at least 1)" --threads 0 --log-format json
json_error 2 usage "--peer-key (peer_key_file) needs a client key: --key (key_file) or a named client (--client or a policy \`client\` line)" --log-format json --peer-key k
json_error 1 startup "policy: $TMP/none.policy: No such file or directory" --log-format json --policy "$TMP/none.policy"
json_error 1 startup "--key: $TMP/none.key: no such key file" --log-format json --port 0 --key "$TMP/none.key"
rc=0
"$BATOND" --log-format journal --bogus >/dev/null 2>"$TMP/err.journal" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/err.journal")" = "<3>unknown argument: --bogus (see batond --help)" ] ||
    fail "journal usage error: exit $rc: $(cat "$TMP/err.journal")"
# as text: the line, then the synopsis only (8 lines: the whole usage
# scrolled the error line off the terminal)
rc=0
"$BATOND" --bogus >/dev/null 2>"$TMP/err.text" || rc=$?
[ "$rc" -eq 2 ] && [ "$(head -1 "$TMP/err.text")" = "batond: unknown argument: --bogus (see batond --help)" ] &&
    grep -q "^usage: batond" "$TMP/err.text" && [ "$(wc -l <"$TMP/err.text")" -eq 9 ] ||
    fail "text usage error: exit $rc: $(cat "$TMP/err.text")"
echo "ok: usage and setup errors in the chosen format"

make_keys
"$BATON" keygen -o "$TMP/wrong.key" 2>/dev/null

# run_server NAME ENV... -- ARGS...: batond with a key; one client with the
# key, one with a wrong key; then SIGTERM. Its stderr is $TMP/log.NAME.
run_server() {
    local name=$1 pid port
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]+"${envs[@]}"}" "$BATOND" --port 0 --port-file "$TMP/port.$name" --threads 1 \
        --key "$K" ${BATOND_EXTRA:-} "$@" 2>>"$TMP/log.$name" &
    pid=$!
    PIDS+=("$pid")
    wait_port_file "$name" "$pid" || fail "batond $name did not start: $(cat "$TMP/log.$name")"
    port=$(cat "$TMP/port.$name")
    "$BATON" info --servers "127.0.0.1:$port" --key "$K" >/dev/null 2>&1 || fail "$name: info"
    if "$BATON" info --servers "127.0.0.1:$port" --key "$TMP/wrong.key" >/dev/null 2>&1; then
        fail "$name: a wrong key was served"
    fi
    sleep 0.2 # the server logs a close after the client has gone
    kill -TERM "$pid"
    wait "$pid" || fail "$name: batond exited $? after SIGTERM"
}

run_server json -- --log-format json
python3 - "$TMP/log.json" "$(cat "$TMP/port.json")" <<'PY' || fail "json log: $(cat "$TMP/log.json")"
import datetime, json, sys, time
lines = open(sys.argv[1]).read().splitlines()
port = int(sys.argv[2])
objs = [json.loads(l) for l in lines]          # every line is one object
assert len(objs) >= 5, len(objs)
now = time.time()
for o in objs:
    assert list(o)[:2] == ["ts", "level"], o
    ts = datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    ts = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
    assert abs(ts - now) < 120, (o["ts"], now)
    assert o["level"] in ("err", "warning", "notice", "info"), o
    assert isinstance(o["msg"], str) and o["msg"], o
    assert not o["msg"].startswith("batond:"), o
first, last = objs[0], objs[-1]
assert first["kind"] == "startup" and first["level"] == "notice", first
assert first["msg"].startswith("listening on 127.0.0.1:%d " % port), first
assert (first["host"], first["port"], first["protocol"], first["auth"]) == \
    ("127.0.0.1", port, 1, "key"), first
assert last["kind"] == "server" and last["msg"] == "stopped", last
kinds = [(o.get("kind"), o["level"]) for o in objs]
assert ("connection", "info") in kinds, kinds
auth = [o for o in objs if o.get("kind") == "authentication"]
assert any("authenticated" in o["msg"] for o in auth), auth
assert any("authentication failed" in o["msg"] for o in auth), auth
assert all(o["level"] == "notice" for o in auth), auth
# timestamps do not go backwards
ts = [o["ts"] for o in objs]
assert ts == sorted(ts), ts
print("ok: %d JSON lines" % len(objs))
PY

# journald: stderr is the stream JOURNAL_STREAM names (device:inode)
: >"$TMP/log.journal"
run_server journal "JOURNAL_STREAM=$(stat -c %d:%i "$TMP/log.journal")" --
n=$(grep -c . "$TMP/log.journal")
[ "$n" -ge 5 ] || fail "journal: $n lines"
bad=$(grep -Ev '^<[3-6]>[^<]' "$TMP/log.journal" || true)
[ -z "$bad" ] || fail "journal lines without a priority prefix: $bad"
if grep -Eq 'batond:|[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:' "$TMP/log.journal"; then
    fail "journal lines carry a program name or timestamp: $(cat "$TMP/log.journal")"
fi
grep -q '^<5>listening on 127.0.0.1:' "$TMP/log.journal" || fail "journal: no <5>listening line"
grep -q '^<6>connection from ' "$TMP/log.journal" || fail "journal: no <6>connection line"
grep -q '^<5>stopped$' "$TMP/log.journal" || fail "journal: no <5>stopped line"
echo "ok: journal: $n lines"

# JOURNAL_STREAM that names another file (a child of a journald service
# whose stderr was redirected): text
run_server text "JOURNAL_STREAM=$(stat -c %d:%i "$TMP/log.journal")" --
bad=$(grep -v '^batond: ' "$TMP/log.text" || true)
[ -z "$bad" ] || fail "text lines: $bad"
grep -q '^batond: listening on 127.0.0.1:' "$TMP/log.text" || fail "text: no listening line"
# and --log-format text wins over the journal
: >"$TMP/log.forced"
run_server forced "JOURNAL_STREAM=$(stat -c %d:%i "$TMP/log.forced")" -- --log-format text
grep -q '^batond: stopped$' "$TMP/log.forced" || fail "--log-format text under journald"
echo "ok: text"
echo "PASS"
