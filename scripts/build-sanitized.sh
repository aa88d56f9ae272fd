#!/usr/bin/env bash
# Builds the runtime, moe-exec and the runtime's unit tests with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-sanitized/ (runtime/ as a project of its own:
# no LLVM/MLIR, a few minutes on 2 cores). The runtime's fuzzer (test/fuzz/
# fuzz_runtime.py) and the sanitized replay of its reproducers (ctest
# fuzz/replay-runtime-sanitized) run this build's bin/moe-exec; it finds moe-compile
# at run time (SWITCHYARD_MOE_COMPILE, or on PATH).
# Usage: scripts/build-sanitized.sh [ninja targets...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_SANITIZED_BUILD_DIR:-$root/build-sanitized}"
jobs="${SWITCHYARD_JOBS:-$(nproc)}"
eval "$(grep -E '^GCC_VERSION=[0-9]+$' "$root/scripts/setup.sh")"   # setup.sh's toolchain
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root/runtime" -B "$build" \
    -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER="gcc-$GCC_VERSION" -DCMAKE_CXX_COMPILER="g++-$GCC_VERSION" \
    -DCMAKE_CXX_FLAGS="-O1 -g $flags" -DCMAKE_C_FLAGS="-O1 -g $flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
    -DCMAKE_UNITY_BUILD=ON   # the libraries' sources in a few translation units: half the time
fi
ninja -C "$build" -j "$jobs" "$@"
