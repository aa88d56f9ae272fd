"""moe-eval: evaluate a routing policy offline on a trace (docs/traces.md).

    moe-eval TRACE --policy P [--set k=v ...] [--sweep knob=a:b[:step] ...]
             [--tune KNOB[=a:b[:step]] --target-mass 0.9 [--objective experts|modeled-time]
              [--knobs-out knobs.json]]
             [--ranks N] [--balance home,eplb,libra] [--balance-window S] [--redundant R]
             [--balance-set k=v ...]
             [--hardware h100,h200,a100,this-cpu] [--model CONFIG] [--batch-sizes 1,8,..]
             [--memory dynaexq,expertflow --cache-experts N] [--memory-set k=v ...]
             [--groups G] [--shape name=value ...] [--json OUT] [--plots DIR]

Writes the metrics of switchyard.trace.evaluate as JSON to OUT; with --plots, in DIR:
pareto.png (experts_active_mean against mass_kept_mean, phase "all", mean over layers,
for every knob setting, the Pareto front drawn through the settings no other beats on
both), imbalance.png with --ranks > 1 (EP imbalance per layer under each balancing
rule, first setting) and speedup.png with --batch-sizes (modeled speedup over the
model's own routing against the batch size, per hardware profile and setting).

With --tune, the knob is tuned per layer instead (switchyard.trace.tune): per MoE layer
the value with the fewest experts active (or the least modeled MoE time on the first
--hardware profile) that keeps --target-mass of the model's own top-k mass, next to the
best single value for all layers; --json writes that report and --knobs-out a knobs
file ({"KNOB": [one value per MoE layer]}) the vLLM plugin's SWITCHYARD_KNOBS_FILE
reads unchanged. Exit status 0, or 2 with a message for bad arguments or a malformed
trace."""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from .._errors import CompileWarning, InputError
from .._switchyard import SwitchyardError
from .evaluate import ALL, _number, evaluate


def _pairs(items, what):
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"{what} '{item}': expected name=value")
        try:   # a,b,c: one value per MoE layer (the trace's layer numbers index it)
            out[name] = ([_number(v) for v in value.split(",")] if "," in value
                         else _number(value))
        except ValueError:
            out[name] = value
    return out


def _phase_metrics(result, phase):
    """The layers' metrics of `phase` (layers without tokens of the phase left out)."""
    return [phases[phase] for phases in result["layers"].values() if phase in phases]


def setting_points(report, phase=ALL):
    """(knobs, experts_active_mean, mass_kept_mean) per result: mean over layers."""
    points = []
    for result in report["results"]:
        layers = _phase_metrics(result, phase)
        if not layers:
            raise InputError(f"--phase {phase}: the trace has no {phase} tokens")
        active = sum(m["experts_active_mean"] for m in layers) / len(layers)
        mass = sum(m["mass_kept_mean"] for m in layers) / len(layers)
        points.append((result["knobs"], active, mass))
    return points


def model_point(report, phase=ALL):
    """(model_experts_active_mean, model_mass_kept_mean) averaged over the layers with the
    model's own ids, or None."""
    layers = [m for m in _phase_metrics(report["results"][0], phase)
              if "model_experts_active_mean" in m]
    if not layers:
        return None
    return (sum(m["model_experts_active_mean"] for m in layers) / len(layers),
            sum(m["model_mass_kept_mean"] for m in layers) / len(layers))


SUMMARY_KEYS = ("model_experts_active_mean", "model_mass_kept_mean", "mass_kept_relative",
                "ep_imbalance", "ep_imbalance_eplb", "ep_imbalance_libra",
                "dynaexq_hi_hit_rate", "expertflow_hit_rate", "expertflow_stall_ms_mean")


def layer_means(result, phase=ALL, ranks=1):
    """The phase's metrics averaged over layers: SUMMARY_KEYS (imbalance only with
    ranks > 1) and modeled_speedup per profile (layers without the value left out)."""
    phases = _phase_metrics(result, phase)
    out = {}
    for key in SUMMARY_KEYS:
        if key.startswith("ep_imbalance") and ranks <= 1:
            continue
        values = [m[key] for m in phases if m.get(key) is not None]
        if values:
            out[key] = sum(values) / len(values)
    # a layer without the model's own ids (moe-exec's no_ids_layers) has no speedup
    speedups = [m.get("modeled_speedup") or {} for m in phases]
    for name in dict.fromkeys(name for s in speedups for name in s):
        values = [s[name] for s in speedups if s.get(name) is not None]
        if values:
            out[f"modeled_speedup_{name}"] = sum(values) / len(values)
    return out


def pareto_front(points):
    """The points no other has both fewer active experts and more mass kept than (ties:
    no better on one and worse on the other), sorted by active experts."""
    front = [p for p in points
             if not any((q[1] <= p[1] and q[2] >= p[2]) and (q[1] < p[1] or q[2] > p[2])
                        for q in points)]
    return sorted(front, key=lambda p: (p[1], p[2]))


def write_plots(report, directory, phase=ALL):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    points = setting_points(report, phase)
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot([p[1] for p in front], [p[2] for p in front], "o-", color="C0",
            label="Pareto front", zorder=1)
    ax.scatter([p[1] for p in points], [p[2] for p in points], color="0.5", s=14,
               label="settings", zorder=2)
    model = model_point(report, phase)
    if model is not None:
        ax.scatter([model[0]], [model[1]], marker="*", s=140, color="C3",
                   label="the model's own top-k", zorder=3)
    for knobs, x, y in front:
        if knobs:
            ax.annotate(",".join(f"{k}={v}" for k, v in knobs.items()), (x, y),
                        textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlabel(f"distinct experts per forward pass (mean over layers; {phase} tokens)")
    ax.set_ylabel("softmax mass kept per token")
    trace = os.path.basename(os.path.normpath(str(report["trace"]))) or str(report["trace"])
    ax.set_title(f"{os.path.basename(str(report['policy']))} on {trace}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    paths = [_save(fig, directory, "pareto.png")]
    first = report["results"][0]
    layers = sorted(first["layers"], key=int)
    rules = [(key, label) for key, label in (("ep_imbalance", "home placement"),
                                             ("ep_imbalance_eplb", "EPLB (from history)"),
                                             ("ep_imbalance_libra", "Libra (oracle lookahead)"))
             if first["layers"][layers[0]][ALL].get(key) is not None]
    if report["ranks"] > 1 and rules:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in rules:
            ax.plot([int(x) for x in layers], [first["layers"][x][ALL][key] for x in layers],
                    "o-", label=label)
        ax.axhline(1.0, color="0.7", lw=0.8)
        ax.set_xticks([int(x) for x in layers])
        ax.set_xlabel("MoE layer")
        ax.set_ylabel(f"max / mean rank load ({report['ranks']} ranks)")
        ax.set_title(f"EP imbalance, {_label(first['knobs'])}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        paths.append(_save(fig, directory, "imbalance.png"))
    curves = [r for r in report["results"] if "speedup_vs_batch" in r]
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, result in enumerate(curves[:8]):
            curve = result["speedup_vs_batch"]
            for j, (name, values) in enumerate(curve["speedup"].items()):
                ax.plot(curve["batch_sizes"], values, ["o-", "s--", "^:", "d-."][j % 4],
                        color=f"C{i}", label=f"{_label(result['knobs'])}, {name}")
        ax.axhline(1.0, color="0.7", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"batch size ({curves[0]['speedup_vs_batch']['tokens']} tokens)")
        ax.set_ylabel("modeled speedup over the model's top-k")
        ax.grid(True, alpha=0.3)
        if len(ax.get_lines()) > 7:   # a line per setting and profile: beside the axes
            fig.set_size_inches(9, 4)
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        else:
            ax.legend(fontsize=7)
        paths.append(_save(fig, directory, "speedup.png"))
    return paths


def _label(knobs):
    return ",".join(f"{k}={v}" for k, v in knobs.items()) or "defaults"


def _save(fig, directory, name):
    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="moe-eval", description="Evaluate a routing policy offline on a routing trace "
        "(docs/traces.md).")
    parser.add_argument("trace", nargs="?", help="the trace directory (not with --quality)")
    parser.add_argument("--policy", required=True,
                        help="a shipped policy's name or a .mlir file")
    parser.add_argument("--set", action="append", metavar="KNOB=VALUE",
                        help="a knob value (repeatable); A,B,C gives one value per MoE "
                             "layer, indexed by the trace's layer numbers")
    parser.add_argument("--sweep", action="append", metavar="KNOB=A:B[:STEP]",
                        help="sweep a knob over A..B (repeatable: every combination)")
    parser.add_argument("--ranks", type=int, default=1,
                        help="expert-parallel ranks for ep_imbalance (default 1)")
    parser.add_argument("--balance", default="home,eplb,libra",
                        help="balancing rules at --ranks > 1: home, eplb, libra "
                        "(default: all three)")
    parser.add_argument("--balance-window", type=int, default=4, metavar="STEPS",
                        help="EPLB: replan every STEPS steps from the last STEPS (default 4)")
    parser.add_argument("--redundant", type=int,
                        help="EPLB: redundant expert slots (default: one per rank)")
    parser.add_argument("--balance-set", action="append", metavar="KNOB=VALUE",
                        help="a knob of the balancing rules (Libra: extra_experts, alpha, "
                        "epsilon)")
    parser.add_argument("--hardware", metavar="PROFILES",
                        help="bytes read and modeled layer time on these profiles "
                        "(h100, h200, a100, this-cpu; comma-separated)")
    parser.add_argument("--model", metavar="CONFIG",
                        help="a config.json giving the experts' sizes (default: the "
                        "trace's meta.json)")
    parser.add_argument("--expert-dtype", help="the experts' weight dtype (default: the "
                        "config's torch_dtype, else bfloat16)")
    parser.add_argument("--batch-sizes", metavar="B1,B2,..",
                        help="with --hardware: modeled speedup over the model's top-k with "
                        "the trace's tokens regrouped into batches of these sizes")
    parser.add_argument("--memory", metavar="RULES",
                        help="replay expert memory rules under --cache-experts: dynaexq, "
                        "expertflow (comma-separated)")
    parser.add_argument("--cache-experts", type=int, metavar="N",
                        help="experts per layer that fit in fast memory (for --memory)")
    parser.add_argument("--memory-interval", type=int, default=1, metavar="STEPS",
                        help="DynaExq: steps per hotness update (default 1)")
    parser.add_argument("--memory-set", action="append", metavar="KNOB=VALUE",
                        help="a knob of the memory rules (e.g. bandwidth=2.5e10)")
    parser.add_argument("--groups", type=int,
                        help="expert groups (default: meta.json's, where the policy has "
                             "groups); a policy without groups is an error")
    parser.add_argument("--shape", action="append", metavar="NAME=VALUE",
                        help="another shape parameter of the policy (e.g. topk_groups=2); "
                             "one the policy does not have is an error")
    parser.add_argument("--tune", metavar="KNOB[=A:B[:STEP]]",
                        help="tune KNOB per layer (an integer knob's values: its rule's "
                             "range, else A..B)")
    parser.add_argument("--target-mass", type=float, default=0.90,
                        help="--tune: the share of the model's top-k mass each layer keeps "
                             "(default 0.90)")
    parser.add_argument("--objective", default="experts",
                        choices=["experts", "modeled-time"],
                        help="--tune: what to minimise per layer (modeled-time: with "
                             "--hardware)")
    parser.add_argument("--knobs-out", metavar="FILE",
                        help="--tune: write the per-layer knobs as a knobs file")
    parser.add_argument("--json", metavar="OUT",
                        help="the report to write (--json, --plots or both)")
    parser.add_argument("--plots", metavar="DIR",
                        help="write DIR/pareto.png, and imbalance.png (--ranks > 1) and "
                        "speedup.png (--batch-sizes)")
    parser.add_argument("--phase", default=ALL, choices=[ALL, "prefill", "decode", "verify"],
                        help="the phase the printed summary and the plots show (default all)")
    parser.add_argument("--quality", metavar="MODEL_DIR",
                        help="measure on a Hugging Face model instead of a trace: held-out "
                        "log-likelihood per setting (--set / --sweep) next to the model's "
                        "own routing, experts active and mass kept (docs/quality.md)")
    parser.add_argument("--text", metavar="FILE", help="--quality: the text to evaluate on")
    parser.add_argument("--context", type=int, default=128,
                        help="--quality: tokens per sequence (default 128)")
    parser.add_argument("--sequences", type=int, default=64,
                        help="--quality: sequences of the text evaluated (default 64)")
    parser.add_argument("--quality-batch", type=int, default=8, metavar="B",
                        help="--quality: sequences per forward pass (default 8)")
    parser.add_argument("--routing-batch", default=None, choices=["decode", "prefill"],
                        help="--quality: what a batch-aware policy routes together: each "
                        "position's tokens across the batch, as decoding does (default with "
                        "hf), or the whole forward pass, as prefill does (vllm)")
    parser.add_argument("--engine", default="hf", choices=["hf", "vllm"],
                        help="--quality: transformers (switchyard.hf) or vLLM with the "
                        "plugin (vLLM's environment)")
    args = parser.parse_args(argv)
    if args.quality:
        if args.trace:
            parser.error("--quality measures a model: give no trace")
        return _quality_main(args)
    if not args.trace:
        parser.error("give a trace directory, or --quality MODEL_DIR")
    if args.tune:
        return _tune_main(args)
    if args.knobs_out:
        parser.error("--knobs-out writes what --tune finds: give --tune KNOB")
    if not args.json and not args.plots:
        parser.error("nothing to write: give --json OUT, --plots DIR or both")
    try:
        _check_outputs(args.json, args.plots)
        shape = _shape(args)
        with warnings.catch_warnings():
            # The compiler's warnings as the tool's own lines, not Python's format.
            warnings.showwarning = _show_warning
            report = evaluate(
                args.trace, args.policy, knobs=_pairs(args.set, "--set"), sweep=args.sweep,
                ranks=args.ranks, balance=args.balance, balance_window=args.balance_window,
                redundant=args.redundant,
                balance_knobs=_pairs(args.balance_set, "--balance-set"),
                hardware=args.hardware, model=args.model,
                expert_dtype=args.expert_dtype, batch_sizes=args.batch_sizes,
                memory=args.memory, cache_experts=args.cache_experts,
                memory_interval=args.memory_interval,
                memory_knobs=_pairs(args.memory_set, "--memory-set"), **shape)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
                f.write("\n")
        points = setting_points(report, args.phase)
        for result, (knobs, active, mass) in zip(report["results"], points):
            label = " ".join(f"{k}={v}" for k, v in knobs.items()) or "(defaults)"
            extra = "".join(f", {name} {value:.3f}" for name, value
                            in layer_means(result, args.phase, report["ranks"]).items())
            print(f"{label}: experts_active_mean {active:.3f}, mass_kept_mean {mass:.4f}"
                  f"{extra}")
        if args.plots:
            for path in write_plots(report, args.plots, args.phase):
                print(f"wrote {path}")
    except (SwitchyardError, OSError) as e:
        print(f"moe-eval: {e}", file=sys.stderr)
        return 2
    return 0


def _quality_main(args) -> int:
    """moe-eval --quality: the log-likelihood table, printed and written as asked."""
    from .evaluate import parse_sweep
    from .quality import quality
    if not args.text:
        print("moe-eval: --quality: give the text to evaluate on (--text FILE)",
              file=sys.stderr)
        return 2
    try:
        _check_outputs(args.json, None)
        with open(args.text, encoding="utf-8", errors="replace") as f:
            text = f.read()
        base = _pairs(args.set, "--set")
        settings = [dict(base)]
        for sweep in args.sweep or []:
            knob, values = parse_sweep(sweep)
            settings = [dict(s, **{knob: v}) for s in settings for v in values]
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            routing = args.routing_batch or ("decode" if args.engine == "hf" else "prefill")
            report = quality(args.quality, args.policy, settings, text, args.context,
                             args.sequences, args.quality_batch, args.engine, routing)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
                f.write("\n")
        native = report["native"]
        print(f"model's own routing: loglik {native['loglik_mean']:.4f} nats/token, "
              f"perplexity {native['perplexity']:.3f} ({report['tokens']} tokens)")
        for result in report["results"]:
            label = " ".join(f"{k}={v}" for k, v in result["knobs"].items()) or "(defaults)"
            extra = (f", experts_active_mean {result['experts_active_mean']:.3f}, "
                     f"mass_kept_mean {result['mass_kept_mean']:.4f}"
                     if "experts_active_mean" in result else "")
            print(f"{label}: delta loglik {result['delta_loglik_mean']:+.4f} nats/token, "
                  f"perplexity {result['perplexity']:.3f}{extra}")
    except (SwitchyardError, OSError) as e:
        print(f"moe-eval: {e}", file=sys.stderr)
        return 2
    return 0


def _tune_main(args) -> int:
    """moe-eval --tune: the per-layer choice, printed, and written as asked."""
    from .evaluate import parse_sweep
    from .tune import tune
    if not args.json and not args.knobs_out:
        print("moe-eval: --tune: nothing to write: give --json OUT, --knobs-out FILE or both",
              file=sys.stderr)
        return 2
    try:
        _check_outputs(args.json, None)
        _check_outputs(args.knobs_out, None)
        knob, values = (parse_sweep(args.tune) if "=" in args.tune else (args.tune, None))
        shape = _shape(args)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            report = tune(args.trace, args.policy, knob, target_mass=args.target_mass,
                          objective=args.objective, values=values,
                          knobs=_pairs(args.set, "--set"), hardware=args.hardware,
                          model=args.model, expert_dtype=args.expert_dtype, **shape)
        for path, value in ((args.json, report), (args.knobs_out, report["knobs"])):
            if path:
                with open(path, "w") as f:
                    json.dump(value, f, indent=1)
                    f.write("\n")
        unit = "experts active" if args.objective == "experts" else "modeled us"
        for layer, row in report["per_layer"]["layers"].items():
            print(f"layer {layer}: {knob}={row['value']} ({unit} {row['objective']:.3f}, "
                  f"mass kept {row['mass_kept']:.4f})")
        uniform = report["uniform"]
        print(f"per layer: {unit} {report['per_layer']['objective_mean']:.3f} (mean); "
              + (f"best single value {knob}={uniform['value']}: "
                 f"{uniform['objective_mean']:.3f}" if uniform else
                 "no single value keeps the target on every layer"))
        if report["layers_below_target"]:
            print(f"below the target on layers {report['layers_below_target']} (the value "
                  "keeping the most mass is used there)")
    except (SwitchyardError, OSError) as e:
        print(f"moe-eval: {e}", file=sys.stderr)
        return 2
    return 0


def _shape(args) -> dict:
    """--shape's pairs and --groups, as evaluate()'s shape keywords."""
    shape = _pairs(args.shape, "--shape")
    if args.groups is not None:
        shape["groups"] = args.groups
    return shape


def _show_warning(message, category, filename, lineno, file=None, line=None):
    if issubclass(category, CompileWarning):
        print(f"moe-eval: {message}", file=sys.stderr)
    else:
        print(warnings.formatwarning(message, category, filename, lineno, line),
              file=sys.stderr, end="")


def _check_outputs(json_path, plots):
    """--json and --plots usable before the evaluation runs (not after a long one)."""
    folder = os.path.dirname(os.path.abspath(json_path)) if json_path else None
    if json_path and (os.path.isdir(json_path) or not os.path.isdir(folder)
                      or not os.access(folder, os.W_OK)):
        raise InputError(f"--json {json_path}: cannot be written (a directory, or its "
                         f"folder does not exist or is not writable)")
    if plots:
        try:
            os.makedirs(plots, exist_ok=True)
        except OSError as e:
            raise InputError(f"--plots {plots}: not a directory that can be made "
                             f"({e.strerror})") from None
        if not os.access(plots, os.W_OK):
            raise InputError(f"--plots {plots}: not writable")


if __name__ == "__main__":
    sys.exit(main())
