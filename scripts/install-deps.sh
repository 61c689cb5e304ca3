#!/bin/sh
# Installs the Debian 12 packages baton needs to build, test, prove and fuzz.
# Idempotent: installs only what is missing; runs `why3 config detect` once.
# Called by `make demo` and `make check` (base), `make bench` (--bench) and `make test` (--full).
# Needs root (or sudo) only when something is missing.
set -eu

# Base: what building, `make demo` and `make check` need (groff-base and
# mandoc for the manual page check, tests/integration/test_man_pages.sh;
# libpcre2-dev for the BPE pre-tokenizers, src/model/tokenizer_pre.c;
# libssl-dev: libcrypto runs the frame MACs, src/auth/frame.c;
# libmicrohttpd-dev and libjansson-dev: `baton serve`'s HTTP and JSON,
# src/model/serve.c).
# --full adds the proof (Frama-C, why3, z3, cvc4), sanitizer (clang) and fuzzing (AFL++)
# toolchains that `make test` needs, gcovr (the per-file line coverage of
# `make coverage`, fuzz/coverage.sh), and systemd (systemd-analyze, for the
# unit checks).
# --bench adds python3-matplotlib (bench/plot.py draws the PNG plots of
# `make bench`); --full has it too, for the plot smoke test.
PKGS="build-essential cmake pkg-config libsodium-dev libssl-dev libseccomp-dev libcmocka-dev iproute2
groff-base mandoc libpcre2-dev libmicrohttpd-dev libjansson-dev"
BENCH_PKGS="python3 python3-matplotlib"
case "${1:-}" in
--full) PKGS="$PKGS clang libclang-rt-14-dev llvm afl++ gcovr frama-c-base why3 z3 cvc4 systemd $BENCH_PKGS" ;;
--bench) PKGS="$PKGS $BENCH_PKGS" ;;
esac

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    echo "install-deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# Frama-C finds its provers through why3's configuration (see verify/README.md).
if command -v why3 >/dev/null 2>&1; then
    conf="${HOME:-/root}/.why3.conf"
    if [ ! -f "$conf" ] || ! grep -q 'name = "Z3"' "$conf"; then
        why3 config detect >/dev/null 2>&1 || why3 config --detect >/dev/null 2>&1 || true
    fi
fi
exit 0
