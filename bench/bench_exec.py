#!/usr/bin/python3
"""The MoE layer benchmark: a checkpoint with real model proportions (Qwen3-30B-A3B's
hidden 2048 / expert width 768 / top-8, 64 experts; test/support/make_checkpoint.py) run
through `moe-exec` with plain top-k, LYNX, XShare and XShare-spec side by side, decode
batches of T tokens and a prefill batch, all in the same run:

  experts touched, expert bytes read, FLOPs, measured layer time (best of --repeat),
  the ratio to top-k, the machine's model of the batch -- bound = max(bytes / read
  bandwidth, FLOPs / GEMM rate), both measured here with numpy -- and which one binds,
  and a straightforward baseline: the same layer as a per-expert loop of GEMMs (the
  shape of transformers' eager MoE block) in numpy on the same OpenBLAS (its default
  threads).

The loop baseline is a SIMPLE REFERENCE, not a competitor: a Python loop over the
experts the batch hit, three numpy GEMMs each, float32, no fusion. Its column is
labelled "vs loop", not a speedup over an engine; the comparison with real engines is
bench_vllm_engine.py (vLLM's own CPU MoE) and, for routing alone, bench_routers.py.

Our own costs: every moe-exec run's process CPU time (all threads: the executor's FFN
threads and OpenMP workers spinning between layers and after them, start-up and policy
compile included) is recorded next to its wall time (JSON process_cpu_s /
process_wall_s; the table's last line sums them).

Decode batches have speculative structure for T >= 4: T/4 requests verifying one
accepted and three draft tokens each (what XShare-spec groups by), T = 1 is one token.

    bench_exec.py --build build [--tokens 1,4,16,64,256] [--prefill 512] [--repeat 5]
                  [--json results.json] [--plot results.png]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.dont_write_bytecode = True
import bench_common  # noqa: E402  (sets the path: test/support, test/exec)
from bench_common import ROOT  # noqa: E402
from make_checkpoint import make_checkpoint  # noqa: E402
import moe_reference as ref  # noqa: E402

POLICIES = ["topk_softmax", "lynx", "xshare", "xshare_spec"]
LABELS = {"topk_softmax": "top-k", "lynx": "LYNX", "xshare": "XShare",
          "xshare_spec": "XShare-spec"}


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def machine_rates(repeat):
    """Measured now: copy bandwidth (bytes read + written per second, STREAM's
    convention), read bandwidth (a matrix-vector product streaming a 256 MiB matrix,
    what a decode layer does with its weights) and the float32 GEMM rate of a
    MoE-expert-shaped product."""
    a = np.ones(64 << 20, np.float32)  # 256 MiB
    b = np.empty_like(a)
    copy = 2 * a.nbytes / best_of(lambda: np.copyto(b, a), repeat)
    m = a.reshape(8192, 8192)
    v = np.ones(8192, np.float32)
    read = m.nbytes / best_of(lambda: m @ v, repeat)
    x = np.ones((1024, 2048), np.float32)
    w = np.ones((2048, 768), np.float32)
    rate = 2 * 1024 * 2048 * 768 / best_of(lambda: x @ w, repeat)
    return copy, read, rate


def eager_layer(config, tensors, layer, x):
    """The layer as transformers' eager MoE block computes it: router, softmax top-k,
    then a Python loop over the experts the batch hit, three GEMMs each."""
    ids, weights = ref.native_routing(config, tensors, layer, x)
    y = np.zeros_like(x)
    p = f"model.layers.{layer}.mlp.experts."
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        xe = x[tok]
        g = xe @ tensors[f"{p}{e}.gate_proj.weight"].T
        h = g / (1 + np.exp(-g)) * (xe @ tensors[f"{p}{e}.up_proj.weight"].T)
        y[tok] += (h @ tensors[f"{p}{e}.down_proj.weight"].T) * weights[tok, slot, None]
    return y


def batch_structure(tokens, prefill):
    if prefill:
        return np.zeros(tokens, np.int32), np.arange(tokens, dtype=np.int32)
    if tokens < 4:
        return np.arange(tokens, dtype=np.int32), np.full(tokens, 100, np.int32)
    requests = np.repeat(np.arange(tokens // 4, dtype=np.int32), 4)
    positions = np.tile(np.arange(100, 104, dtype=np.int32), tokens // 4)
    return requests, positions


def run_exec(exe, model, x, requests, positions, policy, repeat, work, env):
    paths = {name: os.path.join(work, name + ".npy") for name in ("x", "r", "p")}
    np.save(paths["x"], x)
    np.save(paths["r"], requests)
    np.save(paths["p"], positions)
    out = os.path.join(work, "out")
    cmd = [exe, model, "--input", paths["x"], "--out", out, "--repeat", str(repeat),
           "--request-ids", paths["r"], "--positions", paths["p"], "--block-only",
           "--policy", os.path.join(ROOT, "policies", policy + ".mlir")]
    run = bench_common.run_tool(cmd, "bench_exec: moe-exec", timeout_s=600, env=env)
    with open(os.path.join(out, "metrics.json")) as f:
        return json.load(f)["layers"][0], run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("SWITCHYARD_BUILD_DIR",
                                                      os.path.join(ROOT, "build")))
    ap.add_argument("--preset", default="qwen3-moe-small")
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--tokens", default="1,4,16,64,256")
    ap.add_argument("--prefill", type=int, default=512, help="prefill batch size (0: none)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--plot", help="write a matplotlib plot here (.png)")
    args = ap.parse_args()

    exe = os.path.join(args.build, "bin", "moe-exec")
    bench_common.check_exe(exe)
    model = os.path.join(args.build, "bench-models", f"{args.preset}-e{args.experts}")
    if not os.path.exists(os.path.join(model, "config.json")):
        print(f"bench_exec: writing the {args.preset} checkpoint to {model} ...", flush=True)
        make_checkpoint("qwen3_moe", model, seed=0, preset=args.preset, experts=args.experts)
    config, tensors = ref.load_checkpoint(model)
    layer = ref.moe_layers(config)[0]
    env = dict(os.environ)
    env.setdefault("SWITCHYARD_CACHE_DIR", os.path.join(args.build, "policy-cache"))
    copy, bandwidth, rate = machine_rates(args.repeat)
    print(f"model: {model} ({config['architectures'][0]}: hidden {config['hidden_size']}, "
          f"{ref.num_experts(config)} experts of width {config['moe_intermediate_size']}, "
          f"top-{config['num_experts_per_tok']}, float32)")
    print(f"machine: copy bandwidth {copy / 1e9:.1f} GB/s, read bandwidth {bandwidth / 1e9:.1f} "
          f"GB/s (sgemv over 256 MiB), float32 GEMM {rate / 1e9:.1f} GFLOP/s (numpy on "
          f"OpenBLAS, measured now); {os.cpu_count()} CPUs")
    print("bound = max(bytes / read bandwidth, FLOPs / GEMM rate); eff = bound / time")
    print("loop ms: the layer as a Python loop over the experts the batch hit, 3 numpy "
          "GEMMs each (a simple reference in the shape of transformers' eager MoE block, "
          "not an optimized engine); vs loop = loop ms / ms\n")
    header = (f"{'batch':>12} {'policy':>12} {'experts':>7} {'MB read':>8} {'GFLOP':>7} "
              f"{'ms':>8} {'vs top-k':>8} {'bound ms':>8} {'bound by':>8} {'eff':>5} "
              f"{'loop ms':>8} {'vs loop':>7}")
    print(header)
    print("-" * len(header))
    rows = []
    batches = [(int(t), False) for t in args.tokens.split(",")]
    if args.prefill:
        batches.append((args.prefill, True))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        for tokens, prefill in batches:
            x = rng.standard_normal((tokens, config["hidden_size"])).astype(np.float32)
            requests, positions = batch_structure(tokens, prefill)
            eager = best_of(lambda: eager_layer(config, tensors, layer, x), args.repeat)
            base = None
            for policy in args.policies.split(","):
                m, run = run_exec(exe, model, x, requests, positions, policy, args.repeat,
                                  work, env)
                seconds = m["seconds"]["total"]
                base = base or seconds
                memory, compute = m["expert_bytes"] / bandwidth, m["flops"] / rate
                bound = max(memory, compute)
                label = f"{'prefill' if prefill else 'decode'} {tokens}"
                row = dict(batch=label, tokens=tokens, prefill=prefill, policy=policy,
                           experts=m["active_experts"], bytes=m["expert_bytes"],
                           flops=m["flops"], seconds=seconds, vs_topk=seconds / base,
                           bound=bound, bound_by="memory" if memory >= compute else "compute",
                           efficiency=bound / seconds, loop=eager, eager=eager,
                           stages=m["seconds"], **run.json())
                rows.append(row)
                eager_cells = (f"{1e3 * eager:8.2f} {eager / seconds:6.2f}x"
                               if policy == "topk_softmax" else f"{'':8} {'':7}")
                print(f"{label:>12} {LABELS.get(policy, policy):>12} {row['experts']:7d} "
                      f"{row['bytes'] / 1e6:8.1f} {row['flops'] / 1e9:7.2f} "
                      f"{1e3 * seconds:8.2f} {row['vs_topk']:7.2f}x {1e3 * bound:8.2f} "
                      f"{row['bound_by']:>8} {row['efficiency']:5.2f} {eager_cells}",
                      flush=True)
    cpu, wall = sum(r["process_cpu_s"] for r in rows), sum(r["process_wall_s"] for r in rows)
    print(f"moe-exec processes: {cpu:.1f} s CPU over {wall:.1f} s wall (all threads, "
          f"spinning, start-up and policy compile included: {cpu / max(wall, 1e-9):.2f} "
          f"cores busy on average)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=model, copy_bandwidth=copy, read_bandwidth=bandwidth,
                           gemm_rate=rate, machine=bench_common.machine(numpy=np.__version__),
                           notes={"loop": "a simple reference: a Python loop over the hit "
                                          "experts, 3 numpy GEMMs each (not an engine); "
                                          "'eager' is the same number (its old name)",
                                  "process_cpu_s": "moe-exec's process CPU time, all "
                                                   "threads, start-up included"},
                           rows=rows), f, indent=1)
    if args.plot:
        plot(rows, bandwidth, rate, args.plot)


def plot(rows, bandwidth, rate, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    decode = [r for r in rows if not r["prefill"]]
    for policy in dict.fromkeys(r["policy"] for r in decode):
        mine = [r for r in decode if r["policy"] == policy]
        t = [r["tokens"] for r in mine]
        left.plot(t, [1e3 * r["seconds"] for r in mine], "o-", label=LABELS.get(policy, policy))
        right.plot(t, [r["experts"] for r in mine], "o-", label=LABELS.get(policy, policy))
    topk = [r for r in decode if r["policy"] == "topk_softmax"]
    if topk:
        t = [r["tokens"] for r in topk]
        left.plot(t, [1e3 * r["eager"] for r in topk], "k--",
                  label="numpy loop reference (top-k)")
        left.plot(t, [1e3 * r["bound"] for r in topk], "k:", label="bound (top-k)")
    for ax, title in ((left, "MoE layer time (ms)"), (right, "experts touched")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("decode batch (tokens)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    left.set_yscale("log")
    left.legend(fontsize=8)
    fig.suptitle(f"host: {bandwidth / 1e9:.0f} GB/s read, {rate / 1e9:.0f} GFLOP/s GEMM "
                 "(measured); Qwen3-MoE-shaped layer, float32")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"bench_exec: wrote {path}")


if __name__ == "__main__":
    sys.exit(bench_common.guarded("bench_exec", main))
