#!/usr/bin/env python3
"""Kit step 1 (also what compute-sanitizer runs in step 2): every packed router at every
case's T on the GPU against the host target's outputs (ids exact, weights within 1e-5),
on a workspace that starts as garbage; and the launches of each size class counted in a
captured CUDA graph (kernel nodes) against the launch metadata's design. Writes its
results to --json after every case (a time-out keeps what finished).

    step_routers.py --kit KIT --json FILE [--tokens 64,4096] [--variants a,b] [--no-count]
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import (CaseInputs, DeviceCall, compare, launch_metadata, load_kit,  # noqa: E402
                   load_launcher, size_class, size_classes)
from cudart import Cudart  # noqa: E402
from kit_common import finish, save, step_arguments  # noqa: E402


def count_launches(cuda, call, stream):
    graph = cuda.capture(stream, lambda: call.launch(stream))
    try:
        return len(cuda.kernel_nodes(graph)), len(cuda.graph_nodes(graph))
    finally:
        cuda.destroy_graph(graph)


def main():
    ap = step_arguments()
    ap.add_argument("--tokens", default="")
    ap.add_argument("--variants", default="")
    ap.add_argument("--no-count", action="store_true")
    args = ap.parse_args()
    kit = load_kit(args.kit)
    only_t = {int(t) for t in args.tokens.split(",") if t}
    only_v = {v for v in args.variants.split(",") if v}
    cuda = Cudart()
    stream = cuda.stream()
    results = {"cases": [], "passed": 0, "failed": 0}

    for router in kit["routers"]:
        if only_v and router["variant"] not in only_v:
            continue
        lib = load_launcher(args.kit, router)
        meta = launch_metadata(args.kit, router)
        for case in router["cases"]:
            if only_t and case["tokens"] not in only_t:
                continue
            label = f"{router['variant']} T={case['tokens']}"
            row = {"variant": router["variant"], "tokens": case["tokens"]}
            call = None
            try:
                inputs = CaseInputs(args.kit, router, case)
                call = DeviceCall(cuda, lib, router, inputs)
                call.clear_outputs()
                start = time.perf_counter()
                call.launch()
                cuda.synchronize()
                row["first_call_ms"] = (time.perf_counter() - start) * 1e3
                bad, worst = compare(inputs.expected, call.results())
                row["max_weight_diff"] = worst
                row["differ"] = bad
                ok = not bad
                if not args.no_count:
                    kernels, nodes = count_launches(cuda, call, stream)
                    # The cooperative class, or the pair when the GPU cannot hold
                    # the cooperative grid: the one whose launches were captured.
                    taking = size_classes(meta, case["tokens"])
                    designed = next((c for c in taking if len(c["launches"]) == kernels),
                                    size_class(meta, case["tokens"]))
                    row["launches"] = kernels
                    row["designed_launches"] = len(designed["launches"])
                    row["size_class"] = designed["name"]
                    if kernels != len(designed["launches"]) or nodes != kernels:
                        ok = False
                        bad.append(f"{kernels} kernel launches ({nodes} graph nodes), "
                                   f"designed {len(designed['launches'])}")
            except Exception as e:   # a launch error, a mismatch of inputs: this case fails
                ok, bad = False, [f"{type(e).__name__}: {e}"]
                row["error"] = str(e)
            finally:
                if call:
                    call.free()
            row["ok"] = ok
            results["passed" if ok else "failed"] += 1
            results["cases"].append(row)
            print(f"{'ok  ' if ok else 'FAIL'} {label}"
                  + ("" if ok else ": " + "; ".join(bad)), flush=True)
            save(args.json, results)
    return finish(args.json, results)


if __name__ == "__main__":
    sys.exit(main())
