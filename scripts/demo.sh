#!/usr/bin/env bash
# The main demo: installs what is missing, builds, verifies every shipped policy with
# moe-opt, then compiles each one for the host and runs it on a generated decode trace,
# printing the experts each batch activates vs plain top-k and the gating mass kept,
# the rules, and the GPU launch plan of XShare; finally runs decode batches through the
# MoE executor on a Qwen3-MoE-shaped checkpoint (1.2 GB, made once) with top-k, LYNX,
# XShare and XShare-spec side by side: experts touched, bytes read, measured time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"

bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" moe-opt moe-run moe-compile moe-exec switchyard-python

for policy in "$root"/policies/*.mlir; do
  # Generic policies verify as written, and bound to the model their header names.
  "$build/bin/moe-opt" "$policy" > /dev/null
  # shellcheck disable=SC2046 # the flags are words
  "$build/bin/moe-opt" "$policy" $(/usr/bin/python3 "$root/scripts/native_shape.py" "$policy") > /dev/null
  echo "verified: policies/$(basename "$policy")"
done
echo
SWITCHYARD_BUILD_DIR="$build" /usr/bin/python3 "$root/scripts/demo.py" "$@"
echo
echo "== The MoE executor: one Qwen3-MoE-shaped layer, decode batches, policies side by side"
/usr/bin/python3 "$root/bench/bench_exec.py" --build "$build" --tokens 1,4,16,64 \
    --prefill 0 --repeat 3
