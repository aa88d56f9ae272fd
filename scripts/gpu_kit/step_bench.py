#!/usr/bin/env python3
"""Kit step 6: time per call of every packed router at T in BENCH_TOKENS next to the
same routing in PyTorch on the GPU and the floor.

Every time is the median of 200 calls after 20 warm-up calls, each call between two CUDA
events, all enqueued behind a spin kernel so that the GPU never waits for the host: the
events measure the GPU's time for the call (launch gaps included), not Python's. Ours is
timed as a direct launch and as the replay of a one-call CUDA graph; PyTorch eagerly and
as a CUDA-graph replay. The floor is one empty kernel plus the call's bytes (inputs and
results) over the HBM bandwidth measured by a 1 GiB device copy. The cost model's
prediction (launch metadata `launch_model.modeled`, interpolated) is printed beside.

    step_bench.py --kit KIT --json FILE
"""
import ctypes
import os
import statistics
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CaseInputs, DeviceCall, launch_metadata, load_kit, load_launcher  # noqa: E402
from cudart import Cudart  # noqa: E402
from kit_common import BENCH_TOKENS, save, step_arguments  # noqa: E402
from torch_routers import baselines  # noqa: E402

CALLS, WARMUP = 200, 20
SPIN_CYCLES_PER_CALL = 300_000   # ~150 us at 2 GHz: more than one host enqueue


def timed(enqueue, calls=CALLS):
    """Median µs of `calls` calls of enqueue() on the current torch stream."""
    for _ in range(WARMUP):
        enqueue()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    torch.cuda._sleep(SPIN_CYCLES_PER_CALL * calls)
    for a, b in zip(starts, stops):
        a.record()
        enqueue()
        b.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(a.elapsed_time(b) for a, b in zip(starts, stops))


def own_stream():
    """Makes a stream of our own torch's current one (the legacy default stream cannot
    be captured into a graph); returns its handle for the launchers."""
    torch.cuda.init()
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    return ctypes.c_void_p(stream.cuda_stream)


def torch_graph(fn):
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def hbm_bandwidth():
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = timed(lambda: dst.copy_(src), calls=20)
    return 2 * src.numel() / (us * 1e-6)   # bytes read + written per second


def modeled_us(meta, tokens):
    pts = meta.get("launch_model", {}).get("modeled") or []
    if not pts:
        return None
    xs = [p["tokens"] for p in pts]
    return float(np.interp(np.log(tokens), np.log(xs), [p["us"] for p in pts]))


def main():
    args = step_arguments().parse_args()
    kit = load_kit(args.kit)
    cuda = Cudart()
    handle = own_stream()
    bw = hbm_bandwidth()
    empty = timed(lambda: torch.cuda._sleep(0))
    results = {"hbm_bytes_per_s": bw, "empty_kernel_us": empty, "rows": []}
    print(f"HBM {bw / 1e12:.2f} TB/s (1 GiB device copy), empty kernel {empty:.2f} us",
          flush=True)
    print(f"{'router':22} {'T':>5} {'ours':>8} {'graph':>8} {'model':>7} {'floor':>7}  "
          "baseline (eager / graph) -> ours/graph vs baseline graph", flush=True)
    for router in kit["routers"]:
        lib = load_launcher(args.kit, router)
        meta = launch_metadata(args.kit, router)
        for case in router["cases"]:
            tokens = case["tokens"]
            if tokens not in BENCH_TOKENS:
                continue
            row = {"variant": router["variant"], "tokens": tokens}
            call = None
            try:
                inputs = CaseInputs(args.kit, router, case)
                call = DeviceCall(cuda, lib, router, inputs)
                row["ours_us"] = timed(lambda: call.launch(handle))
                graph = cuda.capture(handle, lambda: call.launch(handle))
                exe = cuda.instantiate(graph)
                row["ours_graph_us"] = timed(lambda: cuda.graph_launch(exe, handle))
                cuda.destroy_graph(graph, exe)
                nbytes = sum(a.nbytes for a in inputs.arrays) + \
                    sum(v.nbytes for v in inputs.outputs.values())
                row["bytes"] = nbytes
                row["floor_us"] = empty + 1e6 * nbytes / bw
                row["modeled_us"] = modeled_us(meta, tokens)
                named = {p["name"]: a for p, a in zip(
                    [p for p in router["arguments"] if p["kind"] != "scalar"], inputs.arrays)}
                tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda()
                           for k, v in named.items()}
                row["baselines"] = {}
                for name, fn in baselines(router, tensors):
                    g = torch_graph(fn)
                    row["baselines"][name] = {"eager_us": timed(fn),
                                              "graph_us": timed(g.replay)}
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"
            finally:
                if call:
                    call.free()
            results["rows"].append(row)
            base = next(iter(row.get("baselines", {}).items()), None)
            text = (f"{router['variant']:22} {tokens:>5} {row.get('ours_us', float('nan')):8.2f} "
                    f"{row.get('ours_graph_us', float('nan')):8.2f} "
                    f"{row.get('modeled_us') or float('nan'):7.2f} "
                    f"{row.get('floor_us', float('nan')):7.2f}")
            if base:
                text += (f"  {base[0]}: {base[1]['eager_us']:.2f} / {base[1]['graph_us']:.2f}"
                         f" -> {row['ours_graph_us'] / base[1]['graph_us']:.2f}x")
            if "error" in row:
                text += "  ERROR " + row["error"]
            print(text, flush=True)
            save(args.json, results)
    save(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
