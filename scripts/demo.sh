#!/usr/bin/env bash
# The main demo: installs what is missing, builds, then verifies every shipped policy
# with moe-opt and prints it (its header comment, then the verified IR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"

bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" moe-opt

status=0
for policy in "$root"/policies/*.mlir; do
  name="$(basename "$policy")"
  echo "================================================================================"
  echo "policy: policies/$name"
  echo "--------------------------------------------------------------------------------"
  sed -n '/^\/\//p;/^[^/]/q' "$policy"
  echo "--------------------------------------------------------------------------------"
  if "$build/bin/moe-opt" "$policy"; then
    echo "verified: policies/$name"
  else
    echo "FAILED: policies/$name" >&2
    status=1
  fi
done
exit $status
