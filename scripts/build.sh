#!/usr/bin/env bash
# Configures (once) and builds Switchyard into build/ with g++-12 and Ninja against the
# system LLVM/MLIR 22. Usage: scripts/build.sh [ninja targets...]
# The tests' Python is Debian's (setup.sh installs numpy there); SWITCHYARD_PYTHON
# chooses another.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
jobs="${SWITCHYARD_JOBS:-$(nproc)}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=gcc-12 -DCMAKE_CXX_COMPILER=g++-12 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DPython3_EXECUTABLE="${SWITCHYARD_PYTHON:-/usr/bin/python3}"
fi
ninja -C "$build" -j "$jobs" "$@"
