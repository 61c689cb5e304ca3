#!/usr/bin/env bash
# Shows that the proof gate bites: on a copy of the sources whose range check
# adds (off + n <= size, which wraps) instead of subtracting, verify/run.sh
# must fail; on an unchanged copy, proving the same function must pass (so the
# failure comes from the broken check, not from the setup).
#
# usage: verify/bites.sh [BUILD_DIR]   exit 0 iff the gate failed on the broken copy
set -u

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A copy of the tree the proof reads, with a compile database pointing at it.
copy() {
    mkdir -p "$1/build"
    cp -r "$src/src" "$src/include" "$1/"
    sed "s|$build|$1/build|g; s|$src/|$1/|g" "$build/compile_commands.json" \
        >"$1/build/compile_commands.json"
}

copy "$tmp/good"
copy "$tmp/bad"
good='if (off <= size && n <= size - off)'
bad='if (off + n <= size)'
grep -qF "$good" "$tmp/bad/src/wire/bounds.c" || {
    echo "bites: range check not found in src/wire/bounds.c" >&2
    exit 1
}
sed -i "s|$good|$bad|" "$tmp/bad/src/wire/bounds.c"
grep -qF "$bad" "$tmp/bad/src/wire/bounds.c" || exit 1

export BATON_WP_FCT=baton_wire_check_range
if ! BATON_WP_ROOT="$tmp/good" BATON_WP_LOGS="$tmp/good/logs" "$here/run.sh" "$tmp/good/build"; then
    echo "bites: the unchanged range check did not prove; cannot judge the gate" >&2
    exit 1
fi
out=$(BATON_WP_ROOT="$tmp/bad" BATON_WP_LOGS="$tmp/bad/logs" "$here/run.sh" "$tmp/bad/build")
rc=$?
echo "$out"
if [ "$rc" -eq 0 ]; then
    echo "bites: FAILED: the gate accepted off + n <= size"
    exit 1
fi
if ! grep -q 'unproved' <<<"$out" || grep -q ' 0 unproved' <<<"$out"; then
    echo "bites: FAILED: the gate failed, but not on an unproved goal"
    exit 1
fi
echo "bites: OK: the gate rejects the adding range check"
