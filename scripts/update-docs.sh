#!/usr/bin/env bash
# Regenerates docs/MoeDialect.md, docs/MoePasses.md, docs/MoeConversionPasses.md and
# docs/MoeHostPasses.md from the TableGen descriptions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" switchyard-docs
for doc in MoeDialect MoePasses MoeConversionPasses MoeHostPasses; do
  cp "$build/docs/Moe/$doc.md" "$root/docs/"
done
echo "updated docs/MoeDialect.md docs/MoePasses.md docs/MoeConversionPasses.md docs/MoeHostPasses.md"
