#!/usr/bin/env python3
"""One routing call inside vLLM: vLLM's native CPU router vs Switchyard's, same logits.

Both are vLLM routers called as a FusedMoE layer calls them
(router.select_experts(hidden_states, router_logits)): vLLM's CPURouter (softmax
top-k, renormalized: what Qwen3-MoE / Mixtral route with on the CPU) and the plugin's
SwitchyardRouter running policies/topk_softmax.mlir (the same routing) through
torch.ops.switchyard.route_step. Eager calls (vLLM's enforce_eager) and, with
--compiled, both routers under torch.compile(fullgraph=True) as vLLM's default mode
traces them (Inductor's code for the native torch ops; one opaque op for Switchyard).
No CUDA graphs on the CPU: every call pays. T in {1, 8, 64,
512}, E in {8, 64, 128} (top-2 for 8 experts, top-8 otherwise), float32 and bfloat16
logits; every call on fresh logits (a pool of ~8 MB of distinct inputs, cycled); calls
interleaved in rounds, the median per call of each.

Each router runs with torch at 1 thread and at torch's default thread count (vLLM's CPU
worker runs with several); the ratio compares each at its faster setting (named in the
table; the JSON keeps all four: native_us / switchyard_us at 1 thread, *_nt_us at N).
After every chunk of calls the run waits, off the clock, until the process is idle
(bench_common.settle) and records the CPU that threads still spinning burnt
(after_chunk_cpu_us). The --compiled variants run at 1 thread.

    .venv-vllm/bin/python bench/bench_vllm_route.py [--rounds 30 --calls 200] [--compiled] \
        [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import bench_common


def median_call_us(fn, pool, calls):
    """Time per call of fn(hidden, logits) over `calls` calls cycling through `pool`:
    fresh logits per call, so no router is timed on inputs its branch predictor has
    learned (repeating one input makes branchy top-k code look several times faster)."""
    n = len(pool)
    start = time.perf_counter()
    for i in range(calls):
        fn(*pool[i % n])
    return (time.perf_counter() - start) / calls * 1e6


def logits_pool(T, E, dtype, torch, bytes_wanted=8 << 20, most=256):
    """Distinct (hidden, logits) pairs: about 8 MB of logits, 2 to 256 of them."""
    count = max(2, min(most, bytes_wanted // (T * E * 4)))
    return [(torch.randn(T, 64).to(dtype), torch.randn(T, E).to(dtype))
            for _ in range(count)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tokens", default="1,8,64,512")
    ap.add_argument("--experts", default="8,64,128")
    ap.add_argument("--compiled", action="store_true",
                    help="also both routers under torch.compile (as vLLM's default mode)")
    ap.add_argument("--json")
    args = ap.parse_args()

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.fused_moe.router.cpu_router import CPURouter
    from switchyard.vllm.settings import Settings
    from switchyard.vllm.router import make_router_class, step_router

    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    SwitchyardRouter = make_router_class()
    rows = []
    host = bench_common.machine(torch=torch.__version__, torch_default_threads=default_threads)
    print(f"vLLM routing call, native CPURouter vs Switchyard, {host['cpu']}, "
          f"{host['usable_cores']} usable cores; each at its faster torch thread count "
          f"(1 or {default_threads}, named), median us per call")
    print(bench_common.load_line(host, "the multi-threaded variants most"))
    print(f"{'dtype':>8} {'E':>4} {'k':>2} {'T':>5} {'native us':>13} {'switchyard us':>14} "
          f"{'sy/native':>9}" + (f" {'native cmp':>10} {'sy cmp':>10} {'ratio':>6}"
                                 if args.compiled else ""))
    with set_current_vllm_config(VllmConfig()):
        for dtype in (torch.float32, torch.bfloat16):
            for E in [int(e) for e in args.experts.split(",")]:
                k = 2 if E <= 8 else 8
                settings = Settings("topk_softmax", {})
                # As in a model of this dtype: bf16 logits are read in place.
                step = step_router(settings, {"experts": E, "top_k": k, "renormalize": True},
                                   logits_dtypes=(dtype,))
                ours = SwitchyardRouter(step, top_k=k, global_num_experts=E)
                native = CPURouter(top_k=k, global_num_experts=E, renormalize=True)
                for T in [int(t) for t in args.tokens.split(",")]:
                    pool = logits_pool(T, E, dtype, torch)
                    hidden, logits = pool[0]
                    w0, i0 = native.select_experts(hidden, logits)
                    w1, i1 = ours.select_experts(hidden, logits)
                    same = bool((i0.sort(1).values == i1.sort(1).values).all())
                    # bfloat16 logits tie often: then the chosen logit values agree.
                    def values(ids):
                        return logits.float().gather(1, ids.long()).sort(1).values

                    ties = not same and bool((values(i0) == values(i1)).all())
                    fns = {"native": native.select_experts, "switchyard": ours.select_experts,
                           "native_nt": native.select_experts,
                           "switchyard_nt": ours.select_experts}
                    threads = {key: default_threads if key.endswith("_nt") else 1
                               for key in fns}
                    if args.compiled:
                        torch.compiler.reset()   # one case's graphs at a time
                        # vLLM's default mode traces into the router: Inductor's code
                        # for the native torch ops, one opaque op for Switchyard.
                        for key, router in (("native_compiled", native),
                                            ("switchyard_compiled", ours)):
                            fn = torch.compile(lambda h, x, r=router: r.select_experts(h, x),
                                               dynamic=False, fullgraph=True)
                            fn(hidden, logits)
                            fns[key] = fn
                            threads[key] = 1
                    times = {key: [] for key in fns}
                    after = {key: [] for key in fns}
                    for _ in range(args.rounds):
                        for key, fn in fns.items():
                            torch.set_num_threads(threads[key])
                            times[key].append(median_call_us(fn, pool, args.calls))
                            after[key].append(bench_common.settle() * 1e6)
                    torch.set_num_threads(1)
                    med = {key: statistics.median(v) for key, v in times.items()}
                    best = {who: min((who, f"{who}_nt"), key=med.get)
                            for who in ("native", "switchyard")}
                    n, s = med[best["native"]], med[best["switchyard"]]
                    name = str(dtype).replace("torch.", "")
                    row = {"dtype": name, "experts": E, "top_k": k, "tokens": T,
                           "native_us": med["native"], "switchyard_us": med["switchyard"],
                           "native_nt_us": med["native_nt"],
                           "switchyard_nt_us": med["switchyard_nt"],
                           "native_best": best["native"], "native_best_us": n,
                           "switchyard_best": best["switchyard"], "switchyard_best_us": s,
                           "after_chunk_cpu_us": {key: statistics.median(v)
                                                  for key, v in after.items()},
                           "same_experts": same, "differ_only_in_ties": ties}
                    compiled = ""
                    if args.compiled:
                        nc, sc = med["native_compiled"], med["switchyard_compiled"]
                        row.update(native_compiled_us=nc, switchyard_compiled_us=sc)
                        compiled = f" {nc:>10.1f} {sc:>10.1f} {sc / nc:>6.2f}"
                    rows.append(row)
                    note = "" if same else "  (tied logits chosen differently)" if ties \
                        else "  (EXPERTS DIFFER)"
                    tag = {key: f"{default_threads}t" if key.endswith("_nt") else "1t"
                           for key in best.values()}
                    print(f"{name:>8} {E:>4} {k:>2} {T:>5} {n:>9.1f} {tag[best['native']]:>3} "
                          f"{s:>10.1f} {tag[best['switchyard']]:>3} "
                          f"{s / n:>9.2f}{compiled}{note}", flush=True)
    worst = max(r["switchyard_best_us"] / r["native_best_us"] for r in rows)
    at_most = sum(r["switchyard_best_us"] <= r["native_best_us"] for r in rows)
    print(f"eager, each at its faster thread count: worst ratio switchyard / native {worst:.2f} "
          f"({at_most}/{len(rows)} at most as slow)")
    if args.compiled:
        worst = max(r["switchyard_compiled_us"] / r["native_compiled_us"] for r in rows)
        at_most = sum(r["switchyard_compiled_us"] <= r["native_compiled_us"] for r in rows)
        print(f"compiled: worst ratio {worst:.2f} ({at_most}/{len(rows)} at most as slow)")
    if args.json:
        import vllm
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "torch": torch.__version__,
                       "vllm": vllm.__version__, "threads": [1, default_threads],
                       "host": dict(host, vllm=vllm.__version__),
                       "notes": {"native_us, switchyard_us": "torch at 1 thread",
                                 "*_nt_us": "torch at its default thread count",
                                 "*_best": "the faster of the two: the compared pair",
                                 "after_chunk_cpu_us": "CPU burnt after a chunk of calls "
                                                       "until the process was idle"},
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
