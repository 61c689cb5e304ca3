#!/bin/bash
# bench/plot.py draws its four PNGs (stages, hub_direct, roofline,
# transport) from the small JSON fixtures in tests/fixtures/bench/ (the
# formats bench/roofline.sh, compare-llamacpp.sh, transport.sh --json and
# bench/direct_path.sh write): each file exists, starts with the PNG
# signature and an IHDR chunk, is at least 400 x 300 pixels and 5 KB to
# 2 MB; a folder without JSON is an error (exit 1), a missing input only
# skips its plot. Skipped (77) without a python3 that has matplotlib
# (Debian: python3-matplotlib, installed by scripts/install-deps.sh --bench
# and --full).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
py=$("$SRC_DIR/bench/plot-python.sh") || py=""
if [ -z "$py" ]; then
    echo "SKIP: no python3 with matplotlib (apt-get install python3-matplotlib, or scripts/install-deps.sh --bench)" >&2
    exit 77
fi
fixtures=$SRC_DIR/tests/fixtures/bench

# check_png FILE: signature, IHDR, dimensions, size
check_png() {
    local f=$1 size w h
    [ -f "$f" ] || fail "$f not written"
    [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
        fail "$f: not a PNG (signature $(head -c 8 "$f" | od -An -tx1))"
    [ "$(dd if="$f" bs=1 skip=12 count=4 2>/dev/null)" = IHDR ] || fail "$f: no IHDR chunk first"
    w=$((16#$(dd if="$f" bs=1 skip=16 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
    h=$((16#$(dd if="$f" bs=1 skip=20 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
    if [ "$w" -lt 400 ] || [ "$h" -lt 300 ]; then fail "$f: $w x $h pixels, too small for a plot"; fi
    size=$(stat -c %s "$f")
    if [ "$size" -lt 5000 ] || [ "$size" -gt 2000000 ]; then fail "$f: $size bytes, not a plausible plot"; fi
    echo "ok: $(basename "$f") $w x $h, $size bytes"
}

"$py" "$SRC_DIR/bench/plot.py" "$fixtures" --out "$TMP/all" >"$TMP/plot.out" 2>&1 ||
    { cat "$TMP/plot.out" >&2; fail "plot.py exited non-zero on the fixtures"; }
for png in stages hub_direct roofline transport; do
    check_png "$TMP/all/$png.png"
    grep -q "^plot.py: wrote $TMP/all/$png.png\$" "$TMP/plot.out" || fail "plot.py did not report $png.png"
done
[ "$(find "$TMP/all" -type f | wc -l)" = 4 ] || fail "plot.py wrote other files: $(ls "$TMP/all")"

# without direct_path.json: hub_direct.png from the transport hand-off alone
mkdir "$TMP/part"
cp "$fixtures/transport.json" "$TMP/part/"
"$py" "$SRC_DIR/bench/plot.py" "$TMP/part" >"$TMP/part.out" 2>&1 ||
    { cat "$TMP/part.out" >&2; fail "plot.py exited non-zero on transport.json alone"; }
check_png "$TMP/part/transport.png"
check_png "$TMP/part/hub_direct.png"
if [ -e "$TMP/part/stages.png" ] || [ -e "$TMP/part/roofline.png" ]; then fail "plots without their JSON"; fi
grep -q "no .*roofline.json: that plot is skipped" "$TMP/part.out" || fail "no note of the skipped plot"

# nothing to plot: exit 1
mkdir "$TMP/empty"
rc=0
"$py" "$SRC_DIR/bench/plot.py" "$TMP/empty" >"$TMP/empty.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$TMP/empty.out" >&2; fail "plot.py on an empty folder: exit $rc, not 1"; }
echo "PASS: bench/plot.py writes the four PNGs"
