#!/usr/bin/python3
"""Holds every shipped GPU router to its kernel budgets, without a GPU.

The GPU kernels' time is set less by bandwidth than by what a call serialises: launches,
grid-wide steps, CTA barriers and chains of dependent memory operations one thread walks
(docs/gpu-kit.md, issue 35's analysis of the H200 run). Those are counted here, on the
generated CUDA C++ run on CPU threads (cuda_host.py: CudaOnHost.h counts each thread's
CTA barriers, warp barriers, shuffles and global / shared memory operations, and each
launch keeps the maximum over its threads), and statically from the launch metadata
(NAME.json kernels[].sync) and ptxas (registers, spills), per router at its native shape
and shipped geometry, at:

* T = 1 (the decode class),
* T_a = 4P and T_b = 32P tokens, P the large class's tokens per CTA (for a router of
  token loops only, the grid class: T_a = 32, T_b = 256, one token per warp), where a
  design whose per-thread work does not grow with the batch keeps the same counts
  (the whole-batch tail that one CTA walks grows 8x).

Every run's outputs must equal the host target's. Then two kinds of checks:

* the record (kernel_budgets.json): no router may do more per call than it did when the
  record was written (launches, grid-wide steps, CTA barriers, the longest per-thread
  run of global memory operations at T_a and T_b, workspace bytes per token, spills),
  so a regression fails here and not on the next GPU; a router that now does less is
  reported, and `--update` rewrites the record;
* the design's budgets (one launch at every T, at most 10 CTA barriers per call, the
  per-thread memory operations flat in T: at most 1.25x from T_a to T_b, 0 spills) are
  printed per router as met / not met; `--strict` fails on any not met.

    test_kernel_budgets.py --build BUILD_DIR [--update] [--strict] [--only a,b]
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_host import ROOT, compile_on_host, launch_on_host  # noqa: E402
from gpu_cases import CaseTally, differing_outputs, entry_info, example_inputs  # noqa: E402
from policy_shapes import GPU_ROUTERS, import_switchyard, native_shape  # noqa: E402

RECORD = os.path.join(HERE, "kernel_budgets.json")
# The design's budgets (issue 35): one launch per call, at most this many CTA barriers
# per call, per-thread memory operations growing at most this much from T_a to T_b
# (8x the batch).
DESIGN_CTA_BARRIERS = 10
DESIGN_FLAT = 1.25
# The CTAs an H200 holds at once (132 SMs, at least one CTA each): the cooperative
# class serves T_b in one launch there.
H200_RESIDENT_CTAS = 132
# The record's slack: counts that vary with the data (a loop that ends early) may move
# this much before a change counts as a regression.
SLACK = 1.02


def spills(report):
    """Spill stores + loads of the router's kernels in moe-compile --report's output
    (ptxas -v), or None when this machine has no ptxas."""
    found = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    return sum(int(a) + int(b) for a, b in found) if found else None


def measure(build, switchyard, workdir, tally, file, name):
    """One router's counts per call: {"T=..": {...}} plus the static ones."""
    out = os.path.join(workdir, name)
    lib, meta = compile_on_host(build, out, file, name, ["--report"])
    policy = os.path.join(ROOT, "policies", f"{file}.mlir")
    router = switchyard.compile(policy, entry=name, **native_shape(file))
    info = entry_info(switchyard, policy, name, **native_shape(file))
    kernels = {k["name"]: k for k in meta["kernels"]}
    per_cta = [k["tokens_per_cta"] for k in meta["kernels"] if k.get("tokens_per_cta")]
    grid_only = all(c["name"] == "grid" for c in meta["size_classes"])
    t_a, t_b = (32, 256) if grid_only or not per_cta else (4 * per_cta[0], 32 * per_cta[0])
    rng = np.random.default_rng(7)
    result = {"T_a": t_a, "T_b": t_b}
    for label, tokens in (("T=1", 1), ("T_a", t_a), ("T_b", t_b)):
        inputs = example_inputs(info, tokens, rng)
        if "request_ids" in inputs:
            inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
        expected = router(**inputs)
        outputs, size_class, grid, counters = launch_on_host(
            lib, meta, router, info, inputs, tokens, emulated_sms=-(-tokens // 8),
            resident=H200_RESIDENT_CTAS)
        tally.record(f"{name} T={tokens} ({size_class['name']}, {grid} CTAs)",
                     differing_outputs(expected, outputs))
        launches = [kernels[k] for k in size_class["launches"]]
        result[label] = {
            "size_class": size_class["name"],
            "launches": len(launches),
            "grid_steps": len(launches) - 1 + sum(k["sync"]["grid_steps"] for k in launches),
            "cta_barriers": sum(c["cta_barriers"] for c in counters),
            "warp_barriers": sum(c["warp_barriers"] for c in counters),
            "shuffles": sum(c["shuffles"] for c in counters),
            "global_ops": sum(c["global_ops"] for c in counters),
            "workspace_per_token": max(k["workspace_bytes"]["per_token"] for k in launches),
        }
    with open(os.path.join(out, "moe-compile.log")) as f:
        result["spills"] = spills(f.read())
    return result


def design_gates(m):
    """The design's budgets, each (name, met, what was measured)."""
    runs = [m[k] for k in ("T=1", "T_a", "T_b")]
    launches = max(r["launches"] for r in runs)
    barriers = max(r["cta_barriers"] for r in runs)
    growth = m["T_b"]["global_ops"] / max(m["T_a"]["global_ops"], 1)
    gates = [("1 launch", launches == 1, f"{launches}"),
             (f"<= {DESIGN_CTA_BARRIERS} CTA barriers", barriers <= DESIGN_CTA_BARRIERS,
              f"{barriers}"),
             (f"flat in T (<= {DESIGN_FLAT}x)", growth <= DESIGN_FLAT, f"{growth:.2f}x")]
    if m["spills"] is not None:
        gates.append(("0 spills", m["spills"] == 0, f"{m['spills']} B"))
    return gates


# What the record holds per router: (key, where it is measured).
RECORDED = [("launches", "T_b"), ("grid_steps", "T_b"), ("cta_barriers", "T=1"),
            ("cta_barriers", "T_b"), ("global_ops", "T=1"), ("global_ops", "T_a"),
            ("global_ops", "T_b"), ("workspace_per_token", "T_b")]


def flatten(m):
    values = {f"{key}@{at}": m[at][key] for key, at in RECORDED}
    if m["spills"] is not None:
        values["spills"] = m["spills"]
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    parser.add_argument("--update", action="store_true", help="rewrite the record")
    parser.add_argument("--strict", action="store_true",
                        help="fail on a design budget not met")
    parser.add_argument("--only", default="", help="comma-separated router names")
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)
    only = {n for n in args.only.split(",") if n}
    record = json.load(open(RECORD)) if os.path.exists(RECORD) else {}
    workdir = tempfile.mkdtemp(prefix="switchyard-budgets-")
    tally = CaseTally()
    measured = {}
    for file, name in GPU_ROUTERS:
        if only and name not in only:
            continue
        m = measure(args.build, switchyard, workdir, tally, file, name)
        measured[name] = flatten(m)
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in measured[name].items()))
        gates = design_gates(m)
        print("  design: " + "; ".join(f"{g} {'met' if ok else 'NOT met'} ({v})"
                                       for g, ok, v in gates))
        if args.strict and not all(ok for _, ok, _ in gates):
            tally.failed += 1
            print(f"FAIL {name}: a design budget is not met (--strict)")
        if args.update:
            continue
        held = record.get(name)
        if held is None:
            tally.failed += 1
            print(f"FAIL {name}: not in {os.path.basename(RECORD)} (run with --update)")
            continue
        for key, value in measured[name].items():
            if key not in held:
                continue
            if value > held[key] * SLACK and value > held[key] + 2:
                tally.failed += 1
                print(f"FAIL {name}: {key} {value}, the record holds {held[key]}")
            elif value < held[key]:
                print(f"  improved: {key} {held[key]} -> {value} (--update records it)")
    if args.update:
        record.update(measured)
        with open(RECORD, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {RECORD}")
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
