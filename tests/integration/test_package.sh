#!/usr/bin/env bash
# cpack -G DEB: the package's file list, control fields (Depends from
# dpkg-shlibdeps: libc6, libsodium23, libseccomp2, libpcre2-8-0, libmicrohttpd12,
# libjansson4) and conffiles; then the package unpacked with dpkg -x into a
# throwaway root, as on a machine without the build tree: its batond and baton
# run (--help, --version), need no library from the build tree, its manual
# pages are man/'s, and the shipped policy parses.
. "$(dirname "$0")/lib.sh"
: "${BUILD_DIR:?}" "${SRC_DIR:?}"
if [ "${BATON_ASAN:-}" = "1" ]; then
    echo "SKIP: the package is built from the plain build (make check), not the sanitizer build" >&2
    exit 77
fi

(cd "$BUILD_DIR" && cpack -G DEB -B "$TMP/pkg") >"$TMP/cpack.log" 2>&1 ||
    fail "cpack -G DEB: $(tail -20 "$TMP/cpack.log")"
DEBS=("$TMP"/pkg/baton_*.deb)
[ "${#DEBS[@]}" -eq 1 ] && [ -f "${DEBS[0]}" ] || fail "expected one baton_*.deb, got: ${DEBS[*]}"
DEB=${DEBS[0]}
ARCH=$(dpkg --print-architecture)
[ "$(basename "$DEB")" = "baton_0.1.0_$ARCH.deb" ] || fail "package file name: $(basename "$DEB")"

# files (not directories), with their modes
dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $1, $6}' |
    sed -e 's| \./| /|' -e 's|/batonTargets-[a-z]*\.cmake$|/batonTargets-CONFIG.cmake|' |
    LC_ALL=C sort -k2 >"$TMP/got"
LC_ALL=C sort -k2 >"$TMP/want" <<'LIST'
-rw-r--r-- /etc/baton/batond.policy
-rwxr-xr-x /usr/bin/baton
-rwxr-xr-x /usr/bin/batond
-rw-r--r-- /usr/include/baton/auth/auth.h
-rw-r--r-- /usr/include/baton/client.h
-rw-r--r-- /usr/include/baton/core/limits.h
-rw-r--r-- /usr/include/baton/core/ops.h
-rw-r--r-- /usr/include/baton/core/tensor.h
-rw-r--r-- /usr/include/baton/core/types.h
-rw-r--r-- /usr/include/baton/status.h
-rw-r--r-- /usr/include/baton/wire/wire.h
-rw-r--r-- /usr/lib/cmake/baton/batonConfig.cmake
-rw-r--r-- /usr/lib/cmake/baton/batonConfigVersion.cmake
-rw-r--r-- /usr/lib/cmake/baton/batonTargets-CONFIG.cmake
-rw-r--r-- /usr/lib/cmake/baton/batonTargets.cmake
-rw-r--r-- /usr/lib/libbaton.a
lrwxrwxrwx /usr/lib/libbaton.so
lrwxrwxrwx /usr/lib/libbaton.so.0
-rw-r--r-- /usr/lib/libbaton.so.0.1.0
-rw-r--r-- /usr/lib/pkgconfig/baton.pc
-rw-r--r-- /usr/lib/systemd/system/batond.service
-rw-r--r-- /usr/lib/systemd/system/batond@.service
-rw-r--r-- /usr/share/doc/baton/examples/batond.policy
-rw-r--r-- /usr/share/man/man1/baton.1.gz
-rw-r--r-- /usr/share/man/man5/batond.policy.5.gz
-rw-r--r-- /usr/share/man/man8/batond.8.gz
LIST
if ! diff -u "$TMP/want" "$TMP/got" >"$TMP/list.diff"; then
    cat "$TMP/list.diff" >&2
    fail "package file list differs (- expected, + in the package)"
fi

# control fields
field_is() {
    local got
    got=$(dpkg-deb -f "$DEB" "$1")
    [ "$got" = "$2" ] || fail "control field $1: got '$got', want '$2'"
}
field_is Package baton
field_is Version 0.1.0
field_is Architecture "$ARCH"
field_is Section net
[ -n "$(dpkg-deb -f "$DEB" Maintainer)" ] || fail "no Maintainer"
DEPENDS=$(dpkg-deb -f "$DEB" Depends)
for lib in libc6 libsodium23 libssl3 libseccomp2 libpcre2-8-0 libmicrohttpd12 libjansson4; do
    grep -Eq "(^|, )$lib( \\(>= [0-9.]+\\))?(,|$)" <<<"$DEPENDS" ||
        fail "Depends lacks $lib: $DEPENDS"
done
# and nothing else: a dependency on a -dev package or the build tree would be wrong
[ "$(tr ',' '\n' <<<"$DEPENDS" | grep -c .)" -eq 7 ] || fail "Depends has more than 7: $DEPENDS"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles >"$TMP/conffiles"
[ "$(cat "$TMP/conffiles")" = /etc/baton/batond.policy ] ||
    fail "conffiles: $(cat "$TMP/conffiles")"
echo "ok: control: $(dpkg-deb -f "$DEB" Package Version Architecture Depends | tr '\n' ' ')"

# a throwaway root, as after dpkg -i on another machine
ROOT="$TMP/root"
dpkg -x "$DEB" "$ROOT"
for prog in batond baton; do
    bin="$ROOT/usr/bin/$prog"
    out=$("$bin" --help) || fail "$prog --help exited $?"
    grep -q "^usage: $prog" <<<"$out" || fail "$prog --help: $(head -2 <<<"$out")"
    grep -q "^$prog 0\\.1\\.0" <<<"$("$bin" --version)" || fail "$prog --version"
    libs=$(ldd "$bin")
    if grep -q "not found" <<<"$libs"; then fail "$prog: a library is missing: $libs"; fi
    if grep -qF -e "$BUILD_DIR" -e "$SRC_DIR" <<<"$libs"; then
        fail "$prog needs a library from the build tree: $libs"
    fi
    if grep -Eq "R(UN)?PATH" <<<"$(readelf -d "$bin")"; then
        fail "$prog carries an RPATH/RUNPATH"
    fi
    # every library it needs is one the package depends on (or libc's own)
    for needed in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        case $needed in
        libc.so.6 | libm.so.6 | libpthread.so.0 | ld-linux*) ;;
        libsodium.so.23 | libcrypto.so.3 | libseccomp.so.2 | libpcre2-8.so.0) ;;
        libmicrohttpd.so.12 | libjansson.so.4) ;; # baton serve
        *) fail "$prog needs $needed, which Depends does not cover" ;;
        esac
    done
    # CPACK_STRIP_FILES: no debug sections (they name the build tree)
    if grep -q '\.debug_info' <<<"$(readelf -S "$bin")"; then fail "$prog is not stripped"; fi
    echo "ok: $prog: --help, --version, ldd: $(grep -o '^[[:space:]]*[^ ]*' <<<"$libs" | tr -d '\t' | tr '\n' ' ')"
done

# the manual pages are man/'s, compressed
for page in baton.1 batond.policy.5 batond.8; do
    gz="$ROOT/usr/share/man/man${page##*.}/$page.gz"
    gzip -dc "$gz" | cmp -s - "$SRC_DIR/man/$page" || fail "$gz is not man/$page compressed"
done
echo "ok: manual pages"

# the shipped policy parses, and gives the defaults batond has without it
"$ROOT/usr/bin/batond" --print-policy --policy "$ROOT/etc/baton/batond.policy" >"$TMP/pol.file" ||
    fail "the packaged batond refuses the packaged policy"
"$ROOT/usr/bin/batond" --print-policy >"$TMP/pol.default"
diff -u "$TMP/pol.default" "$TMP/pol.file" >&2 ||
    fail "/etc/baton/batond.policy is not the defaults"
cmp -s "$ROOT/etc/baton/batond.policy" "$SRC_DIR/policy/batond.policy" ||
    fail "/etc/baton/batond.policy differs from policy/batond.policy"
echo "PASS"
