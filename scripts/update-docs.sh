#!/usr/bin/env bash
# Regenerates docs/MoeDialect.md and docs/MoePasses.md from the TableGen descriptions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" switchyard-docs
cp "$build/docs/Moe/MoeDialect.md" "$build/docs/Moe/MoePasses.md" "$root/docs/"
echo "updated docs/MoeDialect.md docs/MoePasses.md"
