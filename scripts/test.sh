#!/usr/bin/env bash
# The one test command: installs what is missing, builds, and runs every test (ctest:
# the lit/FileCheck suite, and later the execution and runtime tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"

SWITCHYARD_SKIP_VLLM=1 bash "$root/scripts/setup.sh"   # what the build needs
# vLLM's environment (mostly downloads) installs while the build compiles; the build
# leaves it alone (SWITCHYARD_INSTALL_VLLM=0) and the package goes in after. Its
# Python exists before the build configures (test/CMakeLists.txt runs vllm/engine
# with it when it exists).
vllm=0
if [ "${SWITCHYARD_SKIP_VLLM:-0}" != 1 ]; then
  vllm=1
  [ -x "$root/.venv-vllm/bin/python" ] || /usr/bin/python3 -m venv "$root/.venv-vllm"
  mkdir -p "$build"
  vllm_log="$build/setup-vllm.log"
  bash "$root/scripts/setup.sh" --vllm-only > "$vllm_log" 2>&1 &
  vllm_setup=$!
  trap 'kill "$vllm_setup" 2>/dev/null || true' EXIT   # a failed build stops it too
fi
start=$(date +%s)
SWITCHYARD_INSTALL_VLLM=0 bash "$root/scripts/build.sh"
echo "build: $(( $(date +%s) - start )) s"
# The self-contained wheel (what a user installs), made from this build: the ctest
# package/wheel installs it into a fresh environment, and vLLM's tests run it.
bash "$root/scripts/wheel.sh" --no-build --out "$build/dist"
if [ "$vllm" = 1 ]; then
  if ! wait "$vllm_setup"; then
    cat "$vllm_log" >&2
    exit 1
  fi
  cat "$vllm_log"
  "$root/.venv-vllm/bin/python" -m pip install --quiet --no-deps --force-reinstall \
    "$build"/dist/switchyard_moe-*.whl
fi
cd "$build"
# ctest's own lines, kept to list the slowest tests after its summary (the CI time is
# watched: a test that grows shows here first).
status=0
ctest --output-on-failure -j "$(nproc)" 2>&1 | tee ctest-output.log || status=$?
echo "the ten slowest tests (seconds):"
# (sed -n 1,10p reads all of sort's output: head would exit early and sort, killed by
# SIGPIPE, would fail the pipeline under pipefail.)
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' ctest-output.log |
  sort -rn | sed -n 1,10p
exit "$status"
