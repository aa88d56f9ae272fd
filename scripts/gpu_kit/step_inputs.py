#!/usr/bin/env python3
"""Kit check that needs no GPU: every case's inputs regenerate from the packed recipe
to the packed SHA-256, its expected outputs load, and the comparison flags a corrupted
result (so that the GPU steps' comparisons can fail).

    step_inputs.py --kit KIT --json FILE
"""
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CaseInputs, compare, load_kit  # noqa: E402
from kit_common import save, step_arguments  # noqa: E402


def main():
    args = step_arguments().parse_args()
    kit = load_kit(args.kit)
    passed, failures = 0, []
    for router in kit["routers"]:
        for case in router["cases"]:
            label = f"{router['variant']} T={case['tokens']}"
            try:
                inputs = CaseInputs(args.kit, router, case)
                same, _ = compare(inputs.expected, inputs.expected)
                broken = {k: v.copy() for k, v in inputs.expected.items()}
                key = next(k for k, v in broken.items() if v.size)
                broken[key].flat[0] += 1
                caught, _ = compare(inputs.expected, broken)
                if same or not caught:
                    raise AssertionError(f"the comparison is blind (same: {same}, "
                                         f"corrupted {key}: {caught})")
                passed += 1
            except Exception as e:
                failures.append(f"{label}: {e}")
                print(f"FAIL {label}: {e}", flush=True)
    print(f"inputs of {passed} cases regenerated and checked, {len(failures)} failed")
    save(args.json, {"passed": passed, "failed": len(failures), "failures": failures})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
