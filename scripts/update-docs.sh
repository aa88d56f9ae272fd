#!/usr/bin/env bash
# Regenerates docs/MoeDialect.md, docs/MoePasses.md, docs/MoeConversionPasses.md and
# docs/MoeHostPasses.md from the TableGen descriptions, then the numbers of the README and
# the book (scripts/update-numbers.py).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SWITCHYARD_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" switchyard-docs
for doc in MoeDialect MoePasses MoeConversionPasses MoeHostPasses; do
  cp "$build/docs/Moe/$doc.md" "$root/docs/"
done
echo "updated docs/MoeDialect.md docs/MoePasses.md docs/MoeConversionPasses.md docs/MoeHostPasses.md"
# Then every generated number of the README and docs/ (scripts/update-numbers.py: the
# benchmarks' JSONs, ctest -N, the demo, the tools' --help; ctest docs/numbers checks them).
python3 "$root/scripts/update-numbers.py"
