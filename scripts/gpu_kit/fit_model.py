#!/usr/bin/env python3
"""Fits the launch cost model's constants (lib/Conversion/MoeToGPU/LaunchCostModel.h:
L launch latency, c cycles per warp instruction of the token work, cB cycles per warp
instruction of the whole-batch phases) to the kit's measured times per call, and prints
them with each router's measured / modeled ratio. The model's inputs per router (I, C,
W, resident CTAs, B1(T), B2(T)) and the launch geometry come from the packed launch
metadata; the hardware limits are sm_90's.

    fit_model.py --kit KIT RESULTS.json [--inputs-kit KIT2] [--json OUT]

--inputs-kit takes the model's inputs from another pack (the same routers compiled by a
newer compiler) while the geometry stays the measured kit's.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import launch_metadata, load_kit, size_class  # noqa: E402

CLOCK_GHZ, SMS, ISSUE = 1.755, 132, 4


def interp(points, tokens):
    xs = [p["tokens"] for p in points]
    ys = [p["instructions"] for p in points]
    if tokens >= xs[-1]:
        return ys[-1] + (ys[-1] - ys[-2]) * (tokens - xs[-1]) / (xs[-1] - xs[-2])
    return float(np.interp(tokens, xs, ys))


def modeled_us(params, model, klass, tokens, per_cta):
    launch, c, cb = params
    w, instr = model["warps"], model["token_instructions"]
    resident = model["resident_ctas_per_sm"]
    f = CLOCK_GHZ * 1e3
    if klass == "grid":
        blocks = min(math.ceil(tokens / w), SMS * resident)
        return launch + math.ceil(tokens / (blocks * w)) * instr * c / f
    if klass == "one":
        return launch + (math.ceil(tokens / w) * instr * c
                         + interp(model["batch_instructions_one_cta"], tokens) * cb) / f
    ctas = math.ceil(tokens / per_cta)
    waves = math.ceil(ctas / (SMS * resident))
    sharing = min(resident, math.ceil(ctas / SMS))
    per_token = math.ceil(per_cta / w) * instr
    wave = max(per_token * c, sharing * w * per_token / ISSUE)
    return 2 * launch + (waves * wave
                         + math.ceil(ctas * model["combine_values"] / (32 * w)) * c
                         + interp(model["batch_instructions_pair"], tokens) * cb) / f


def nelder_mead(f, x0, steps=400):
    """Minimises f over log-parameters (all constants positive)."""
    n = len(x0)
    simplex = [np.log(x0)] + [np.log(x0) + np.eye(n)[i] * 0.5 for i in range(n)]
    values = [f(np.exp(s)) for s in simplex]
    for _ in range(steps):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(np.exp(reflected))
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(np.exp(expanded))
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(np.exp(contracted))
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (s - simplex[0]) for s in simplex]
                values = [f(np.exp(s)) for s in simplex]
    best = int(np.argmin(values))
    return np.exp(simplex[best]), values[best]


def samples(kit, inputs_kit, results):
    bench = results["steps"]["bench"]["results"]["rows"]
    routers = {r["variant"]: r for r in load_kit(kit)["routers"]}
    models = {r["variant"]: launch_metadata(inputs_kit, r)["launch_model"]
              for r in load_kit(inputs_kit)["routers"]}
    rows = []
    for row in bench:
        if "ours_us" not in row or row["variant"] not in routers:
            continue
        meta = launch_metadata(kit, routers[row["variant"]])
        klass = size_class(meta, row["tokens"])
        # (the cooperative kernel does the pair's work: modeled as the pair)
        name = "grid" if klass["name"] == "grid" else \
            "one" if klass["name"] == "decode" else "pair"
        per_cta = next((k.get("tokens_per_cta") for k in meta["kernels"]
                        if k.get("tokens_per_cta")), None)
        model = models.get(row["variant"])
        if not model or "batch_instructions_pair" not in model:
            continue
        rows.append((row["variant"], row["tokens"], name, per_cta, model, row["ours_us"]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--kit", required=True)
    ap.add_argument("--inputs-kit")
    ap.add_argument("--json")
    args = ap.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    rows = samples(args.kit, args.inputs_kit or args.kit, results)
    if not rows:
        print("no benchmark rows with the model's inputs (pack the kit with this compiler)")
        return 1

    # L is the measured empty-kernel time (the launch itself); c and cB are fitted.
    launch = results["steps"]["bench"]["results"]["empty_kernel_us"]

    def loss(p):
        q = (launch, p[0], p[1])
        return sum((math.log(modeled_us(q, m, k, t, pc)) - math.log(us)) ** 2
                   for _, t, k, pc, m, us in rows) / len(rows)

    start = np.array([20.0, 60.0])
    print(f"before: L={launch:.2f} us (measured), c={start[0]:.1f}, cB={start[1]:.1f}: "
          f"rms log error {math.sqrt(loss(start)):.3f}")
    fitted, value = nelder_mead(loss, start)
    best = np.array([launch, fitted[0], fitted[1]])
    print(f"fitted: L={best[0]:.2f} us, c={best[1]:.1f} cycles/instr, "
          f"cB={best[2]:.1f} cycles/instr (whole-batch phases): rms log error "
          f"{math.sqrt(value):.3f} over {len(rows)} measurements")
    out = {"launch_us": best[0], "cycles_per_instruction": best[1],
           "batch_cycles_per_instruction": best[2], "rms_log_error": math.sqrt(value),
           "rows": []}
    print(f"{'router':22} {'T':>5} {'class':>5} {'measured':>9} {'modeled':>9} {'ratio':>6}")
    for variant, t, k, pc, m, us in rows:
        mod = modeled_us(best, m, k, t, pc)
        out["rows"].append({"variant": variant, "tokens": t, "measured_us": us,
                            "modeled_us": mod})
        print(f"{variant:22} {t:>5} {k:>5} {us:9.1f} {mod:9.1f} {us / mod:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
