#!/usr/bin/python3
"""Routing throughput benchmark (not a test): every shipped router policy, compiled for
the host by moe-compile and called through the switchyard package (a Router on NumPy
arrays: input checks, result allocation, the C entry point), side by side in the same
run with the straightforward numpy reference implementation of the same policy
(test/exec/reference.py, written from the papers' definitions). Prints tokens/s for both
and their ratio, for E in {8, 128, 256} and T in {16, 256, 4096}.

    bench/bench_route.py [--policies xshare,lynx] [--experts 8,128] [--tokens 16,256]
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
import reference as ref  # noqa: E402
from policy_shapes import import_switchyard, native_shape  # noqa: E402

switchyard = import_switchyard()

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


def seconds_per_call(fn, min_time, max_reps):
    fn()  # warm up
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < 3 or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if times[-1] > min_time:
            break
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--experts", default="8,128,256")
    parser.add_argument("--tokens", default="16,256,4096")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    print("Host routing throughput: compiled policy (moe-compile, C entry) vs the numpy "
          "reference,\nsame inputs, same run; median time per call.\n")
    head = (f"{'policy':<13}{'E':>5}{'k':>3}{'T':>6}  {'compiled tok/s':>15}"
            f"{'reference tok/s':>17}{'ratio':>9}")
    print(head)
    print("-" * len(head))
    for name in args.policies.split(","):
        for experts in map(int, args.experts.split(",")):
            shape, k = shape_for(name, experts)
            router = switchyard.compile(os.path.join(ROOT, "policies", f"{name}.mlir"),
                                        **shape)
            for tokens in map(int, args.tokens.split(",")):
                x = inputs_for(experts, tokens, rng)
                needed = {n: x[n] for n in router.inputs}
                compiled = seconds_per_call(lambda: router(**needed), 0.2, 2000)
                reference = seconds_per_call(reference_call(name, x, k, experts), 0.5, 5)
                print(f"{name:<13}{experts:>5}{k:>3}{tokens:>6}  {tokens / compiled:>15,.0f}"
                      f"{tokens / reference:>17,.0f}{reference / compiled:>8.0f}x", flush=True)


if __name__ == "__main__":
    main()
