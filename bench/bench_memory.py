#!/usr/bin/env python3
"""Expert-memory benchmark (not a test): the real executor (`moe-exec --memory MODE
--budget B`, host emulation) runs the same checkpoint on the same decode + prefill trace
in every expert-memory mode, side by side:

  resident   every expert in bf16 on the "device": the UNCONSTRAINED REFERENCE.  Its
             budget is the experts' full bf16 size (it cannot run in less); its outputs
             are the reference for the others' deviation;
and, at the same budget of --budget-fraction (default 40%) of the experts' bf16 bytes:
  static-lo  every expert at int4 (--lo int4), nothing moves;
  dynaexq    every expert at int4 plus the hot ones promoted to bf16 by the compiled
             DynaExq residency rule (policies/dynaexq.mlir) every --update-steps steps;
  offload    a per-layer LRU cache of bf16 experts over host memory (budget / expert
             bytes / layers slots per layer: 25 of 64 by default) with ExpertFlow's
             adaptive prefetch of the layer S ahead (policies/expertflow.mlir);
  on-demand  the same cache, no prefetch, plain LRU: the offloading baseline.

Model: a random Hugging Face checkpoint from test/support/make_checkpoint.py, a Qwen3-MoE
layout in bfloat16 (default hidden 512, expert width 256, 64 experts, top-8, 4 MoE
layers: 768 KiB per expert, 192 MiB of experts).

Trace (one `--batches` entry per step): --decode-steps steps of --decode-tokens tokens
(one token of each of the running requests) with --prefill-steps steps of
--prefill-tokens tokens (one new request's prompt) spread evenly among them, prefill
first.  Routing is skewed and heavy-tailed: every token is
    x = a * skew * sqrt(H) * d + N(0, 1),   a ~ Uniform(0, 2) per token,
    d = unit sum over the hot experts h_1..h_n (Zipf weights 1, 1/2, .., 1/n) of
        that expert's router row, summed over every MoE layer,
so a few experts draw most of the routed (token, expert) pairs, with a long tail.  The
hot set drifts once, midway through the trace (--hot, default experts 0-3, then 32-35).
Decode tokens also carry temporal locality: their N(0, 1) part is
rho * u_r + sqrt(1 - rho^2) * N(0, 1) with u_r a fixed direction of request r
(--locality rho, default 0.8), so a request's consecutive tokens route alike.  Printed
from the resident run: the share of routed pairs taken by each layer's 8 busiest
experts, the distinct experts a step routes to per layer (what a cache must hold for
that step), and how many of a request's experts it routes to again at the next step.

The host->device link is EMULATED: the executor's copy thread sleeps so that a copy of
b bytes takes b / --link-bandwidth seconds; every mode gets the same value.  It is
chosen so that moving one expert costs what it costs, relative to one MoE layer's
compute, on a GPU serving system:

    GPU: a Qwen3-30B-A3B expert is 3 x 2048 x 768 x 2 B = 9 MiB; over PCIe 4.0 x16 at
         ~25 GB/s that is 0.38 ms, against ~0.3-1 ms for one MoE layer of a decode
         step on an A6000 / H100 -> copy / layer ratio r ~ 0.4-1.2; default 0.755
         (--copy-ratio; 0.38 ms over 0.5 ms).
    here: t_layer = the median per-layer time of the decode steps of a calibration run
         (resident, the same trace), and
             link bandwidth = expert_bytes / (r * t_layer)
         so that expert_bytes / bandwidth is r x t_layer, as on the GPU.
--link-bandwidth B skips the calibration.  ExpertFlow's step-size model gets the same
numbers (--memory-set layer_time=t_layer; expert_bytes and bandwidth it takes from the
run).  Prefill layers are compute-bound and relatively far slower on this CPU than on a
GPU, so the link weighs less on prefill steps here than it would there.

MEASURED (from each step's metrics.json): step time = sum over MoE layers of the
layer's seconds.total (router, routing, permute, expert FFNs including the time spent
waiting for experts still on the link, combine); throughput = tokens / sum of step
times; p50 / p99 step time of decode and of prefill steps (numpy percentiles over the
few steps of each kind: p99 is close to the max); stall count and seconds (time a layer
waited for a routed expert); loads, prefetches, overfetches, promotions, bytes copied;
the budget tracker's peak (must stay <= the budget: a violation is an error); and the
deviation of the outputs from the resident run, relative RMS of hidden.npy over all
steps (offload and on-demand run bf16 experts only and must match bit for bit: anything
else is an error; static-lo and dynaexq run int4 versions and deviate).
NOT in the step time: the memory modes' bookkeeping between the router and the FFNs
(ExpertFlow's rule calls and pre-gate, DynaExq's rule at step boundaries); the
process wall time of each run is reported alongside for that reason, with its CPU time
(every thread: the FFN threads, the copy thread and OpenMP workers spinning between
layers all cost CPU that a wall clock does not show).

Host caveats when reading the numbers: the executor's int4 / int8 expert kernels
dequantise on the CPU and are several times SLOWER than its bf16 ones here (on a GPU
low-bit decode GEMVs are faster), so static-lo and dynaexq pay compute that a GPU would
not; and with only a few MoE layers, ExpertFlow's look-ahead of S layers mostly wraps
around to the next step's layers (predicted from this step's tokens).

Every time is measured on this host (a few CPU cores, the executor's FFN threads and the
copy thread sharing them) with an EMULATED link: the numbers compare modes under the
same conditions, they are not GPU timings.  Targets from the papers, reported as met or
not: ExpertFlow cuts stall time to < 0.1% of on-demand offloading; DynaExq's throughput
is 1.4-2.7x offloading's at large batches.

A run that fails is rerun up to --retries times (default 2); every failed attempt is
printed, listed under the table and in the JSON, and makes the exit status 1, as do a
peak over the budget and offload / on-demand outputs that differ from resident's.  A
mode that fails every attempt is left out of the table and the plot (named in both).

    bench/bench_memory.py [--copy-ratio 0.75 | --link-bandwidth B]
                            [--json docs/memory-modes.json] [--plot docs/memory-modes.png]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.dont_write_bytecode = True
from bench_common import (ROOT, BenchError, add_checkpoint_args, check_exe, in_workdir, machine,  # noqa: E402
                          parse_hot, run_tool)
from make_checkpoint import make_checkpoint  # noqa: E402
import moe_reference as ref  # noqa: E402

MODES = ("resident", "static-lo", "dynaexq", "offload", "on-demand")
EXACT = ("offload", "on-demand")   # bf16 experts only: outputs identical to resident
PREFILL, DECODE = 0, 1             # moe-exec's phase_<i> codes
RUN_TIMEOUT_S = 600
# GPU reference for the link (see the module docstring).
GPU_EXPERT_BYTES = 3 * 2048 * 768 * 2     # Qwen3-30B-A3B, bf16
GPU_LINK = 25e9                           # PCIe 4.0 x16, effective
GPU_LAYER_S = 0.5e-3                      # one MoE layer of a decode step


class RunFailed(BenchError):
    """moe-exec exited non-zero; `reason` is its error line."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


# ------------------------------------------------------------------------------- trace
def step_plan(args):
    """Phase of every step: the prefills spread evenly among the decodes, prefill first
    (a server admits a prompt, then decodes)."""
    total = args.decode_steps + args.prefill_steps
    prefill_at = {round(i * total / args.prefill_steps) for i in range(args.prefill_steps)}
    return [PREFILL if s in prefill_at else DECODE for s in range(total)]


def hot_direction(routers, hot):
    """Unit direction along the hot experts' router rows (all layers), Zipf-weighted so
    that the first hot expert is the hottest: a heavy tail rather than a flat hot set."""
    d = sum(r[e].astype(np.float64) / (rank + 1) for r in routers
            for rank, e in enumerate(hot))
    return d / np.linalg.norm(d)


def build_trace(model_dir, plan, args, rng):
    """{hidden_<i>, request_ids_<i>, positions_<i>, phase_<i>} for every step, and the
    hot-set index (0 before the drift, 1 after) of each step."""
    config, tensors = ref.load_checkpoint(model_dir)
    width, E = config["hidden_size"], ref.num_experts(config)
    routers = [t for name, t in tensors.items()
               if name.endswith(".gate.weight") and t.shape[0] == E]
    directions = [hot_direction(routers, hot) for hot in parse_hot(args.hot, E, count=2)]
    drift_at = len(plan) // 2
    # Each running request's own direction: its consecutive decode tokens route alike.
    own = rng.standard_normal((args.decode_tokens, width))
    rho = args.locality
    arrays, hot_of, next_request, decode_pos = {}, [], args.decode_tokens, 0
    for s, phase in enumerate(plan):
        h = int(s >= drift_at)
        hot_of.append(h)
        tokens = args.prefill_tokens if phase == PREFILL else args.decode_tokens
        noise = rng.standard_normal((tokens, width))
        if phase == DECODE:
            noise = rho * own + np.sqrt(1 - rho ** 2) * noise
        # Per-token strength: some tokens follow the hot experts strongly, some barely.
        amp = rng.uniform(0.0, 2.0, size=(tokens, 1))
        x = amp * args.skew * np.sqrt(width) * directions[h] + noise
        arrays[f"hidden_{s}"] = x.astype(np.float32)
        if phase == PREFILL:   # one new request's prompt
            ids, pos = np.full(tokens, next_request), np.arange(tokens)
            next_request += 1
        else:                  # one token of each running request
            ids, pos = np.arange(tokens), np.full(tokens, 256 + decode_pos)
            decode_pos += 1
        arrays[f"request_ids_{s}"] = ids.astype(np.int32)
        arrays[f"positions_{s}"] = pos.astype(np.int32)
        arrays[f"phase_{s}"] = np.array([phase], dtype=np.int32)
    return arrays, hot_of


# ----------------------------------------------------------------------------- running
def run_mode(exe, model_dir, npz, out_dir, mode, budget, extra, label):
    """One moe-exec run; returns its process wall and CPU seconds (bench_common.ToolRun:
    every thread, the FFN and copy threads and OpenMP workers' spinning included)."""
    cmd = [exe, model_dir, "--batches", npz, "--out", out_dir, "--memory", mode,
           "--budget", str(budget)] + extra

    def failed(message, text):
        errors = [line for line in text.splitlines() if "error:" in line]
        return RunFailed(message, errors[-1] if errors else message.splitlines()[0])
    return run_tool(cmd, label, RUN_TIMEOUT_S, error=failed)


def run_with_retries(args, label, *run_args):
    """run_mode, repeated up to --retries times after a failure.  Every failed attempt
    is printed at once and returned, so that it lands in the table, the JSON and the
    exit status: a retry keeps the other numbers, it never hides a failure."""
    failures = []
    for attempt in range(1 + args.retries):
        try:
            return run_mode(*run_args, label), failures
        except RunFailed as e:
            failures.append(e.reason)
            print(f"  {label}: attempt {attempt + 1} FAILED: {e.reason}", flush=True)
            if attempt == args.retries:
                raise


def read_run(out_dir, steps):
    """Per step: {seconds (sum of the layers' totals), layers, memory, hidden, ids}."""
    run = []
    for s in range(steps):
        d = os.path.join(out_dir, f"batch_{s}")
        with open(os.path.join(d, "metrics.json")) as f:
            metrics = json.load(f)
        layers = sorted(metrics["layers"], key=lambda m: m["layer"])
        run.append({"seconds": sum(m["seconds"]["total"] for m in layers),
                    "layers": len(layers), "memory": metrics["memory"],
                    "hidden": np.load(os.path.join(d, "hidden.npy")),
                    "ids": [np.load(os.path.join(d, f"topk_ids_{m['layer']}.npy"))
                            for m in layers]})
    return run


def decode_layer_seconds(run, plan):
    """Median per-layer time of the decode steps (the link calibration's t_layer)."""
    return float(np.median([st["seconds"] / st["layers"]
                            for st, phase in zip(run, plan) if phase == DECODE]))


def mode_flags(mode, args, link, layer_s):
    flags = ["--link-bandwidth", f"{link:.6g}"]
    if mode in ("static-lo", "dynaexq"):
        flags += ["--lo", args.lo]
    if mode == "dynaexq":
        flags += ["--update-steps", str(args.update_steps)]
    if mode == "offload":
        # ExpertFlow's step size S = ceil(N_e * expert_bytes / (bandwidth * layer_time)):
        # give it this host's layer time, in the same units as the emulated link.
        flags += ["--memory-set", f"layer_time={layer_s:.6g}"]
    if args.check:
        flags.append("--memory-check")
    return flags


# ----------------------------------------------------------------------------- summary
def percentile_ms(values, q):
    return float(1e3 * np.percentile(values, q)) if values else None


def routing_skew(run, plan, hot_of, top=8):
    """Share of routed (token, expert) pairs taken by each layer's `top` busiest experts
    (mean over layers), per phase and half of the trace; and the busiest experts of
    layer 0 in each half (the drift should show)."""
    shares, busiest = {}, {}
    for half in (0, 1):
        for phase, name in ((DECODE, "decode"), (PREFILL, "prefill")):
            steps = [st for st, p, h in zip(run, plan, hot_of) if p == phase and h == half]
            if not steps:
                continue
            per_layer = []
            for l in range(steps[0]["layers"]):
                ids = np.concatenate([st["ids"][l].ravel() for st in steps])
                counts = np.sort(np.bincount(ids[ids >= 0]))[::-1]
                per_layer.append(counts[:top].sum() / counts.sum())
            shares[f"{name}_half{half}"] = float(np.mean(per_layer))
        ids = np.concatenate([st["ids"][0].ravel() for st, h in zip(run, hot_of) if h == half])
        busiest[f"half{half}"] = np.argsort(-np.bincount(ids[ids >= 0]))[:top].tolist()
    # Distinct experts a step routes to per layer: what a cache must hold for the step.
    active = {name: float(np.mean([len(np.unique(ids[ids >= 0])) for st, p in zip(run, plan)
                                   if p == phase for ids in st["ids"]]))
              for phase, name in ((DECODE, "decode"), (PREFILL, "prefill"))
              if phase in plan}
    # Temporal locality: share of a request's experts at a decode step that it routes to
    # again at the next decode step (same layer); 8/64 = 0.125 for independent tokens.
    again = [len(np.intersect1d(a[r], b[r])) / a.shape[1]
             for s in range(len(plan) - 1) if plan[s] == plan[s + 1] == DECODE
             for a, b in zip(run[s]["ids"], run[s + 1]["ids"]) for r in range(a.shape[0])]
    return {"top": top, "share": shares, "busiest_layer0": busiest,
            "active_experts_per_layer": active,
            "decode_expert_reuse": float(np.mean(again)) if again else None}


def summarize(mode, budget, run, plan, reference, process):
    seconds = [st["seconds"] for st in run]
    tokens = [st["hidden"].shape[0] for st in run]
    by_phase = {p: [s for s, ph in zip(seconds, plan) if ph == p] for p in (DECODE, PREFILL)}
    tok_phase = {p: sum(t for t, ph in zip(tokens, plan) if ph == p) for p in (DECODE, PREFILL)}
    total = lambda key: int(sum(st["memory"][key] for st in run))  # noqa: E731
    num = sum(float(np.sum((st["hidden"].astype(np.float64) -
                            r["hidden"].astype(np.float64)) ** 2))
              for st, r in zip(run, reference))
    den = sum(float(np.sum(r["hidden"].astype(np.float64) ** 2)) for r in reference)
    return {
        "mode": mode, "budget": int(budget),
        "peak": int(max(st["memory"]["peak"] for st in run)),
        "used_last": int(run[-1]["memory"]["used"]),
        "tokens": int(sum(tokens)),
        "throughput_tok_s": sum(tokens) / sum(seconds),
        "decode_tok_s": tok_phase[DECODE] / sum(by_phase[DECODE]) if by_phase[DECODE] else None,
        "prefill_tok_s": (tok_phase[PREFILL] / sum(by_phase[PREFILL])
                          if by_phase[PREFILL] else None),
        "decode_ms_p50": percentile_ms(by_phase[DECODE], 50),
        "decode_ms_p99": percentile_ms(by_phase[DECODE], 99),
        "prefill_ms_p50": percentile_ms(by_phase[PREFILL], 50),
        "prefill_ms_p99": percentile_ms(by_phase[PREFILL], 99),
        "stalls": total("stalls"),
        "stall_seconds": float(sum(st["memory"]["stall_seconds"] for st in run)),
        "loads": total("loads"), "prefetches": total("prefetches"),
        "overfetches": total("overfetches"), "promotions": total("promotions"),
        "demotions": total("demotions"), "evictions": total("evictions"),
        "failed_copies": total("failed_copies"), "bytes_copied": total("bytes_copied"),
        "rel_rms_vs_resident": (num / den) ** 0.5 if den > 0 else 0.0,
        "identical_to_resident": all(np.array_equal(st["hidden"], r["hidden"])
                                     for st, r in zip(run, reference)),
        # bf16 experts per layer at the last step (offloading modes report every expert
        # as bf16: what a layer ran is bf16 for what it routed).
        "hi_experts_last_step": ({l: int(sum(v == 2 for v in vs))
                                  for l, vs in run[-1]["memory"]["versions"].items()}
                                 if mode in ("static-lo", "dynaexq") else None),
        "process_wall_s": process.wall_s,
        "process_cpu_s": process.cpu_s,
        "per_step": {"ms": [1e3 * s for s in seconds],
                     "stall_ms": [1e3 * st["memory"]["stall_seconds"] for st in run],
                     "loads": [st["memory"]["loads"] for st in run],
                     "step_size": [st["memory"]["step_size"] for st in run]},
    }


def ratio(a, b):
    return a / b if a is not None and b else None


def targets(rows):
    """The papers' targets against what was measured here (None when not computable)."""
    by = {r["mode"]: r for r in rows}
    out = {}
    if "on-demand" in by:
        base = by["on-demand"]["stall_seconds"]
        for r in rows:
            r["stall_vs_on_demand"] = ratio(r["stall_seconds"], base)
        if "offload" in by:
            frac = by["offload"]["stall_vs_on_demand"]
            out["expertflow_stall_fraction"] = frac
            out["expertflow_target_met"] = frac is not None and frac < 1e-3
    if "dynaexq" in by and "offload" in by:
        d, o = by["dynaexq"], by["offload"]
        out["dynaexq_vs_offload"] = {k: ratio(d[k], o[k]) for k in
                                     ("throughput_tok_s", "decode_tok_s", "prefill_tok_s")}
        # "Large batches": our large batches are the prefill steps.
        big = out["dynaexq_vs_offload"]["prefill_tok_s"]
        out["dynaexq_target_met_large_batches"] = big is not None and 1.4 <= big
    return out


# ------------------------------------------------------------------------------ output
def fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def print_table(rows, goals, info, elapsed):
    m = info["model"]
    print(f"\nExpert memory modes: moe-exec --memory MODE, {m['arch']} bf16 hidden "
          f"{m['hidden']}, expert width {m['intermediate']}, E={m['experts']}, "
          f"top-{m['top_k']}, {m['layers']} MoE layers ({info['expert_bytes'] / 2**10:.0f} "
          f"KiB per expert, {info['total_hi'] / 2**20:.0f} MiB of experts)")
    t = info["trace"]
    print(f"trace: {t['decode_steps']} decode steps x {t['decode_tokens']} tokens + "
          f"{t['prefill_steps']} prefill steps x {t['prefill_tokens']} tokens, hot sets "
          f"{t['hot']} (drift at step {t['drift_at']})")
    sk = info["routing_skew"]
    print(f"routing skew (resident): the {sk['top']} busiest experts of a layer take "
          + ", ".join(f"{k} {100 * v:.0f}%" for k, v in sk["share"].items())
          + f" of routed pairs;\n  layer 0's busiest: {sk['busiest_layer0']}; distinct experts "
          "routed per layer and step: " + ", ".join(
              f"{k} {v:.1f}" for k, v in sk["active_experts_per_layer"].items())
          + f"; a request's experts reused at its next decode step: "
          f"{fmt(sk['decode_expert_reuse'], '.0%')}")
    link = info["link"]
    print(f"link (emulated): {link['bandwidth'] / 1e6:.1f} MB/s = expert {info['expert_bytes']} "
          f"B / ({link['copy_ratio']:.3f} x t_layer {1e3 * link['layer_seconds']:.2f} ms); one "
          f"expert copy {1e3 * link['expert_copy_seconds']:.2f} ms"
          + (" (given by --link-bandwidth)" if link["given"] else ""))
    print(f"budget: {info['budget_fraction']:.0%} of the experts' bf16 bytes = "
          f"{info['budget'] / 2**20:.1f} MiB (resident: the full {info['total_hi'] / 2**20:.1f}"
          f" MiB, the unconstrained reference)")
    print(f"ALL TIMES MEASURED on this {info['machine']['nproc']}-core host with an EMULATED "
          "link: a comparison of modes, not GPU timings.")
    hdr = (f"{'mode':<10}{'budget':>8}{'peak':>8}{'tok/s':>8}{'dec p50':>9}{'p99':>8}"
           f"{'pre p50':>9}{'p99':>8}{'stall s':>9}{'vs o-d':>8}{'loads':>7}{'prefet':>7}"
           f"{'overf':>6}{'promo':>6}{'rel RMS':>9}{'wall s':>7}{'CPU s':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        name = r["mode"] + ("*" if r["mode"] == "resident" else "")
        vs = r.get("stall_vs_on_demand")
        print(f"{name:<10}{r['budget'] / 2**20:>8.1f}{r['peak'] / 2**20:>8.1f}"
              f"{r['throughput_tok_s']:>8.0f}{fmt(r['decode_ms_p50'], '.2f'):>9}"
              f"{fmt(r['decode_ms_p99'], '.2f'):>8}{fmt(r['prefill_ms_p50'], '.1f'):>9}"
              f"{fmt(r['prefill_ms_p99'], '.1f'):>8}{r['stall_seconds']:>9.3f}"
              f"{'-' if vs is None else f'{100 * vs:.1f}%':>8}"
              f"{r['loads']:>7}{r['prefetches']:>7}{r['overfetches']:>6}{r['promotions']:>6}"
              f"{r['rel_rms_vs_resident']:>9.2e}{r['process_wall_s']:>7.1f}"
              f"{r['process_cpu_s']:>7.1f}")
    print("\n  * unconstrained reference (its budget holds every expert in bf16).  budget, peak: "
          "MiB; tok/s = tokens / sum of\n  step times; dec / pre = decode / prefill step time "
          "(ms; p99 of a handful of steps ~ the max); stall s =\n  time layers waited for "
          "routed experts, vs o-d = as % of on-demand's; loads (bf16 expert copies: demand +\n"
          "  prefetch), prefet(ches), overf(etches: prefetched, not routed), promo(tions to "
          "bf16); rel RMS = ||out - resident||\n  / ||resident|| over all steps; wall s = the "
          "whole process (load, bookkeeping outside the layer timers); CPU s = its CPU time,\n"
          "  every thread (FFN, copy and OpenMP workers, spinning included).")
    for f in info["failed_modes"]:
        print(f"  {f['mode']}: FAILED in all {f['attempts']} attempts: {f['error']}")
    for r in rows:
        if r["failed_attempts"]:
            print(f"  {r['mode']}: ran at attempt {len(r['failed_attempts']) + 1}; failed "
                  f"before: {'; '.join(r['failed_attempts'])}")
    print("\ntargets (papers) vs measured here:")
    if "expertflow_stall_fraction" in goals:
        f = goals["expertflow_stall_fraction"]
        print(f"  ExpertFlow: offload stall time = {fmt(None if f is None else 100 * f, '.2f')}% "
              f"of on-demand's (target < 0.1%): "
              f"{'MET' if goals['expertflow_target_met'] else 'NOT met'}")
    if "dynaexq_vs_offload" in goals:
        g = goals["dynaexq_vs_offload"]
        print(f"  DynaExq: throughput {fmt(g['throughput_tok_s'], '.2f')}x offload's overall, "
              f"{fmt(g['decode_tok_s'], '.2f')}x on decode steps, "
              f"{fmt(g['prefill_tok_s'], '.2f')}x on prefill steps (the large batches; target "
              f"1.4-2.7x): {'MET' if goals['dynaexq_target_met_large_batches'] else 'NOT met'}")
    for key, what in (("expertflow_stall_fraction", "ExpertFlow (offload vs on-demand)"),
                      ("dynaexq_vs_offload", "DynaExq (dynaexq vs offload)")):
        if key not in goals:
            print(f"  {what}: not computed, a mode did not run")
    print(f"\n{elapsed:.1f} s")


def plot(rows, plan, drift_at, failed, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = {"resident": "#444444", "static-lo": "#9467bd", "dynaexq": "#2ca02c",
              "offload": "#1f77b4", "on-demand": "#d62728"}
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6),
                             gridspec_kw={"width_ratios": [2.2, 1, 1]})
    ax = axes[0]
    steps = np.arange(len(plan))
    prefill = [s for s in steps if plan[s] == PREFILL]
    for r in rows:
        ms = np.array(r["per_step"]["ms"])
        label = r["mode"] + (" (unconstrained)" if r["mode"] == "resident" else "")
        ax.plot(steps, ms, marker="o", ms=3, lw=1.2, label=label, color=colors.get(r["mode"]))
        ax.plot(prefill, ms[prefill], ls="none", marker="s", ms=6, mfc="none",
                color=colors.get(r["mode"]))
    ax.axvline(drift_at - 0.5, color="k", ls=":", lw=1)
    ax.set_yscale("log")
    top = max(max(r["per_step"]["ms"]) for r in rows)
    ax.set_ylim(top=top * 6)  # head room for the legend above the curves
    ax.set_xlabel("step (squares: prefill; dotted: the hot experts drift)")
    ax.set_ylabel("step time, ms (log)")
    ax.set_title("per-step time (sum of layer times)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    names = [r["mode"] for r in rows]
    x = np.arange(len(rows))
    bar_colors = [colors.get(n) for n in names]
    axes[1].bar(x, [r["throughput_tok_s"] for r in rows], color=bar_colors)
    axes[1].set_title("throughput, tokens/s")
    axes[2].bar(x, [r["stall_seconds"] for r in rows], color=bar_colors)
    axes[2].set_title("stall seconds (waiting for experts)")
    for a in axes[1:]:
        a.set_xticks(x)
        a.set_xticklabels(names, rotation=30, ha="right")
        a.grid(alpha=0.3, axis="y")
    fig.suptitle("moe-exec expert memory modes at the same budget: measured on a CPU host "
                 "with an emulated host->device link (not GPU timings)"
                 + "".join(f"\n{f['mode']} FAILED: {f['error']}" for f in failed))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_json(path, rows, goals, info, elapsed):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({
            "what": "moe-exec expert memory modes (resident, static-lo, dynaexq, offload, "
                    "on-demand) on one checkpoint, one decode + prefill trace, one budget",
            "measured": "step times from each step's metrics.json (sum of the layers' "
                        "seconds.total), memory counters and budget peaks from its memory "
                        "object, output deviation from hidden.npy against the resident run",
            "emulated": "the host->device link: a copy thread sleeping to link.bandwidth, "
                        "chosen so one expert copy / one decode layer's time = "
                        "link.copy_ratio (as for a Qwen3-30B expert over PCIe 4.0 vs a GPU "
                        "MoE layer)",
            "timing_caveat": f"measured on a {info['machine']['nproc']}-core CPU host with an "
                             "emulated link: compares modes, not GPU timings",
            **info, "targets": goals, "rows": rows, "seconds": elapsed}, f, indent=1)
        f.write("\n")


# -------------------------------------------------------------------------------- main
def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    add_checkpoint_args(ap, hidden=512, intermediate=256, experts=64, top_k=8)
    ap.add_argument("--decode-steps", type=int, default=24)
    ap.add_argument("--decode-tokens", type=int, default=8)
    ap.add_argument("--prefill-steps", type=int, default=4)
    ap.add_argument("--prefill-tokens", type=int, default=256)
    ap.add_argument("--hot", default="0,1,2,3:32,33,34,35",
                    help="hot experts before and after the drift, ':'-separated")
    ap.add_argument("--skew", type=float, default=1.0,
                    help="mean length of the hot direction in units of sqrt(hidden)")
    ap.add_argument("--locality", type=float, default=0.8,
                    help="share of a decode token's random part that is its request's own "
                         "(persistent) direction, in [0, 1)")
    ap.add_argument("--budget-fraction", type=float, default=0.4,
                    help="budget of the constrained modes, a fraction of the bf16 experts")
    ap.add_argument("--lo", default="int4", choices=("int4", "int8"),
                    help="static-lo / dynaexq low-precision version")
    ap.add_argument("--update-steps", type=int, default=2, help="dynaexq's T_u in steps")
    ap.add_argument("--copy-ratio", type=float, default=GPU_EXPERT_BYTES / GPU_LINK / GPU_LAYER_S,
                    help="one expert's copy time / one decode layer's time (default: 9 MiB "
                         "over 25 GB/s vs 0.5 ms)")
    ap.add_argument("--link-bandwidth", type=float, default=None,
                    help="bytes/s of the emulated link (skips the calibration)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--retries", type=int, default=2,
                    help="rerun a mode whose run failed up to N times (failed attempts are "
                         "still reported and make the exit status 1)")
    ap.add_argument("--check", action="store_true",
                    help="--memory-check in every run (the store's invariants; slower)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "memory-modes.json"))
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "memory-modes.png"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    return ap.parse_args()


def invariant_errors(rows, info):
    """Failed runs, the budget and the exactness checks: a list of messages (empty when
    all hold)."""
    errors = [f"{f['mode']}: every attempt ({f['attempts']}) failed, the last with: "
              f"{f['error']}" for f in info["failed_modes"]]
    for r in rows:
        for i, reason in enumerate(r["failed_attempts"]):
            errors.append(f"{r['mode']}: attempt {i + 1} failed (a later one ran): {reason}")
        if r["peak"] > r["budget"]:
            errors.append(f"{r['mode']}: peak {r['peak']} bytes > budget {r['budget']}")
        if r["mode"] in EXACT and not r["identical_to_resident"]:
            errors.append(f"{r['mode']}: outputs differ from the resident run (relative RMS "
                          f"{r['rel_rms_vs_resident']:.3e}); bf16 experts must match exactly")
    return errors


def bench(args, work):
    exe = os.path.join(os.path.abspath(args.build), "bin", "moe-exec")
    check_exe(exe)
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown or "resident" not in modes:
        raise BenchError(f"--modes {args.modes!r}: choose among {', '.join(MODES)}, "
                         "resident included (it is the reference)")
    modes = ["resident"] + [m for m in modes if m != "resident"]
    if not 0 < args.budget_fraction < 1:
        raise BenchError("--budget-fraction must be in (0, 1)")

    model_dir = os.path.join(work, "model")
    sizes = dict(layers=args.layers, hidden=args.hidden, intermediate=args.intermediate,
                 experts=args.experts, top_k=args.top_k)
    config = make_checkpoint(args.arch, model_dir, seed=args.seed, dtype="bfloat16", **sizes)
    layers = len(ref.moe_layers(config))
    expert_bytes = 3 * args.hidden * args.intermediate * 2    # bf16 gate, up, down
    total_hi = layers * args.experts * expert_bytes
    budget = int(args.budget_fraction * total_hi)

    plan = step_plan(args)
    trace, hot_of = build_trace(model_dir, plan, args, np.random.default_rng(args.seed))
    npz = os.path.join(work, "trace.npz")
    np.savez(npz, **trace)

    # Calibration: this host's decode layer time (also warms the page cache).
    calib = os.path.join(work, "calibration")
    run_mode(exe, model_dir, npz, calib, "resident", total_hi, [], "calibration run")
    layer_s = decode_layer_seconds(read_run(calib, len(plan)), plan)
    link = args.link_bandwidth or expert_bytes / (args.copy_ratio * layer_s)
    print(f"  calibration: decode layer {1e3 * layer_s:.2f} ms -> link {link / 1e6:.1f} MB/s",
          flush=True)

    rows, failed, reference = [], [], None
    for mode in modes:
        out = os.path.join(work, mode)
        mode_budget = total_hi if mode == "resident" else budget
        try:
            process, failures = run_with_retries(
                args, f"--memory {mode}", exe, model_dir, npz, out, mode, mode_budget,
                mode_flags(mode, args, link, layer_s))
        except RunFailed as e:
            if mode == "resident":   # no reference, nothing to compare
                raise
            failed.append({"mode": mode, "attempts": 1 + args.retries, "error": e.reason})
            continue
        run = read_run(out, len(plan))
        if mode == "resident":
            reference = run
            skew = routing_skew(run, plan, hot_of)
        row = summarize(mode, mode_budget, run, plan, reference, process)
        row["failed_attempts"] = failures
        rows.append(row)
        print(f"  ran {mode} ({process.wall_s:.1f} s, {process.cpu_s:.1f} s CPU)", flush=True)
    info = {
        "model": dict(arch=args.arch, dtype="bfloat16", **sizes),
        "expert_bytes": expert_bytes, "total_hi": total_hi, "budget": budget,
        "budget_fraction": args.budget_fraction,
        "trace": {"decode_steps": args.decode_steps, "decode_tokens": args.decode_tokens,
                  "prefill_steps": args.prefill_steps, "prefill_tokens": args.prefill_tokens,
                  "phase_of_step": ["prefill" if p == PREFILL else "decode" for p in plan],
                  "hot": args.hot, "skew": args.skew, "drift_at": len(plan) // 2,
                  "seed": args.seed},
        "routing_skew": skew,
        "link": {"bandwidth": link, "given": args.link_bandwidth is not None,
                 "copy_ratio": args.copy_ratio, "layer_seconds": layer_s,
                 "expert_copy_seconds": expert_bytes / link,
                 "gpu_reference": {"expert_bytes": GPU_EXPERT_BYTES, "link": GPU_LINK,
                                   "layer_seconds": GPU_LAYER_S}},
        "settings": {"lo": args.lo, "update_steps": args.update_steps,
                     "offload_layer_time": layer_s, "memory_check": args.check},
        "failed_modes": failed,
        "machine": machine(),
    }
    return rows, plan, info


def main():
    args = parse_args()
    t0 = time.time()
    result = in_workdir("bench_memory", "bench-memory-", args.keep,
                        lambda work: bench(args, work))
    if result is None:
        return 1
    rows, plan, info = result
    elapsed = time.time() - t0
    goals = targets(rows)
    print_table(rows, goals, info, elapsed)
    if args.json:
        write_json(args.json, rows, goals, info, elapsed)
        print(f"wrote {args.json}")
    if args.plot:
        plot(rows, plan, info["trace"]["drift_at"], info["failed_modes"], args.plot)
        print(f"wrote {args.plot}")
    errors = invariant_errors(rows, info)
    for e in errors:
        print(f"bench_memory: error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
