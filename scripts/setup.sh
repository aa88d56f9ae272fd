#!/usr/bin/env bash
# Installs everything Switchyard's build and tests need (Debian bookworm, run as root).
# Idempotent: when every package is already installed it returns in well under a second.
set -euo pipefail

PACKAGES=(
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  cmake ninja-build g++-12 zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev
  libopenblas-dev libgtest-dev nlohmann-json3-dev libzip-dev valgrind
  python3 python3-numpy python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: done"
