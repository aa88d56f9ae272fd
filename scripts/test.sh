#!/usr/bin/env bash
# The one test command: installs what is missing, builds, and runs every test (ctest:
# the lit/FileCheck suite, and later the execution and runtime tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"

bash "$root/scripts/setup.sh"
start=$(date +%s)
bash "$root/scripts/build.sh"
echo "build: $(( $(date +%s) - start )) s"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
