#!/usr/bin/env bash
# The GPU kit: everything GPU-side checked and measured by one command on a GPU machine
# that has CUDA, PyTorch and a C++ compiler but no LLVM/MLIR (see docs/gpu-kit.md).
#
#   scripts/gpu-kit.sh pack [KIT]               here: compile the routers, inputs, host
#                                               outputs into KIT (default build/gpu-kit)
#   scripts/gpu-kit.sh run [--dry] [--kit KIT] [--budget S] [--only a,b] OUTDIR
#                                               there: build, check, measure; writes
#                                               OUTDIR/gpu-results.json and gpu-kit.log
#                                               (--dry: here, GPU steps say skipped)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kit_scripts="$root/scripts/gpu_kit"
usage() { sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
verb="$1"; shift
case "$verb" in
  pack)
    python="${SWITCHYARD_PYTHON:-$root/.venv/bin/python}"
    [ -x "$python" ] || python=python3
    exec "$python" "$kit_scripts/pack.py" "${1:-$root/build/gpu-kit}"
    ;;
  run)
    # The machine's Python (the one with PyTorch on a GPU image); here .venv's.
    python="${SWITCHYARD_PYTHON:-python3}"
    kit="$root/build/gpu-kit"
    args=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --kit) kit="$2"; shift 2 ;;
        --dry) args+=(--dry); shift ;;
        --budget|--only) args+=("$1" "$2"); shift 2 ;;
        -h|--help) usage ;;
        -*) echo "gpu-kit.sh run: unknown option '$1'" >&2; usage ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || { echo "gpu-kit.sh run: give one OUTDIR" >&2; usage; }
    [ -f "$kit/kit.json" ] || { echo "gpu-kit.sh run: no kit at $kit (scripts/gpu-kit.sh pack)" >&2; exit 2; }
    exec "$python" "$kit_scripts/run.py" --kit "$kit" "${args[@]}" "$1"
    ;;
  -h|--help) usage ;;
  *) echo "gpu-kit.sh: unknown command '$verb' (pack or run)" >&2; usage ;;
esac
