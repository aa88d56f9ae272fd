#!/usr/bin/env python3
"""The expert-parallel policies of this year, compiled and run on the host, each beside
the convention it replaces, on the same routing:

- METRO (policies/metro.mlir): the experts each GPU activates when every activated
  expert runs on one replica chosen by METRO's balance, against EPLB's round robin
  (token t of expert e on replica t mod replicas[e], moe.remap_physical's default) -
  Qwen3-30B-A3B's shape (128 experts, top-8) on 8 GPUs with 16 redundant slots holding
  the 16 hottest experts' second copies; decode batches of skewed routing.
- LLEP (policies/llep.mlir): the GPUs' token loads under the least-loaded plan against
  the native placement (plain EP), and the expert weights it moves - 128 experts on 8
  GPUs, per-expert loads of a skewed batch of 4,096 tokens x top-8.

    .venv/bin/python bench/bench_ep_policies.py [--json docs/ep-policies.json]

scripts/update-numbers.py renders docs/results.md's table from the JSON (markdown()).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
E, K, GPUS, SLOTS = 128, 8, 8, 144
BATCHES = (8, 16, 64, 256)
TRIALS = 20


def skew(rng):
    """A fixed per-expert popularity (hot experts), as real routers have."""
    return (2.5 * np.exp(-np.arange(E) / 8.0))[rng.permutation(E)]


def replicated_placement(hot, rng):
    """log2phy [E, 2]: every expert on a random primary slot, the 16 hottest with a
    second copy on the spare slots (what EPLB's redundant experts hold)."""
    table = np.full((E, 2), -1, np.int32)
    table[:, 0] = rng.permutation(SLOTS)[:E]
    spare = sorted(set(range(SLOTS)) - set(table[:, 0].tolist()))
    for i, e in enumerate(np.argsort(-hot)[:SLOTS - E]):
        table[e, 1] = spare[i]
    return table


def round_robin_experts(ids, table):
    """Experts each GPU activates under EPLB's round robin over replicas."""
    per_gpu = SLOTS // GPUS
    replicas = (table >= 0).sum(axis=1)
    active = [set() for _ in range(GPUS)]
    for t, row in enumerate(ids):
        for e in row[row >= 0]:
            active[int(table[e, t % replicas[e]]) // per_gpu].add(int(e))
    return np.array([len(a) for a in active])


def bench_metro(switchyard, rng):
    router = switchyard.compile(os.path.join(ROOT, "policies", "metro.mlir"), experts=E,
                                top_k=K, devices=GPUS, slots=SLOTS)
    hot = skew(rng)
    table = replicated_placement(hot, rng)
    rows = []
    for tokens in BATCHES:
        rr_max, metro_max, rr_sum, metro_sum = [], [], [], []
        for _ in range(TRIALS):
            logits = (rng.standard_normal((tokens, E)) + hot).astype(np.float32)
            out = router(logits=logits, placement=table)
            per_gpu = np.asarray(out["device_experts"])
            rr = round_robin_experts(np.asarray(out["topk_ids"]), table)
            rr_max.append(rr.max())
            metro_max.append(per_gpu.max())
            rr_sum.append(rr.sum())
            metro_sum.append(per_gpu.sum())
        rows.append({"tokens": tokens, "round_robin_max": float(np.mean(rr_max)),
                     "metro_max": float(np.mean(metro_max)),
                     "round_robin_total": float(np.mean(rr_sum)),
                     "metro_total": float(np.mean(metro_sum))})
        print(f"METRO T={tokens}: max experts per GPU {rows[-1]['round_robin_max']:.2f} "
              f"(round robin) -> {rows[-1]['metro_max']:.2f}", flush=True)
    return rows


def bench_llep(switchyard, rng):
    rule = switchyard.compile(os.path.join(ROOT, "policies", "llep.mlir"), experts=E,
                              devices=GPUS)
    rows = []
    for label, knobs in (("defaults", {}),
                         ("always, chunks >= 64", {"threshold": 0.0, "min_chunk": 64})):
        before, after, moved = [], [], []
        for _ in range(TRIALS):
            hot = skew(rng)
            p = np.exp(hot - hot.max())
            loads = rng.multinomial(4096 * K, p / p.sum()).astype(np.int32)
            out = rule(loads=loads, knobs=knobs)
            before.append(float(np.asarray(out["imbalance_before"])[0]))
            after.append(float(np.asarray(out["imbalance_after"])[0]))
            moved.append(int(np.asarray(out["weight_transfers"])[0]))
        rows.append({"setting": label, "knobs": knobs,
                     "imbalance_before": float(np.mean(before)),
                     "imbalance_after": float(np.mean(after)),
                     "weight_transfers": float(np.mean(moved))})
        print(f"LLEP {label}: imbalance {rows[-1]['imbalance_before']:.2f} -> "
              f"{rows[-1]['imbalance_after']:.2f}, {rows[-1]['weight_transfers']:.1f} "
              "experts' weights moved", flush=True)
    return rows


def markdown(report):
    """The tables docs/results.md shows (from the JSON only)."""
    lines = [f"METRO at Qwen3-30B-A3B's shape ({E} experts, top-{K}) on {GPUS} GPUs with "
             f"{SLOTS - E} redundant slots, skewed routing, mean of {report['trials']} "
             "batches: experts activated per GPU (the most loaded GPU's, and all GPUs'), "
             "EPLB's round robin over replicas against METRO's one replica per expert:", "",
             "| batch | max per GPU, round robin | max per GPU, METRO | all GPUs, round robin "
             "| all GPUs, METRO |", "|---:|---:|---:|---:|---:|"]
    for r in report["metro"]:
        lines.append(f"| {r['tokens']} | {r['round_robin_max']:.2f} | {r['metro_max']:.2f} "
                     f"({r['metro_max'] / r['round_robin_max']:.2f}x) | "
                     f"{r['round_robin_total']:.1f} | {r['metro_total']:.1f} |")
    lines += ["", f"LLEP on {E} experts and {GPUS} GPUs, per-expert loads of a skewed batch "
              f"of 4,096 tokens x top-{K}, mean of {report['trials']} batches: the GPUs' "
              "imbalance (max / mean tokens) under plain EP and under the plan, and the "
              "experts whose weights the plan moves:", "",
              "| setting | imbalance, plain EP | imbalance, LLEP | weights moved |",
              "|---|---:|---:|---:|"]
    for r in report["llep"]:
        lines.append(f"| {r['setting']} | {r['imbalance_before']:.2f} | "
                     f"{r['imbalance_after']:.2f} | {r['weight_transfers']:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "ep-policies.json"))
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    import switchyard
    rng = np.random.default_rng(args.seed)
    start = time.time()
    out = {"trials": TRIALS, "metro": bench_metro(switchyard, rng),
           "llep": bench_llep(switchyard, rng), "command": "bench/bench_ep_policies.py",
           "seconds": round(time.time() - start)}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
