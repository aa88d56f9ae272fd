"""moe-eval: evaluate a routing policy offline on a trace (docs/traces.md).

    moe-eval TRACE --policy P [--set k=v ...] [--sweep knob=a:b[:step] ...] [--ranks N]
             [--groups G] [--shape name=value ...] --json OUT [--plots DIR]

Writes the metrics of switchyard.trace.evaluate as JSON to OUT; with --plots, DIR/
pareto.png: experts_active_mean against mass_kept_mean (phase "all", mean over layers)
for every knob setting, the Pareto front drawn through the settings no other beats on
both. Exit status 0, or 2 with a message for bad arguments or a malformed trace."""
from __future__ import annotations

import argparse
import json
import os
import sys

from .._errors import InputError
from .._switchyard import SwitchyardError
from .evaluate import ALL, _number, evaluate


def _pairs(items, what):
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"{what} '{item}': expected name=value")
        try:
            out[name] = _number(value)
        except ValueError:
            out[name] = value
    return out


def setting_points(report):
    """(knobs, experts_active_mean, mass_kept_mean) per result: phase "all", mean over
    layers."""
    points = []
    for result in report["results"]:
        layers = [phases[ALL] for phases in result["layers"].values()]
        active = sum(m["experts_active_mean"] for m in layers) / len(layers)
        mass = sum(m["mass_kept_mean"] for m in layers) / len(layers)
        points.append((result["knobs"], active, mass))
    return points


def pareto_front(points):
    """The points no other has both fewer active experts and more mass kept than (ties:
    no better on one and worse on the other), sorted by active experts."""
    front = [p for p in points
             if not any((q[1] <= p[1] and q[2] >= p[2]) and (q[1] < p[1] or q[2] > p[2])
                        for q in points)]
    return sorted(front, key=lambda p: (p[1], p[2]))


def write_plots(report, directory):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    points = setting_points(report)
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter([p[1] for p in points], [p[2] for p in points], color="0.6", label="settings")
    ax.plot([p[1] for p in front], [p[2] for p in front], "o-", color="C0",
            label="Pareto front")
    for knobs, x, y in front:
        if knobs:
            ax.annotate(",".join(f"{k}={v}" for k, v in knobs.items()), (x, y),
                        textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlabel("distinct experts per forward pass (mean over layers)")
    ax.set_ylabel("softmax mass kept per token")
    ax.set_title(f"{os.path.basename(str(report['policy']))} on {report['trace']}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    path = os.path.join(directory, "pareto.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="moe-eval", description="Evaluate a routing policy offline on a routing trace "
        "(docs/traces.md).")
    parser.add_argument("trace", help="the trace directory")
    parser.add_argument("--policy", required=True,
                        help="a shipped policy's name or a .mlir file")
    parser.add_argument("--set", action="append", metavar="KNOB=VALUE",
                        help="a knob value (repeatable)")
    parser.add_argument("--sweep", action="append", metavar="KNOB=A:B[:STEP]",
                        help="sweep a knob over A..B (repeatable: every combination)")
    parser.add_argument("--ranks", type=int, default=1,
                        help="expert-parallel ranks for ep_imbalance (default 1)")
    parser.add_argument("--groups", type=int, help="expert groups (default: meta.json's)")
    parser.add_argument("--shape", action="append", metavar="NAME=VALUE",
                        help="another shape parameter of the policy (e.g. topk_groups=2)")
    parser.add_argument("--json", required=True, metavar="OUT", help="the report to write")
    parser.add_argument("--plots", metavar="DIR", help="write DIR/pareto.png")
    args = parser.parse_args(argv)
    try:
        shape = _pairs(args.shape, "--shape")
        if args.groups is not None:
            shape["groups"] = args.groups
        report = evaluate(args.trace, args.policy, knobs=_pairs(args.set, "--set"),
                          sweep=args.sweep, ranks=args.ranks, **shape)
    except SwitchyardError as e:
        print(f"moe-eval: {e}", file=sys.stderr)
        return 2
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    for knobs, active, mass in setting_points(report):
        label = " ".join(f"{k}={v}" for k, v in knobs.items()) or "(defaults)"
        print(f"{label}: experts_active_mean {active:.3f}, mass_kept_mean {mass:.4f}")
    if args.plots:
        print(f"wrote {write_plots(report, args.plots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
