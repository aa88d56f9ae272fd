#!/usr/bin/env bash
# Configures (once) and builds Switchyard into build/ with Ninja, the g++ and the system
# LLVM/MLIR of scripts/setup.sh's versions. Usage: scripts/build.sh [ninja targets...]
# The tests' Python is the project's .venv (setup.sh: Debian's numpy and matplotlib plus
# nanobind, torch, transformers); SWITCHYARD_PYTHON chooses another.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
jobs="${SWITCHYARD_JOBS:-$(nproc)}"
python="${SWITCHYARD_PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=/usr/bin/python3
eval "$(grep -E '^(LLVM|GCC)_VERSION=[0-9]+$' "$root/scripts/setup.sh")"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="gcc-$GCC_VERSION" -DCMAKE_CXX_COMPILER="g++-$GCC_VERSION" \
    -DSWITCHYARD_LLVM_VERSION="$LLVM_VERSION" \
    -DPython3_EXECUTABLE="$python"
elif ! grep -qE "^Python3_EXECUTABLE:[A-Z]+=$python\$" "$build/CMakeCache.txt"; then
  cmake -B "$build" -DPython3_EXECUTABLE="$python"   # the Python changed: reconfigure
fi
ninja -C "$build" -j "$jobs" "$@"

# A full build also installs the Python package into .venv (a wheel packed from this
# tree: only packing is done; the tests import that installed copy) and into vLLM's
# environment .venv-vllm when it exists (the vLLM plugin's tests run there) unless
# SWITCHYARD_INSTALL_VLLM=0.
if [ $# -eq 0 ] && [ "$python" = "$root/.venv/bin/python" ]; then
  rm -rf "$build/wheels"
  "$python" -m pip wheel --quiet --no-build-isolation --no-deps \
    --config-settings=build-dir="$build" -w "$build/wheels" "$root"
  "$python" -m pip install --quiet --no-deps --force-reinstall "$build"/wheels/switchyard_moe-*.whl
  if [ -x "$root/.venv-vllm/bin/python" ] && [ "${SWITCHYARD_INSTALL_VLLM:-1}" != 0 ]; then
    "$root/.venv-vllm/bin/python" -m pip install --quiet --no-deps --force-reinstall \
      "$build"/wheels/switchyard_moe-*.whl
  fi
fi
