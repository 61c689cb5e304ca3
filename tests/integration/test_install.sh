#!/usr/bin/env bash
# cmake --install into a staging prefix: the exact file list, then a client
# (tests/install/libbaton_smoke.c) built against the staged libbaton with
# pkg-config and with find_package(baton) (shared and static), run against
# a keyed batond on loopback: a byte-exact round trip through the server.
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}" "${SRC_DIR:?}"
if [ "${BATON_ASAN:-}" = "1" ]; then
    # the staged libbaton would carry ASan's runtime, which a plain cc link lacks
    echo "SKIP: install test runs on the plain build (make check), not the sanitizer build" >&2
    exit 77
fi

PREFIX="$TMP/stage/usr"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
    fail "cmake --install: $(tail -5 "$TMP/install.log")"

# every file and link the install puts down, nothing else
# (the exported targets' per-configuration file is named for the build type)
(cd "$PREFIX" && find . \( -type f -o -type l \) | sed -e 's|^\./||' \
    -e 's|/batonTargets-[a-z]*\.cmake$|/batonTargets-CONFIG.cmake|' | LC_ALL=C sort) >"$TMP/got"
LC_ALL=C sort >"$TMP/want" <<'LIST'
bin/baton
bin/batond
etc/baton/batond.policy
include/baton/auth/auth.h
include/baton/client.h
include/baton/core/limits.h
include/baton/core/ops.h
include/baton/core/tensor.h
include/baton/core/types.h
include/baton/status.h
include/baton/wire/wire.h
lib/cmake/baton/batonConfig.cmake
lib/cmake/baton/batonConfigVersion.cmake
lib/cmake/baton/batonTargets-CONFIG.cmake
lib/cmake/baton/batonTargets.cmake
lib/libbaton.a
lib/libbaton.so
lib/libbaton.so.0
lib/libbaton.so.0.1.0
lib/pkgconfig/baton.pc
lib/systemd/system/batond.service
lib/systemd/system/batond@.service
share/doc/baton/examples/batond.policy
share/man/man1/baton.1.gz
share/man/man5/batond.policy.5.gz
share/man/man8/batond.8.gz
LIST
if ! diff -u "$TMP/want" "$TMP/got" >"$TMP/list.diff"; then
    cat "$TMP/list.diff" >&2
    fail "installed file list differs (- expected, + installed)"
fi
[ -x "$PREFIX/bin/batond" ] && [ -x "$PREFIX/bin/baton" ] || fail "binaries not executable"
[ "$(readlink "$PREFIX/lib/libbaton.so")" = libbaton.so.0 ] || fail "libbaton.so link"
# the shared library's soname is the one its link names (grep reads a
# string, not a pipe: with pipefail, a grep -q that ends first fails the pipe)
grep -q 'SONAME *libbaton.so.0$' <<<"$(objdump -p "$PREFIX/lib/libbaton.so.0.1.0")" ||
    fail "libbaton.so.0.1.0 has no SONAME libbaton.so.0"
grep -q '^batond 0\.1\.0 ' <<<"$("$PREFIX/bin/batond" --version)" || fail "installed batond --version"

make_keys
"$BATOND" --host 127.0.0.1 --port 0 --port-file "$TMP/port.s" --threads 1 --key "$K" \
    ${BATOND_EXTRA:-} 2>"$TMP/batond.s.log" &
PIDS+=("$!")
wait_port_file s "$!" || fail "batond did not start: $(cat "$TMP/batond.s.log")"
PORT=$(cat "$TMP/port.s")
WANT="version 1 authenticated 1 threads 1 roundtrip ok stale E_STALE_HANDLE"

# run_smoke NAME BINARY: its line must be WANT
run_smoke() {
    local out
    out=$("$2" 127.0.0.1 "$PORT" "$K") || fail "$1: exit $?: $out"
    [ "$out" = "$WANT" ] || fail "$1: got '$out', want '$WANT'"
    echo "ok: $1: $out"
}

# pkg-config, from the staged .pc only (relocatable: ${pcfiledir})
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
[ "$(pkg-config --modversion baton)" = 0.1.0 ] || fail "pkg-config --modversion baton"
case " $(pkg-config --cflags baton) " in
*" -I$PREFIX/lib/pkgconfig/../../include "*) ;;
*) fail "pkg-config --cflags baton: $(pkg-config --cflags baton)" ;;
esac
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$TMP/smoke_pc" "$SRC_DIR/tests/install/libbaton_smoke.c" \
    $(pkg-config --cflags --libs baton) -Wl,-rpath,"$PREFIX/lib" 2>"$TMP/cc.log" ||
    fail "cc with pkg-config: $(cat "$TMP/cc.log")"
grep -q "libbaton.so.0 => $PREFIX/lib/libbaton.so.0" <<<"$(ldd "$TMP/smoke_pc")" ||
    fail "smoke_pc does not load the staged libbaton: $(ldd "$TMP/smoke_pc")"
run_smoke pkg-config "$TMP/smoke_pc"

# find_package(baton): baton::baton and baton::baton_static
cmake -S "$SRC_DIR/tests/install" -B "$TMP/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/consumer.log" 2>&1 ||
    fail "consumer configure: $(tail -20 "$TMP/consumer.log")"
grep -q "baton_DIR:PATH=$PREFIX/lib/cmake/baton" "$TMP/consumer/CMakeCache.txt" ||
    fail "find_package(baton) did not take the staged package"
cmake --build "$TMP/consumer" >>"$TMP/consumer.log" 2>&1 ||
    fail "consumer build: $(tail -20 "$TMP/consumer.log")"
grep -q "libbaton.so.0 => $PREFIX/lib/libbaton.so.0" <<<"$(ldd "$TMP/consumer/smoke_shared")" ||
    fail "smoke_shared does not load the staged libbaton: $(ldd "$TMP/consumer/smoke_shared")"
if grep -q libbaton <<<"$(ldd "$TMP/consumer/smoke_static")"; then
    fail "smoke_static needs a libbaton.so: $(ldd "$TMP/consumer/smoke_static")"
fi
run_smoke "find_package shared" "$TMP/consumer/smoke_shared"
run_smoke "find_package static" "$TMP/consumer/smoke_static"
echo "PASS"
