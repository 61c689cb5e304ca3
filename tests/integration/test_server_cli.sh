#!/usr/bin/env bash
# batond's command line: usage errors (exit 2), --help/--version, refusal of
# non-loopback addresses, the atomic port file, distinct ephemeral ports,
# a busy port, SIGTERM/SIGINT draining (also with an idle client attached)
# to exit 0, and `baton info` against a live server.
# Every batond started here runs on an ephemeral loopback port and is
# stopped by its PID when the script exits.
set -euo pipefail

: "${BATOND:?}" "${BUILD_DIR:?}"
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill -KILL "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }; done; exit 1; }

# expect_exit CODE MESSAGE-REGEX ARGS...: runs batond, checks exit and stderr
expect_exit() {
    local want=$1 pattern=$2
    shift 2
    local rc=0
    timeout 10 "$BATOND" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "batond $* exited $rc, want $want"
    grep -Eq -- "$pattern" "$tmp/out" "$tmp/err" || fail "batond $*: no '$pattern' in output"
}

# start NAME ARGS...: starts batond with --port-file $tmp/NAME.port, waits
# for the port file; sets $started_pid and $started_port
start() {
    local name=$1
    shift
    "$BATOND" --port-file "$tmp/$name.port" "$@" 2>"$tmp/$name.log" &
    started_pid=$!
    pids+=("$started_pid")
    for _ in $(seq 100); do
        [ -s "$tmp/$name.port" ] && break
        kill -0 "$started_pid" 2>/dev/null || fail "$name exited before listening"
        sleep 0.1
    done
    [ -s "$tmp/$name.port" ] || fail "$name: no port file"
    started_port=$(cat "$tmp/$name.port")
}

# stop_with SIGNAL PID: the server must exit 0
stop_with() {
    local rc=0
    kill "-$1" "$2"
    wait "$2" || rc=$?
    [ "$rc" -eq 0 ] || fail "batond exited $rc after SIG$1"
}

expect_exit 0 "usage: batond" --help
expect_exit 0 "^batond [0-9]+\.[0-9]+\.[0-9]+ \(protocol 1\)" --version
expect_exit 2 "unknown argument" --bogus
# GNU-style --name=value, as baton's commands take it
expect_exit 0 "^max_connections = 16$" --print-policy --max-connections=16 --threads=2 --port=0
grep -qx "threads = 2" "$tmp/out" && grep -qx "port = 0" "$tmp/out" ||
    fail "--threads=2 --port=0: $(cat "$tmp/out")"
expect_exit 2 "^batond: --max-connections \(max_connections\): '-1' is too small \(at least 1\)$" \
    --max-connections=-1
expect_exit 2 "^batond: --threads: '' is not an integer$" --threads=
expect_exit 2 "^batond: --quiet takes no value \(see --help\)$" --quiet=1
# integer values: too large (also past 2^64), not an integer, too small
expect_exit 2 "^batond: --port: '70000' is too large \(at most 65535\)\$" --port 70000
expect_exit 2 "^batond: --port: '99999999999999999999' is too large \(at most 65535\)\$" \
    --port 99999999999999999999
expect_exit 2 "^batond: --port: 'abc' is not an integer\$" --port abc
expect_exit 2 "needs a value" --port
expect_exit 2 "^batond: --threads: '0' is too small \(at least 1\)\$" --threads 0
expect_exit 2 "^batond: --threads: '99999999999999999999' is too large \(at most 64\)\$" \
    --threads 99999999999999999999
expect_exit 2 "^batond: --threads: '-3' is too small \(at least 1\)\$" --threads -3
# policy settings as flags: the same words, the flag as typed and its key
expect_exit 2 "^batond: --max-connections \(max_connections\): '-1' is too small \(at least 1\)\$" \
    --max-connections -1
expect_exit 2 "^batond: --max-connections \(max_connections\): '1025' is too large \(at most 1024\)\$" \
    --max-connections 1025
expect_exit 2 "^batond: --max-connections \(max_connections\): '99999999999999999999' is too large \(at most 1024\)\$" \
    --max-connections 99999999999999999999
expect_exit 2 "^batond: --max-connections \(max_connections\): 'lots' is not an integer\$" \
    --max-connections lots
expect_exit 2 "^batond: --log_rate: '-5' is too small \(at least 0\)\$" --log_rate -5
expect_exit 2 "^batond: --frame-timeout \(frame_timeout\): '0s' is too small \(at least 1 ms\)\$" \
    --frame-timeout 0s
expect_exit 2 "^batond: --max-message-bytes \(max_message_bytes\): '5G' is too large \(at most 4294967296 bytes\)\$" \
    --max-message-bytes 5G
expect_exit 2 "refusing to listen on 0.0.0.0" --host 0.0.0.0 --port 0 --port-file "$tmp/never"
expect_exit 2 "refusing to listen on ::" --host :: --port 0 --port-file "$tmp/never"
# a port file is written by renaming over its path: a FIFO (or a device)
# there is refused, and stays what it was
mkfifo "$tmp/port.fifo"
expect_exit 1 "^batond: --port-file $tmp/port\.fifo: not a regular file \(the port file replaces the file at its path\)\$" \
    --host 127.0.0.1 --port 0 --port-file "$tmp/port.fifo"
[ -p "$tmp/port.fifo" ] || fail "batond replaced the FIFO given as --port-file"
# a name that does not resolve is said so (not "not a loopback address")
expect_exit 1 "^batond: cannot listen on nosuch\.invalid: the name does not resolve" \
    --host nosuch.invalid --port 0 --port-file "$tmp/never"
# an empty --host is named, quoted
expect_exit 2 "^batond: --host: '' is not an address \(give a host name or an IPv4 or IPv6 address\)\$" \
    --host "" --port 0 --port-file "$tmp/never"
# a prefix of one of batond's options: named, as batond takes options in full
expect_exit 2 "^batond: unknown argument: --thr \(batond takes its options spelled out in full: --threads\?; see batond --help\)\$" \
    --port 0 --thr 2
expect_exit 2 "^batond: unknown argument: --por \(batond takes its options spelled out in full; see batond --help\)\$" \
    --por 0
# empty paths and a bracketed --host are usage errors, before anything is bound
expect_exit 2 "^batond: --policy: an empty path \(see batond --help\)\$" --port 0 --policy ''
expect_exit 2 "^batond: --port-file: an empty path \(see batond --help\)\$" --port 0 --port-file ''
expect_exit 2 "^batond: --host: '\[fe80::5\]': give the address without brackets \(--host fe80::5\)\$" \
    --port 0 --host '[fe80::5]'
# --peer without --peer-key is a usage error, not a silently idle allow-list
expect_exit 2 "--peer \(peer\) needs --peer-key" --port 0 --peer 127.0.0.1:9 --port-file "$tmp/never"
# a bad setting is named as typed, with its policy key where spelled otherwise
expect_exit 2 "^batond: --max-graph-flops \(max_graph_flops\): expected a count" --max-graph-flops 1Q
expect_exit 2 "^batond: --max_graph_flops: expected a count" --max_graph_flops 1Q
expect_exit 0 "^Exit status: 0 after SIGTERM" --help
# --max-peer-links: what 0 means (tested in test_direct_fallback.sh)
expect_exit 0 "^                    opens none \(every hand-off from it takes the hub path\);$" --help
expect_exit 0 "^max_peer_links = 0$" --print-policy --max-peer-links 0
# one list entry too many is named by its flag (it was "batond: --more than
# 64 peer entries")
many=(); for i in $(seq 65); do many+=(--peer "127.0.0.1:$i"); done
expect_exit 2 "^batond: --peer: more than 64 entries\$" --print-policy "${many[@]}"
many=(); for i in $(seq 17); do many+=(--client "c$i c$i.key"); done
expect_exit 2 "^batond: --client: more than 16 entries\$" --print-policy "${many[@]}"
[ ! -e "$tmp/never" ] || fail "a refused server wrote a port file"

# the port file: exactly one line with the bound port, written atomically
start a --port 0 --threads 2
pa=$started_pid
porta=$started_port
[[ "$porta" =~ ^[0-9]+$ ]] && [ "$porta" -ge 1 ] && [ "$porta" -le 65535 ] || fail "port file holds '$porta'"
[ "$(wc -l <"$tmp/a.port")" -eq 1 ] || fail "port file is not one line"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary port file left behind"
grep -q "listening on 127.0.0.1:$porta" "$tmp/a.log" || fail "no start line naming the address"
# the start line names the kernels' level; BATON_CPU_ISA lowers it (any
# case), and a value it does not know is named in a warning
grep -Eq "listening on .*, kernels (scalar|avx2|avx512)\)$" "$tmp/a.log" || fail "no kernels level"
BATON_CPU_ISA=Scalar start s --port 0
grep -q ", kernels scalar)$" "$tmp/s.log" || fail "BATON_CPU_ISA=Scalar: $(cat "$tmp/s.log")"
BATON_CPU_ISA=avx-2 start t --port 0
grep -q "^batond: BATON_CPU_ISA=avx-2 ignored (not scalar, avx2 or avx512): kernels " "$tmp/t.log" ||
    fail "BATON_CPU_ISA=avx-2: $(cat "$tmp/t.log")"
# an empty value is unset: no warning
BATON_CPU_ISA= start e --port 0
grep -q "BATON_CPU_ISA" "$tmp/e.log" && fail "BATON_CPU_ISA= warned: $(cat "$tmp/e.log")"
grep -Eq ", kernels (scalar|avx2|avx512)\)$" "$tmp/e.log" || fail "BATON_CPU_ISA=: $(cat "$tmp/e.log")"

# a second server gets another port; the first one's port is busy
start b --port 0
pb=$started_pid
[ "$started_port" != "$porta" ] || fail "two servers on one port"
# the system's reason alone, not wrapped in a protocol status
expect_exit 1 "^batond: cannot listen on 127.0.0.1:$porta: Address already in use\$" --port "$porta"

# started with stdin, stdout and stderr closed (as some supervisors do): the
# three are held with /dev/null, so no socket of the server becomes one
"$BATOND" --port 0 --port-file "$tmp/closed.port" <&- >&- 2>&- &
closed_pid=$!
pids+=("$closed_pid")
for _ in $(seq 100); do [ -s "$tmp/closed.port" ] && break; sleep 0.1; done
[ -s "$tmp/closed.port" ] || fail "batond with closed stdio: no port file"
for fd in 0 1 2; do
    [ "$(readlink "/proc/$closed_pid/fd/$fd")" = /dev/null ] ||
        fail "batond with closed stdio: fd $fd is $(readlink "/proc/$closed_pid/fd/$fd")"
done

# baton info against a live server (skipped if `baton` is not built)
if [ -n "${BATON:-}" ] && [ -x "$BATON" ]; then
    rc=0
    timeout 20 "$BATON" info --servers "127.0.0.1:$porta,127.0.0.1:$started_port" >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$tmp/info" >&2; fail "baton info exited $rc"; }
    [ "$(grep -c 'name        batond cpu' "$tmp/info")" -eq 2 ] || fail "baton info: no device names"
    grep -q "threads     2" "$tmp/info" || fail "baton info: --threads 2 not reported"
    grep -q "types       f32 f16 q4_0 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs i32" "$tmp/info" || fail "baton info: types"
    # options as every baton command takes them: a prefix, --opt=value
    rc=0
    timeout 20 "$BATON" info --serv="127.0.0.1:$porta" --time 5000 >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] && [ "$(grep -c 'name        batond cpu' "$tmp/info")" -eq 1 ] ||
        fail "baton info --serv=ADDR --time 5000: rc $rc: $(cat "$tmp/info")"
    rc=0
    timeout 20 "$BATON" info --servers "127.0.0.1:$porta,nonsense" >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || fail "baton info with a bad server spec exited $rc, want 2"
    # the list is checked as `baton run` checks it (an empty list used to exit 0
    # without output, port 0 was called a name that does not resolve)
    for spec in "," "127.0.0.1:$porta," "127.0.0.1:0"; do
        rc=0
        timeout 20 "$BATON" info --servers "$spec" >"$tmp/info" 2>&1 || rc=$?
        [ "$rc" -eq 2 ] && grep -q "^baton info: --servers: " "$tmp/info" ||
            fail "baton info --servers '$spec': rc $rc: $(cat "$tmp/info")"
    done
    # the servers given without --servers: the error says where they go
    rc=0
    "$BATON" info "127.0.0.1:$porta" >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$tmp/info")" = \
        "baton info: 127.0.0.1:$porta: unknown argument (the servers go after --servers)
(see \`baton info --help\`)" ] ||
        fail "baton info ADDR: rc $rc: $(cat "$tmp/info")"
    rc=0
    "$BATON" info --servers "127.0.0.1:$porta" --timeout 99999999999999999999 >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -qx "baton info: --timeout: '99999999999999999999' is too large (at most 86400000)" \
        "$tmp/info" || fail "baton info --timeout past 2^64: rc $rc: $(cat "$tmp/info")"
fi

# SIGTERM with an idle client attached: the server drains and exits 0
exec 3<>"/dev/tcp/127.0.0.1/$porta"
stop_with TERM "$pa"
grep -q "batond: stopped" "$tmp/a.log" || fail "no stop line after SIGTERM"
exec 3>&-
# SIGINT works the same way, and SIGHUP (a closed terminal: the README's
# batond started with & from a shell) too, where it killed batond
stop_with INT "$pb"
start hup --port 0
exec 3<>"/dev/tcp/127.0.0.1/$started_port"
stop_with HUP "$started_pid"
grep -q "batond: stopped" "$tmp/hup.log" || fail "no stop line after SIGHUP: $(cat "$tmp/hup.log")"
exec 3>&-

# nobody listens on a's port any more: `baton info` names the endpoint and a hint
if [ -n "${BATON:-}" ] && [ -x "$BATON" ]; then
    rc=0
    timeout 20 "$BATON" info --servers "127.0.0.1:$porta" >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 1 ] || fail "baton info on a closed port exited $rc, want 1"
    grep -qx "baton info: 127.0.0.1:$porta: connect failed: E_IO (Connection refused); is batond running and listening there?" \
        "$tmp/info" || fail "baton info on a closed port: $(cat "$tmp/info")"
    rc=0
    timeout 20 "$BATON" info --servers "nosuch.invalid:7340" >"$tmp/info" 2>&1 || rc=$?
    [ "$rc" -eq 1 ] && grep -qx "baton info: nosuch.invalid:7340: connect failed: the host name does not resolve" \
        "$tmp/info" || fail "baton info on an unresolvable name: rc $rc: $(cat "$tmp/info")"
    "$BATON" info --help >"$tmp/info"
    grep -q "^Exit status: 0 every server answered" "$tmp/info" || fail "baton info --help: exit status"
fi

# a policy flag whose value is missing does not take the next option as it
rc=0
"$BATOND" --compute-slice --print-policy >"$tmp/noval.out" 2>"$tmp/noval.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "batond: --compute-slice needs a value; the next argument is the option --print-policy" \
    "$tmp/noval.err" || fail "a flag without its value: rc $rc: $(cat "$tmp/noval.err")"
# ... nor does any other option that takes a value (--port-file --quiet
# once wrote the port into a file named ./--quiet and started)
for opt in --port-file --host --policy --key --peer-key --port --threads --log-format; do
    rc=0
    (cd "$tmp" && timeout 10 "$BATOND" "$opt" --quiet --port 0 >"$tmp/noval.out" 2>"$tmp/noval.err") || rc=$?
    [ "$rc" -eq 2 ] && grep -q "batond: $opt needs a value; the next argument is the option --quiet" \
        "$tmp/noval.err" && [ ! -e "$tmp/--quiet" ] || fail "$opt --quiet: rc $rc: $(head -3 "$tmp/noval.err")"
done

# memory settings that cannot work as written start, with a warning each
printf 'session_memory_bytes = 2G\ntotal_memory_bytes = 1G\n' >"$tmp/mem.policy"
start mem --port 0 --policy "$tmp/mem.policy"
stop_with TERM "$started_pid"
grep -q "session_memory_bytes (2048 MiB) is more than total_memory_bytes (1024 MiB), which caps" \
    "$tmp/mem.log" || fail "no session > total warning: $(cat "$tmp/mem.log")"
if [ -n "${BATON:-}" ] && [ -x "$BATON" ]; then
    "$BATON" keygen -o "$tmp/big.key" 2>/dev/null
    start memc --port 0 --policy "$tmp/mem.policy" --client "big $tmp/big.key session_memory_bytes=3G"
    stop_with TERM "$started_pid"
    grep -q "client key big: session_memory_bytes (3072 MiB) is more than total_memory_bytes" \
        "$tmp/memc.log" || fail "no client line warning: $(cat "$tmp/memc.log")"
fi
printf 'total_memory_bytes = 1048576G\n' >"$tmp/mem2.policy"
start mem2 --port 0 --policy "$tmp/mem2.policy"
stop_with TERM "$started_pid"
grep -q "total_memory_bytes (1073741824 MiB) is more than this machine's memory" "$tmp/mem2.log" ||
    fail "no total > RAM warning: $(cat "$tmp/mem2.log")"

# --quiet: no per-connection lines
start q --port 0 --quiet
exec 3<>"/dev/tcp/127.0.0.1/$started_port"
exec 3>&-
stop_with TERM "$started_pid"
grep -q "connection from" "$tmp/q.log" && fail "--quiet still logs connections"
echo "PASS"
