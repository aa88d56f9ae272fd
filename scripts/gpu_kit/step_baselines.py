#!/usr/bin/env python3
"""Kit step: the generated topk_softmax kernels beside two hand-written baselines of the
same nine outputs (KIT/baselines/topk_softmax_baselines.cu, bench/gpu_baselines in the
repository: `best`, two launches with the row in registers and stable per-CTA ranks;
`prod3`, the three-launch structure of vLLM's topk_softmax + moe_align_block_size),
built here with nvcc for this GPU.

Per case of the kit's topk_softmax build (its inputs and host outputs): each baseline's
outputs against the host's (test/gpu/gpu_cases.baseline_differences: exact, prod3's
segments as sets), then the time per call of ours and of each baseline as a one-call
CUDA-graph replay, with step_bench's method (median of CUDA-event-timed calls behind a
spin kernel). A baseline that is wrong is reported and not timed.

    step_baselines.py --kit KIT --json FILE
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CaseInputs, DeviceCall, load_kit, load_launcher  # noqa: E402
from cudart import Cudart, cuda_home  # noqa: E402
from gpu_cases import baseline_differences  # noqa: E402
from kit_common import BASELINE_TOKENS, BASELINE_VARIANT, save, step_arguments  # noqa: E402
from step_bench import own_stream, timed  # noqa: E402

BASELINES = ("best", "prod3")


def build(kit):
    """The baselines as a shared library for this GPU (nvcc -arch=native)."""
    out = os.path.join(tempfile.mkdtemp(prefix="kit-baselines-"), "libbaselines.so")
    nvcc = os.path.join(cuda_home(), "bin", "nvcc")
    subprocess.run([nvcc, "-O3", "-arch=native", "-shared", "-Xcompiler", "-fPIC",
                    f"-I{os.path.join(kit, 'launcher', 'include')}",
                    os.path.join(kit, "baselines", "topk_softmax_baselines.cu"), "-o", out],
                   check=True)
    lib = ctypes.CDLL(out)
    lib.sy_baseline_workspace_bytes.restype = ctypes.c_int64
    return lib


class BaselineCall:
    """A baseline's call on a DeviceCall's inputs, into outputs of its own."""

    def __init__(self, cuda, lib, name, device_call):
        self.cuda, self.device = cuda, device_call
        self.fn = getattr(lib, f"sy_baseline_{name}")
        tokens = device_call.tokens.value
        self.workspace = cuda.malloc(max(1, lib.sy_baseline_workspace_bytes(tokens)))
        outs = device_call.outputs
        self.args = [device_call.tokens, device_call.inputs[0],
                     outs["topk_ids"][0], outs["topk_weights"][0], outs["selected"][0],
                     outs["expert_counts"][0], outs["active_experts"][0],
                     outs["num_active"][0], outs["sorted_token_ids"][0],
                     ctypes.c_int64(outs["sorted_token_ids"][1].size),
                     outs["expert_ids"][0], ctypes.c_int64(outs["expert_ids"][1].size),
                     outs["num_tokens_post_padded"][0], self.workspace]

    def launch(self, stream):
        self.fn(*self.args, stream)

    def free(self):
        self.cuda.free(self.workspace)


def graph_us(cuda, handle, launch):
    graph = cuda.capture(handle, launch)
    exe = cuda.instantiate(graph)
    us = timed(lambda: cuda.graph_launch(exe, handle))
    cuda.destroy_graph(graph, exe)
    return us


def main():
    args = step_arguments(__doc__).parse_args()
    kit = load_kit(args.kit)
    cuda = Cudart()
    handle = own_stream()
    lib = build(args.kit)
    router = next(r for r in kit["routers"] if r["variant"] == BASELINE_VARIANT)
    launcher = load_launcher(args.kit, router)
    results = {"rows": [], "passed": 0, "failed": 0}
    print(f"{'T':>5} {'ours':>8} " + " ".join(f"{b:>8}" for b in BASELINES)
          + "   (µs, one-call graph replay)", flush=True)
    for case in router["cases"]:
        tokens = case["tokens"]
        if tokens not in BASELINE_TOKENS:
            continue
        row = {"tokens": tokens}
        ours = None
        try:
            inputs = CaseInputs(args.kit, router, case)
            ours = DeviceCall(cuda, launcher, router, inputs)
            row["ours_graph_us"] = graph_us(cuda, handle, lambda: ours.launch(handle))
            for name in BASELINES:
                mine = DeviceCall(cuda, launcher, router, inputs)   # fresh outputs
                call = BaselineCall(cuda, lib, name, mine)
                try:
                    mine.clear_outputs()
                    call.launch(handle)
                    torch.cuda.synchronize()
                    bad = baseline_differences(name, inputs.expected, mine.results())
                    if bad:
                        results["failed"] += 1
                        row[name] = {"error": "; ".join(f"{k}: {m}" for k, m in bad)}
                        continue
                    results["passed"] += 1
                    row[name] = {"graph_us": graph_us(cuda, handle,
                                                      lambda: call.launch(handle))}
                finally:
                    call.free()
                    mine.free()
        except Exception as e:   # noqa: BLE001 - the row says what failed
            row["error"] = f"{type(e).__name__}: {e}"
            results["failed"] += 1
        finally:
            if ours:
                ours.free()
        results["rows"].append(row)
        cells = [f"{row.get(b, {}).get('graph_us', float('nan')):8.2f}" for b in BASELINES]
        print(f"{tokens:>5} {row.get('ours_graph_us', float('nan')):8.2f} " + " ".join(cells)
              + ("  " + row["error"] if "error" in row else ""), flush=True)
        save(args.json, results)
    save(args.json, results)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
