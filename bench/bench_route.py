#!/usr/bin/python3
"""Routing throughput benchmark (not a test): every shipped router policy, compiled for
the host by moe-compile and called through the switchyard package (a Router on NumPy
arrays: input checks, result allocation, the C entry point), side by side in the same
run with the test suite's numpy reference of the same policy (test/exec/reference.py).
Prints tokens/s for both and their ratio, for E in {8, 128, 256} and T in {16, 256,
4096}.

THE REFERENCE IS A DELIBERATELY SIMPLE ORACLE, NOT A COMPETITOR: a literal transcription
of the papers' definitions, per-token Python loops over numpy rows, written to be
obviously right. The "vs loop ref" ratio says how far the compiled code is from that
transcription; it is not a speedup over any engine. The real alternatives are timed
elsewhere: torch and transformers in bench_routers.py and bench_python.py, vLLM's
router in bench_vllm_route.py.

Compiled calls are timed with bench_common.Variant: batches of calls, wall and process
CPU time per call (the compiled code's OpenMP threads included: cores = CPU / wall), and
after every batch the CPU that threads still spinning burn until the process is idle
(waited out off the clock; "spin ms", per batch). Median over --repeat interleaved
rounds; the reference is timed the same way.

    bench/bench_route.py [--policies xshare,lynx] [--experts 8,128] [--tokens 16,256]
                         [--repeat 5] [--json OUT]
"""
import argparse
import json
import os

import numpy as np

import bench_common
from bench_common import ROOT, Variant, interleave, summarize
import reference as ref  # noqa: E402  (test/exec: bench_common sets the path)
from policy_shapes import import_switchyard, native_shape  # noqa: E402

switchyard = None   # the build's package, imported by main()

POLICIES = ["topk_softmax", "deepseek_v3", "lynx", "xshare", "xshare_spec", "xshare_ep"]


def shape_for(name, experts):
    """The shape binding of the generic policy at `experts` (k = 2 at 8 experts, else
    the k of the policy's own model; DeepSeek-style groups 4 / 2 at 8 experts)."""
    native = native_shape(name)
    k = 2 if experts <= 8 else switchyard.list_entries(
        os.path.join(ROOT, "policies", f"{name}.mlir"), **native)[0]["top_k"]
    shape = {"experts": experts, "top_k": k}
    if name == "deepseek_v3":
        shape.update(groups=4 if experts <= 8 else 8, topk_groups=2 if experts <= 8 else 4)
    if name == "xshare_ep":
        shape.update(devices=8, slots=experts)
    return shape, k


def inputs_for(experts, tokens, rng):
    logits = rng.standard_normal((tokens, experts)).astype(np.float32)
    return {"logits": logits,
            "bias": (0.01 * rng.standard_normal(experts)).astype(np.float32),
            "request_ids": (np.arange(tokens) // 4).astype(np.int32),
            "phase": 1,
            "placement": np.arange(experts, dtype=np.int32).reshape(experts, 1)}


def reference_call(name, x, k, experts):
    if name == "topk_softmax":
        return lambda: ref.topk_softmax(x["logits"], k)
    if name == "deepseek_v3":
        groups = 4 if experts <= 8 else 8
        return lambda: ref.deepseek_v3(x["logits"], x["bias"], k=k, groups=groups,
                                       topk_groups=groups // 2)
    if name == "lynx":
        return lambda: ref.lynx(x["logits"], 1, k)
    if name == "xshare":
        return lambda: ref.xshare(x["logits"], k, k0=1, budget=24)
    if name == "xshare_spec":
        return lambda: ref.xshare_spec(x["logits"], x["request_ids"], k, k0=1,
                                       request_budget=4, budget=0)
    return lambda: ref.xshare_ep(x["logits"], x["bias"], x["placement"], k, k0=1,
                                 device_budget=5, devices=8)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--experts", default="8,128,256")
    parser.add_argument("--tokens", default="16,256,4096")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--batch-ms", type=float, default=20.0,
                        help="target length of one timed batch of calls")
    parser.add_argument("--json", default=None, help="write every number here")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    global switchyard
    switchyard = import_switchyard()

    host = bench_common.machine(numpy=np.__version__, switchyard=switchyard.__version__)
    print("Host routing throughput: compiled policy (switchyard Router on NumPy arrays) vs "
          "the test suite's numpy reference\n(per-token Python loops: a simple oracle, NOT "
          "an optimized alternative; see bench_routers.py for torch / transformers),\n"
          f"same inputs, same run; median over {args.repeat} interleaved rounds. "
          f"{host['cpu']}, {host['usable_cores']} usable cores.\n"
          "cores = compiled CPU / wall per call (its threads); spin ms = CPU burnt after a "
          "batch by threads still spinning.")
    print(bench_common.load_line(host, "the threaded compiled calls most") + "\n")
    head = (f"{'policy':<13}{'E':>5}{'k':>3}{'T':>6}  {'compiled tok/s':>15}{'cores':>6}"
            f"{'spin ms':>8}{'loop ref tok/s':>16}{'vs loop ref':>12}")
    print(head)
    print("-" * len(head))
    rows = []
    for name in args.policies.split(","):
        for experts in map(int, args.experts.split(",")):
            shape, k = shape_for(name, experts)
            router = switchyard.compile(os.path.join(ROOT, "policies", f"{name}.mlir"),
                                        **shape)
            for tokens in map(int, args.tokens.split(",")):
                x = inputs_for(experts, tokens, rng)
                needed = {n: x[n] for n in router.inputs}
                batch_s = args.batch_ms * 1e-3
                variants = {"compiled": Variant(lambda: router(**needed), batch_s),
                            "reference": Variant(reference_call(name, x, k, experts),
                                                 batch_s)}
                samples = interleave(variants, args.repeat, seed=f"{name}/{experts}/{tokens}")
                c, r = (summarize(samples[v]) for v in ("compiled", "reference"))
                compiled, reference = c["wall_us"]["median"], r["wall_us"]["median"]
                cores = c["cpu_us"]["median"] / compiled
                spin = c["after_batch_cpu_us"]["median"] / 1e3
                rows.append({"policy": name, "experts": experts, "top_k": k,
                             "tokens": tokens, "compiled": c, "loop_reference": r,
                             "compiled_tokens_per_s": tokens / compiled * 1e6,
                             "loop_reference_tokens_per_s": tokens / reference * 1e6,
                             "loop_reference_over_compiled": reference / compiled})
                print(f"{name:<13}{experts:>5}{k:>3}{tokens:>6}  "
                      f"{tokens / compiled * 1e6:>15,.0f}{cores:>6.2f}{spin:>8.1f}"
                      f"{tokens / reference * 1e6:>16,.0f}{reference / compiled:>11.0f}x",
                      flush=True)
    if args.json:
        write_json(args.json, host, args, rows)


def write_json(path, host, args, rows):
    with open(path, "w") as f:
        json.dump({"machine": host, "settings": {"repeat": args.repeat,
                                                 "batch_ms": args.batch_ms,
                                                 "seed": args.seed},
                   "notes": {"loop_reference": "test/exec/reference.py: per-token Python "
                                               "loops, a simple oracle, not a competitor",
                             "units": "us per call (wall_us, cpu_us); after_batch_cpu_us "
                                      "per batch"},
                   "rows": rows}, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(bench_common.guarded("bench_route", main))
