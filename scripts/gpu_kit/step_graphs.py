#!/usr/bin/env python3
"""Kit step 3: CUDA graphs. For every native router at one T of each size class: one
launch captured into a graph, replayed three times (outputs cleared before each) against
the host target; for routers with knobs (captured with the defaults' struct in device
memory), other knob values written into that memory before the next replay must give
that setting's host outputs, and the defaults written back the defaults' again: the
kernels read the knobs when they run, nothing in the graph changes.

    step_graphs.py --kit KIT --json FILE
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CaseInputs, DeviceCall, compare, load_kit, load_launcher  # noqa: E402
from cudart import Cudart  # noqa: E402
from kit_common import GRAPH_TOKENS, finish, save, step_arguments  # noqa: E402


def replay(cuda, call, exe, stream, expected):
    call.clear_outputs()
    cuda.graph_launch(exe, stream)
    cuda.stream_sync(stream)
    return compare(expected, call.results())[0]


def check_case(cuda, kit, router, case, stream):
    inputs = CaseInputs(kit, router, case)
    knobs = case.get("knobs")
    call = DeviceCall(cuda, load_launcher(kit, router), router, inputs,
                      knobs["default_struct_hex"] if knobs else None)
    problems = []
    try:
        graph = cuda.capture(stream, lambda: call.launch(stream))
        exe = cuda.instantiate(graph)
        for i in range(3):
            bad = replay(cuda, call, exe, stream, inputs.expected)
            if bad:
                problems.append(f"replay {i + 1}: {', '.join(bad)} differ")
        if knobs:
            alt_expected = dict(np.load(os.path.join(kit, knobs["expected"])))
            call.set_knobs(knobs["struct_hex"])
            bad = replay(cuda, call, exe, stream, alt_expected)
            if bad:
                problems.append(f"knobs {knobs['values']} written before a replay: "
                                f"{', '.join(bad)} differ")
            call.set_knobs(knobs["default_struct_hex"])   # and back to the defaults
            bad = replay(cuda, call, exe, stream, inputs.expected)
            if bad:
                problems.append(f"defaults written back: {', '.join(bad)} differ")
        cuda.destroy_graph(graph, exe)
    finally:
        call.free()
    return problems


def main():
    args = step_arguments().parse_args()
    kit = load_kit(args.kit)
    cuda = Cudart()
    stream = cuda.stream()
    results = {"cases": [], "passed": 0, "failed": 0}
    for router in kit["routers"]:
        if router["flags"] or router["variant"] != router["entry"]:
            continue   # native builds only
        for case in router["cases"]:
            if case["tokens"] not in GRAPH_TOKENS:
                continue
            label = f"{router['variant']} T={case['tokens']}"
            try:
                problems = check_case(cuda, args.kit, router, case, stream)
            except Exception as e:
                problems = [f"{type(e).__name__}: {e}"]
            ok = not problems
            results["passed" if ok else "failed"] += 1
            results["cases"].append({"variant": router["variant"], "tokens": case["tokens"],
                                     "knobs": (case.get("knobs") or {}).get("values"),
                                     "ok": ok, "problems": problems})
            print(f"{'ok  ' if ok else 'FAIL'} graph {label}"
                  + (f" (knobs {case['knobs']['values']} written between replays)"
                     if case.get("knobs") else "")
                  + ("" if ok else ": " + "; ".join(problems)), flush=True)
            save(args.json, results)
    return finish(args.json, results)


if __name__ == "__main__":
    sys.exit(main())
