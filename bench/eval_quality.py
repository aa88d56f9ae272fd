#!/usr/bin/env python3
"""Routing quality on the trained model (models/quality-moe, scripts/
train_quality_model.py): for each policy and knob setting, the held-out log-likelihood
change from the model's own routing next to the experts it activates and the top-k
mass it keeps (switchyard.trace.quality, transformers), and whether mass kept predicts
the log-likelihood change (Spearman rank correlation over the settings).

    .venv/bin/python bench/eval_quality.py [--json docs/quality-results.json]
        [--plot docs/quality.png] [--sequences 64] [--context 128] [--batch 8]

scripts/update-numbers.py renders docs/quality.md's table from the JSON (markdown()).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "models", "quality-moe")
# (policy, [knob settings]): the budgets each policy trades experts for quality with.
SWEEPS = [
    ("top_p", [{"p": p} for p in (0.5, 0.6, 0.7, 0.8, 0.9)]),
    ("oea", [{"k0": k0} for k0 in (1, 2, 3)] + [{"k0": 1, "max_rank": 8}]),
    ("xshare", [{"k0": 1, "budget": b} for b in (0, 2, 4, 8)]),
    ("capacity_topk", [{"capacity_factor": f} for f in (0.5, 1.0, 1.5)]),
    # Token Drop, and Expanded Drop with twice the model's k as candidates.
    ("capacity_drop", [{"capacity_factor": f} for f in (0.5, 1.0)]
     + [{"capacity_factor": f, "candidates": 8} for f in (0.5, 1.0)]),
]


def spearman(x, y):
    """Rank correlation of two equal-length lists (ties averaged)."""
    import numpy as np

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in set(v):   # ties share their mean rank
            same = [i for i, w in enumerate(v) if w == value]
            r[same] = np.mean(r[same])
        return r
    rx, ry = ranks(list(x)), ranks(list(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def markdown(report):
    """The table docs/quality.md shows (from the JSON only)."""
    native = report["native"]
    lines = [f"Model: `{report['model']}` ({report['tokens']} held-out "
             f"tokens, {report['sequences']} sequences of {report['context']}, "
             f"{report['batch']} per forward pass, each position's {report['batch']} tokens "
             "routed together as in batched decoding); the model's own routing: "
             f"{native['loglik_mean']:.3f} nats/token, perplexity "
             f"{native['perplexity']:.2f}, {native['experts_active_mean']:.2f} experts "
             "active per layer and decode step.", "",
             "| policy | knobs | experts active | mass kept | Δ log-lik (nats/token) | "
             "perplexity |", "|---|---|---:|---:|---:|---:|"]
    for row in report["rows"]:
        knobs = ", ".join(f"{k}={v}" for k, v in row["knobs"].items())
        lines.append(f"| {row['policy']} | {knobs} | {row['experts_active_mean']:.2f} | "
                     f"{row['mass_kept_mean']:.3f} | {row['delta_loglik_mean']:+.4f} | "
                     f"{row['perplexity']:.2f} |")
    lines += ["", f"Mass kept against Δ log-likelihood over the {len(report['rows'])} "
              f"settings: Spearman ρ = {report['spearman_mass_vs_delta']:.2f}; experts "
              f"active against Δ log-likelihood: ρ = "
              f"{report['spearman_experts_vs_delta']:.2f}."]
    return "\n".join(lines)


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for policy in dict.fromkeys(r["policy"] for r in report["rows"]):
        rows = sorted((r for r in report["rows"] if r["policy"] == policy),
                      key=lambda r: r["experts_active_mean"])
        ax.plot([r["experts_active_mean"] for r in rows],
                [r["delta_loglik_mean"] for r in rows], "o-", label=policy)
    ax.axhline(0, color="grey", lw=0.8)
    ax.plot([report["native"]["experts_active_mean"]], [0], "k*", ms=10, label="model's own")
    ax.set_xlabel("experts active per layer and decode step (batch 8)")
    ax.set_ylabel("Δ held-out log-likelihood (nats/token)")
    ax.set_title("Routing quality on the trained MoE (models/quality-moe)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "quality-results.json"))
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "quality.png"))
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    from switchyard.trace.quality import held_out_text, quality
    text = held_out_text()
    start = time.time()
    rows, native = [], None
    for policy, settings in SWEEPS:
        report = quality(MODEL, policy, settings, text, args.context, args.sequences,
                         args.batch, "hf", "decode")
        if native is None:
            native = report["native"]
            layers = native["layers"].values()
            native["experts_active_mean"] = sum(m["experts_active_mean"] for m in layers) \
                / len(layers)
        for result in report["results"]:
            rows.append({"policy": policy, **{k: result[k] for k in (
                "knobs", "experts_active_mean", "mass_kept_mean", "delta_loglik_mean",
                "loglik_mean", "perplexity")}})
            print(f"{policy} {result['knobs']}: experts {result['experts_active_mean']:.2f}, "
                  f"mass {result['mass_kept_mean']:.3f}, delta "
                  f"{result['delta_loglik_mean']:+.4f}", flush=True)
    out = {"model": MODEL, "engine": "hf", "routing": "decode", "sequences": args.sequences,
           "context": args.context, "batch": args.batch, "tokens": report["tokens"],
           "native": native, "rows": rows,
           "spearman_mass_vs_delta": spearman([r["mass_kept_mean"] for r in rows],
                                              [r["delta_loglik_mean"] for r in rows]),
           "spearman_experts_vs_delta": spearman([r["experts_active_mean"] for r in rows],
                                                 [r["delta_loglik_mean"] for r in rows]),
           "command": "bench/eval_quality.py", "seconds": round(time.time() - start)}
    out["model"] = os.path.relpath(MODEL, ROOT)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    plot(out, args.plot)
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
