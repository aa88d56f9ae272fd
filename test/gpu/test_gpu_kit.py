#!/usr/bin/python3
"""ctest gpu/kit: packs the GPU kit from this build (every shipped router, its inputs'
recipes and the host target's outputs), checks it fits the GPU machine's transfer budget
(at most 60 MiB), and runs it dry: the launchers build against cudart, every case's
inputs regenerate to the packed hashes, the comparisons can fail, and every GPU step
reports `skipped: no GPU` (on a machine with a GPU this test still runs it dry; the real
run is scripts/gpu-kit.sh run).

    test_gpu_kit.py --build BUILD_DIR
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KIT = os.path.join(ROOT, "scripts", "gpu_kit")
MAX_MIB = 60


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="switchyard-kit-")
    kit, out = os.path.join(work, "kit"), os.path.join(work, "out")
    subprocess.run([sys.executable, os.path.join(KIT, "pack.py"), kit, "--build", args.build,
                    "--max-mib", str(MAX_MIB)], check=True)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(kit) for n in ns)
    failures = []
    if size > MAX_MIB * 2**20:
        failures.append(f"the kit is {size / 2**20:.1f} MiB, over {MAX_MIB} MiB")
    run = subprocess.run([sys.executable, os.path.join(KIT, "run.py"), "--kit", kit, "--dry",
                          out])
    with open(os.path.join(out, "gpu-results.json")) as f:
        results = json.load(f)
    steps = results["steps"]
    for name in ("build", "exec-plumbing", "inputs", "torch-op-plumbing"):
        if steps.get(name, {}).get("status") != "passed":
            failures.append(f"step {name}: {steps.get(name)}")
    for name in ("routers", "memcheck", "racecheck", "graphs", "torch-op", "executor",
                 "profile", "bench", "fit"):
        if steps.get(name, {}).get("status") != "skipped":
            failures.append(f"GPU step {name} in a dry run: {steps.get(name)}")
    if run.returncode != 0:
        failures.append(f"run.py --dry exited {run.returncode}")
    inputs = steps.get("inputs", {}).get("results", {})
    packed = json.load(open(os.path.join(kit, "kit.json")))
    cases = sum(len(r["cases"]) for r in packed["routers"])
    if inputs.get("passed") != cases:
        failures.append(f"{inputs.get('passed')} of {cases} cases' inputs checked")
    for f in failures:
        print("FAIL", f)
    print(f"kit {size / 2**20:.1f} MiB, {len(packed['routers'])} router builds, {cases} cases; "
          f"dry run {'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
