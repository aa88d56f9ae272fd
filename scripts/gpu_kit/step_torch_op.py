#!/usr/bin/env python3
"""Kit step 4: the routing op in the image's torch, with no Switchyard package: the op
library (libswitchyard_ops.so from exec.tar.xz, PyTorch's stable ABI) loads precompiled
engine builds (switchyard::load_step_router: a host artifact and a GPU launcher each)
and routes CUDA tensors through switchyard::route_step:

  * eager, and under torch.compile(fullgraph=True): = the host target's outputs;
  * captured in a CUDA graph: replays = the host; another knob setting written into the
    router's device knob struct (switchyard::knob_struct) before a replay = the host with
    those knobs, the defaults written back = the defaults; LYNX's device phase set to
    prefill before a replay = the host in prefill;
  * time per call, eager and graph replay, beside torch's softmax + topk on the same
    logits.

With --plumbing (no GPU needed, also --dry): the library loads and a host-only router
(load_step_router without a CUDA directory) routes CPU tensors = the host outputs.

    step_torch_op.py --kit KIT [--plumbing] --json FILE
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kit_common import finish, step_arguments  # noqa: E402
from step_exec import unpack  # noqa: E402


def reexec_with_libraries(kit):
    """The op library links the runtime of the bundle (exec.tar.xz's lib/): run again
    with it on LD_LIBRARY_PATH (the loader reads it at process start)."""
    if os.environ.get("SWITCHYARD_KIT_TORCH_OP"):
        return os.environ["SWITCHYARD_KIT_TORCH_OP"]
    exe, env, _ = unpack(kit)
    env["SWITCHYARD_KIT_TORCH_OP"] = exe
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def compare(label, want_ids, want_weights, weights, ids, problems):
    import numpy as np
    ids, weights = ids.cpu().numpy(), weights.cpu().numpy()
    if not np.array_equal(ids, want_ids):
        problems.append(f"{label}: {int((ids != want_ids).sum())} ids differ")
    elif not np.allclose(weights, want_weights, atol=1e-5, rtol=0):
        problems.append(f"{label}: weights differ by {float(abs(weights - want_weights).max()):g}")


def per_call_us(fn, calls=200):
    import torch
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


#: handle -> k, for the fake kernel (torch.compile traces the op with it).
TOP_K = {}


def register_fake():
    """route_step's fake kernel, which the switchyard package registers in Python (it
    needs symbolic token counts): here, with k per handle."""
    import torch

    @torch.library.register_fake("switchyard::route_step")
    def _fake(logits, layer_inputs, handle, layer=-1):
        k = TOP_K[handle]
        return (logits.new_empty((logits.shape[0], k), dtype=torch.float32),
                logits.new_empty((logits.shape[0], k), dtype=torch.int32))


def check_case(ops, exe, case, data, gpu):
    import torch
    compiled = os.path.join(exe, "compiled")
    device = torch.device("cuda" if gpu else "cpu")
    knobs = torch.zeros(max(case["knob_bytes"], 1), dtype=torch.uint8, device=device) \
        if gpu and case["knob_bytes"] else None
    phase = torch.ones(1, dtype=torch.int32, device=device) if gpu and case.get("phase") \
        else None
    handle = ops.load_step_router(os.path.join(compiled, case["host"]), case["router"],
                                  os.path.join(compiled, case["cuda"]) if gpu else "",
                                  case["router"], [], case["experts"], [],
                                  f"@{case['router']}", knobs, phase)
    TOP_K[handle] = int(data["ids"].shape[1])
    if knobs is not None:
        knobs.copy_(ops.knob_struct(handle, []))
    problems, row = [], {"router": case["router"], "tokens": case["tokens"]}
    logits = torch.from_numpy(data["logits"]).to(device)
    if not gpu:   # plumbing: the host kernel
        if case.get("phase"):   # the host path reads the phase from the package's state
            row["skipped"] = "the host path takes the phase from the package's step state"
            return row, []
        weights, ids = ops.route_step(logits, [], handle)
        compare("host", data["ids"], data["weights"], weights, ids, problems)
        return row, problems
    ops.set_device_step(None, None, None, phase is not None, False)
    route = lambda x: ops.route_step(x, [], handle)   # noqa: E731
    weights, ids = route(logits)
    compare("eager", data["ids"], data["weights"], weights, ids, problems)
    weights, ids = torch.compile(route, fullgraph=True)(logits)
    compare("torch.compile", data["ids"], data["weights"], weights, ids, problems)
    static = logits.clone()
    graph = torch.cuda.CUDAGraph()
    route(static)   # warm (the PTX loads on the first launch)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        g_weights, g_ids = route(static)
    graph.replay()
    compare("graph replay", data["ids"], data["weights"], g_weights, g_ids, problems)
    if knobs is not None and case.get("knobs"):
        knobs.copy_(ops.knob_struct(handle, case["knobs"]))
        graph.replay()
        compare(f"graph replay, knobs {case['knobs']} written", data["alt_ids"],
                data["alt_weights"], g_weights, g_ids, problems)
        knobs.copy_(ops.knob_struct(handle, []))
        graph.replay()
        compare("graph replay, defaults written back", data["ids"], data["weights"],
                g_weights, g_ids, problems)
    if phase is not None:
        phase.fill_(0)
        graph.replay()
        compare("graph replay, phase prefill written", data["prefill_ids"],
                data["prefill_weights"], g_weights, g_ids, problems)
        phase.fill_(1)
    row["eager_us"] = round(per_call_us(lambda: route(logits)), 2)
    row["graph_us"] = round(per_call_us(graph.replay), 2)
    k = data["ids"].shape[1]
    torch_route = lambda: torch.topk(torch.softmax(logits, -1), k, dim=-1)   # noqa: E731
    row["torch_softmax_topk_us"] = round(per_call_us(torch_route), 2)
    return row, problems


def main():
    ap = step_arguments()
    ap.add_argument("--plumbing", action="store_true",
                    help="no GPU: the library loads, host-only routers route CPU tensors")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.kit, "exec.tar.xz")):
        print("skipped: the kit was packed without exec.tar.xz (pack.py --no-exec)")
        return 0
    exe = reexec_with_libraries(args.kit)
    cases_file = os.path.join(exe, "torch_op", "cases.json")
    if not os.path.exists(cases_file):
        print("skipped: the kit was packed without the routing op library (no torch here)")
        return 0
    import numpy as np
    import torch
    results = {"torch": torch.__version__, "cases": [], "passed": 0, "failed": 0}
    try:
        torch.ops.load_library(os.path.join(exe, "lib", "libswitchyard_ops.so"))
    except (OSError, RuntimeError) as error:
        results["error"] = f"the op library does not load into torch {torch.__version__}: {error}"
        results["failed"] = 1
        print(results["error"])
        return finish(args.json, results)
    ops = torch.ops.switchyard
    if not args.plumbing:
        register_fake()
    with open(cases_file) as f:
        cases = json.load(f)
    for case in cases:
        data = dict(np.load(os.path.join(exe, "torch_op", case["file"])))
        try:
            row, problems = check_case(ops, exe, case, data, gpu=not args.plumbing)
        except Exception as error:   # noqa: BLE001 - reported per case
            row, problems = {"router": case["router"], "tokens": case["tokens"]}, \
                [f"{type(error).__name__}: {error}"]
        row.update(ok=not problems, problems=problems)
        results["cases"].append(row)
        if row.get("skipped"):
            print(f"skip {case['router']} T={case['tokens']}: {row['skipped']}")
            continue
        results["passed" if not problems else "failed"] += 1
        print(f"{'ok  ' if not problems else 'FAIL'} {case['router']} T={case['tokens']}"
              + "".join(f" {k}={v}" for k, v in row.items() if k.endswith("_us"))
              + ("" if not problems else ": " + "; ".join(problems)), flush=True)
    return finish(args.json, results)


if __name__ == "__main__":
    sys.exit(main())
