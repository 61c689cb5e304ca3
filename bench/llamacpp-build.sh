#!/usr/bin/env bash
# Builds the reference llama.cpp for the benchmarks: llama-bench and
# llama-batched-bench, twice (issues 14 and 17).
#
#   bench/llamacpp-build.sh [--dir DIR] [--jobs N]
#
# DIR (default $BUILD_DIR/llamacpp, else build/llamacpp; never inside src/)
# receives everything; nothing of llama.cpp enters the repository.
#   1. `npm ci` of bench/llamacpp/package-lock.json: node-llama-cpp 3.21.1 and
#      @node-llama-cpp/linux-x64 3.21.1, exact versions (--omit=optional
#      --ignore-scripts: no CUDA/Vulkan binaries, no postinstall download).
#   2. `git clone` of the llama.cpp source the package bundles
#      (node_modules/node-llama-cpp/llama/gitRelease.bundle) into
#      DIR/llama.cpp, with the package's own patches (llama/patches/*.diff,
#      the ones its builds apply) applied.
#   3. native: DIR/build-native, -DGGML_NATIVE=ON (plus -mno-amx-tile
#      -mno-amx-int8 -mno-amx-bf16 on a CPU with AMX: the native AMX path of
#      this version crashes on prefill), -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF,
#      targets llama-bench and llama-batched-bench only, -j N (default 2).
#   4. prebuilt: the object files of those two tools from step 3, linked
#      against the package's prebuilt libraries (libllama, libggml,
#      libggml-base, libllama-common; libggml loads the best of its per-CPU
#      libggml-cpu-*.so at run time) into DIR/prebuilt/, with an rpath to
#      their folder. Run them with that folder as the working directory
#      (where libggml looks for the CPU backends): bench/lib.sh's
#      bench_llamacpp_find gives the paths.
# Each step is skipped when its result is already there (the builds are
# incremental), so a second run only checks; a native build made on another
# CPU (family, model or flags differ) is removed and made again. The last lines say where each
# binary is, or why it could not be built; exit status 1 if neither build
# has both tools.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
dir=$build/llamacpp
jobs=2
while [ $# -gt 0 ]; do
    case $1 in
    --dir | --jobs) [ $# -ge 2 ] && [ -n "$2" ] ||
        { echo "llamacpp-build.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --dir) dir=$2; shift 2 ;;
    --jobs)
        case $2 in
        '' | *[!0-9]* | 0*) echo "llamacpp-build.sh: --jobs: '$2' is not a positive integer" >&2
            exit 2 ;;
        esac
        jobs=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "llamacpp-build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
case $dir/ in "$src/src/"*) echo "llamacpp-build.sh: --dir $dir is inside src/" >&2; exit 2 ;; esac

say() { echo "llamacpp-build: $*"; }
die() { echo "llamacpp-build: $*" >&2; exit 1; }
version_of() { sed -n 's/^  "version": "\(.*\)",*$/\1/p' "$1" | head -n 1; }

for t in node npm git cmake c++; do
    command -v "$t" >/dev/null 2>&1 || die "cannot build: $t is not installed"
done
node_major=$(node --version | sed 's/^v\([0-9]*\).*/\1/')
[ "$node_major" -ge 20 ] 2>/dev/null || die "cannot install node-llama-cpp: node $(node --version) is older than 20"
mkdir -p "$dir"
log=$dir/logs
mkdir -p "$log"

# --- 1. the npm package ------------------------------------------------------
pkg=$dir/node_modules/node-llama-cpp
bins=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if ! cmp -s "$src/bench/llamacpp/package-lock.json" "$dir/package-lock.json" ||
    [ "$(version_of "$pkg/package.json" 2>/dev/null)" != 3.21.1 ] ||
    [ ! -d "$bins" ]; then
    say "npm ci (node-llama-cpp 3.21.1, @node-llama-cpp/linux-x64 3.21.1) in $dir"
    cp "$src/bench/llamacpp/package.json" "$src/bench/llamacpp/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund) >"$log/npm.log" 2>&1 ||
        { tail -n 15 "$log/npm.log" >&2; die "npm ci failed in $dir (log: $log/npm.log)"; }
fi
for p in "$pkg" "$dir/node_modules/@node-llama-cpp/linux-x64"; do
    [ "$(version_of "$p/package.json")" = 3.21.1 ] ||
        die "$p is version $(version_of "$p/package.json"), not 3.21.1"
done
say "node-llama-cpp $(version_of "$pkg/package.json"), @node-llama-cpp/linux-x64" \
    "$(version_of "$dir/node_modules/@node-llama-cpp/linux-x64/package.json");" \
    "llama.cpp release $(sed -n 's/.*"tag": "\(.*\)".*/\1/p' "$pkg/llama/llama.cpp.info.json")"

# --- 2. the bundled source ---------------------------------------------------
lsrc=$dir/llama.cpp
bundle=$pkg/llama/gitRelease.bundle
want=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
if [ ! -d "$lsrc/.git" ]; then
    say "git clone $bundle -> $lsrc"
    git clone -q "$bundle" "$lsrc" >"$log/clone.log" 2>&1 ||
        { cat "$log/clone.log" >&2; die "git clone of the bundle failed"; }
fi
have=$(git -C "$lsrc" rev-parse HEAD)
[ "$have" = "$want" ] ||
    die "$lsrc is at $have, the bundle at $want: remove $lsrc to clone it again"
for patch in "$pkg"/llama/patches/*.diff; do
    [ -f "$patch" ] || continue
    if git -C "$lsrc" apply --check "$patch" 2>/dev/null; then
        git -C "$lsrc" apply "$patch"
        say "applied the package's patch $(basename "$patch")"
    elif ! git -C "$lsrc" apply -R --check "$patch" 2>/dev/null; then
        die "the package's patch $(basename "$patch") neither applies nor is applied in $lsrc"
    fi
done
say "source: $lsrc at $(git -C "$lsrc" rev-parse --short HEAD), patches:" \
    "$(cd "$pkg/llama/patches" 2>/dev/null && echo ./*.diff | sed 's|\./||g')"

# --- 3. native build ---------------------------------------------------------
native=$dir/build-native
amx=()
if grep -qw amx_tile /proc/cpuinfo; then
    amx=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
    say "the CPU has AMX: native build with -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
# A native build is for the CPU it was built on (-march=native): on another host
# (hosts change between sessions) it can die of SIGILL or measure the wrong
# code, so the CPU's family, model and flags are stamped and a change rebuilds.
cpu_stamp=$(grep -m3 -E '^(cpu family|model|flags)[[:space:]]*:' /proc/cpuinfo)
if [[ -d $native && "$(cat "$native/baton-cpu-stamp" 2>/dev/null)" != "$cpu_stamp" ]]; then
    say "$native was built on another CPU (or before stamps): building it again"
    rm -rf "$native"
fi
native_ok=0
if cmake -S "$lsrc" -B "$native" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF "${amx[@]+"${amx[@]}"}" \
    >"$log/native-configure.log" 2>&1; then
    say "building llama-bench and llama-batched-bench in $native (-j$jobs; minutes on 2 cores)"
    if cmake --build "$native" -j"$jobs" --target llama-bench llama-batched-bench \
        >"$log/native-build.log" 2>&1; then
        native_ok=1
        printf '%s\n' "$cpu_stamp" >"$native/baton-cpu-stamp"
    else
        tail -n 20 "$log/native-build.log" >&2
        say "native build FAILED (log: $log/native-build.log)"
    fi
else
    tail -n 20 "$log/native-configure.log" >&2
    say "native configure FAILED (log: $log/native-configure.log)"
fi

# --- 4. the tools linked against the prebuilt libraries ----------------------
pre=$dir/prebuilt
pre_ok=0
libs=()
for pat in 'libllama.v*.so' 'libggml.v*.so' libggml-base.so libllama-common.so; do
    f=""
    for c in "$bins"/$pat; do
        if [ -e "$c" ]; then f=${c##*/}; break; fi
    done
    if [ -z "$f" ]; then
        say "prebuilt: no $pat in $bins"
        libs=()
        break
    fi
    libs+=("-l:$f")
done
# obj TARGET SOURCE: the native build's object file of SOURCE in TARGET
obj() { find "$native" -path "*/CMakeFiles/$1.dir/*" -name "$2.o" 2>/dev/null | head -n 1; }
if [ "$native_ok" = 1 ] && [ "${#libs[@]}" = 4 ]; then
    mkdir -p "$pre"
    pre_ok=1
    for tool in llama-bench:llama-bench llama-batched-bench:batched-bench; do
        exe=${tool%%:*} impl=$(obj "${exe}-impl" "${tool#*:}.cpp") main=$(obj "$exe" main.cpp)
        if [ -z "$impl" ] || [ -z "$main" ]; then
            say "prebuilt: object files of $exe not found in $native"
            pre_ok=0
            continue
        fi
        if [ ! -x "$pre/$exe" ] || [ "$impl" -nt "$pre/$exe" ] || [ "$main" -nt "$pre/$exe" ]; then
            if ! c++ -o "$pre/$exe" "$main" "$impl" -L"$bins" -Wl,-rpath,"$bins" "${libs[@]}" \
                -pthread >"$log/prebuilt-$exe.log" 2>&1; then
                tail -n 20 "$log/prebuilt-$exe.log" >&2
                say "prebuilt: linking $exe FAILED (log: $log/prebuilt-$exe.log)"
                pre_ok=0
                continue
            fi
        fi
        # the libraries must resolve, and the tool must start
        if ! (cd "$bins" && "$pre/$exe" --help) >"$log/prebuilt-$exe-help.log" 2>&1; then
            tail -n 10 "$log/prebuilt-$exe-help.log" >&2
            say "prebuilt: $exe does not run (log: $log/prebuilt-$exe-help.log)"
            pre_ok=0
        fi
    done
elif [ "$native_ok" != 1 ]; then
    say "prebuilt: not linked: it takes the tools' object files from the native build"
fi

# --- where things are ----------------------------------------------------------
if [ "$native_ok" = 1 ]; then
    say "native   llama-bench:         $native/bin/llama-bench"
    say "native   llama-batched-bench: $native/bin/llama-batched-bench"
else
    say "native   NOT BUILT (see above)"
fi
if [ "$pre_ok" = 1 ]; then
    say "prebuilt llama-bench:         $pre/llama-bench (run in $bins)"
    say "prebuilt llama-batched-bench: $pre/llama-batched-bench (run in $bins)"
else
    say "prebuilt NOT BUILT (see above)"
fi
[ "$native_ok" = 1 ] || [ "$pre_ok" = 1 ] || exit 1
