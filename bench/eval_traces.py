#!/usr/bin/env python3
"""The seed systems' headline effects on the committed routing traces, next to the
papers' figures (issue 28, item 4; docs/results-traces.md).

Every trace under shared/traces/public/ (the public traces, converted by
scripts/convert_public_trace.py; not committed) and traces/vllm/ (a directory with a
meta.json) is
evaluated offline with switchyard.trace.evaluate (docs/traces.md):

  top-k       the model's own routing (topk_softmax) at `ranks` expert-parallel ranks
              (4: divides E = 8 and E = 16) with the home placement, EPLB planned from
              the trace's history and Libra's plan on each step's own routing
  XShare      Alg. 2 with k0 = 1, swept over `budget` (experts added after the warm-up,
              set_budget = 0) and over `set_budget` (the paper's Eq. 2, |S_l| <= m_l,
              budget = 0)
  LYNX        a grid of alpha x theta at beta = 4 (the default; beta = 1 instead moved no
              point by more than 0.01 of mass or 0.1 experts active on these traces)
  XShare-EP   Alg. 6 (k0 = 1) swept over the per-GPU budget m_g. evaluate() cannot run
              it: the policy's `bias` and `placement` inputs are not per-token trace data
              (evaluate raises "policy input 'bias': a trace has no such per-token
              data"), so this script calls the compiled router itself, step by step as
              evaluate does, with bias = 0 and the home placement (expert e on rank
              e // (E / ranks)); it also measures the peak per-GPU active experts of the
              top-k routing and of XShare Alg. 2 from the ids those routers return.

Definitions (also stored in the JSON under "definitions"):

  experts active   distinct experts a step's tokens of the phase use, mean over steps,
                   then over layers
  mass kept        mass_kept_mean / model_mass_kept_mean (ratio of the means over
                   tokens, then mean over layers): the fraction of the model's own top-k
                   softmax mass that the policy keeps. On the public Mixtral traces the
                   logits are log(top-2 weight) and -inf elsewhere (their meta.json
                   provenance), so the model's mass is 1 and this is the fraction of the
                   model's top-2 combine weight kept; on traces with real logits it is
                   relative to the model's own top-k mass (the absolute softmax mass is
                   stored too)
  headline         per policy and phase: the setting with the fewest experts active
                   among those keeping >= 90% (>= 95%) of the mass, and its reduction
                   1 - active / top-k active
  peak per GPU     per step, the most distinct active experts any rank hosts (home
                   placement), mean over steps and layers
  imbalance        max rank load / mean rank load (token-expert assignments), per step,
                   mean over steps and layers; `floor` is the least a placement that
                   cannot split a token-expert pair reaches: ceil(A / R) / (A / R) for
                   A assignments on R ranks

Outputs: docs/trace-results.json (every number, the papers' figures with file and
location), docs/trace-pareto.png, and a markdown summary on stdout; --update-docs writes
it between the markers in docs/results-traces.md; --check recomputes and exits 1 when a
number differs from docs/trace-results.json by more than 1e-6 (writing nothing).

  .venv/bin/python bench/eval_traces.py [--update-docs] [--check] [--json P] [--plot P]
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import numpy as np

from bench_common import ROOT, BenchError

BUILD = os.environ.get("SWITCHYARD_BUILD_DIR", os.path.join(ROOT, "build"))
JSON_PATH = os.path.join(ROOT, "docs", "trace-results.json")
PLOT_PATH = os.path.join(ROOT, "docs", "trace-pareto.png")
DOC_PATH = os.path.join(ROOT, "docs", "results-traces.md")
TOLERANCE = 1e-6
THRESHOLDS = (0.90, 0.95)
RANKS = 4
PAPER_M_G = 5   # XShare-EP's Table 2 setting (k0 = 1, m_g = 5)
LYNX_GRID = {"alpha": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0], "beta": [4],
             "theta": [1.0, 1.5, 2.0]}
PHASE_ORDER = ("prefill", "decode", "verify", "all")
PAPERS = os.path.join(os.path.dirname(ROOT), "shared", "papers")   # ../shared/papers

# The papers' figures this comparison cites: file (under ../shared/papers/, see its
# README.md), where, and a short quote.
PAPER_FIGURES = {
    "lynx": [
        {"short": "~25% fewer experts per batch ('75% activated experts' on most "
                  "benchmarks; Mixtral-8x7B, DeepSeek-V2-Lite, Qwen2-57B)",
         "figure": "about 25% fewer activated experts per batch ('75% activated experts') "
                   "on most benchmarks; up to 1.23x throughput within 1% accuracy",
         "reduction": 0.25,
         "file": "000_3186eecb3a976ca5.txt", "where": "§5.4 (line 249); abstract (line 38)",
         "quote": "Even with 75% activated experts, which is the case for most "
                  "benchmarks showcased above"},
        {"figure": "Fiddler + LYNX: 25% fewer experts activated on the CPU",
         "reduction": 0.25,
         "file": "000_3186eecb3a976ca5.txt", "where": "§5.4 (line 259)",
         "quote": "reducing the activated experts in CPU by 25%"},
    ],
    "xshare": [
        {"short": "up to 30% fewer experts (GPT-OSS-120B, E = 128, k = 4, batch 16; "
                  "accuracy within 1%)",
         "figure": "up to 30% fewer activated experts under standard batching (GPT-OSS "
                   "120B, E = 128, k = 4, batch 16), accuracy within 1%",
         "reduction": 0.30,
         "file": "001_69e250e58dd2faaa.txt", "where": "abstract (line 14); §1 (line 51)",
         "quote": "It reduces number of activated experts by up to 30%"},
    ],
    "xshare_ep": [
        {"short": "peak per GPU 25.6 -> 8.64 (3.0x), total 160.4 -> 43.4 (DeepSeek-R1, "
                  "E = 256 on 8 GPUs, batch 16, m_g = 5)",
         "figure": "DeepSeek-R1 (E = 256, k = 8, 8 GPUs), Alg. 6 (k0 = 1, m_g = 5): peak "
                   "per-GPU experts 25.6 -> 8.64 (IFEval, batch 16; 3x) and 11.3 -> 5.94 "
                   "(GSM-8K, batch 8); total active 160.4 -> 43.4 (-73%) and 50.7 -> 33.2",
         "peak_before": 25.6, "peak_after": 8.64, "active_before": 160.4,
         "active_after": 43.4,
         "file": "001_69e250e58dd2faaa.txt", "where": "§6.4, Table 2 (lines 330-340)",
         "quote": "reduces the peak GPU load by $3 \\times$ ($25.6 \\rightarrow 8.6$ "
                  "experts)"},
    ],
    "eplb": [
        {"short": "no figure (Libra's §2.2: less effective, it plans from history)",
         "figure": "no imbalance figure in the papers folder (DeepSeek's EPLB is not a "
                   "paper there); Libra's paper calls it less effective because it plans "
                   "from history",
         "file": "003_1f4c335f70fa03b3.txt", "where": "§2.2 'EPLB' (line 48)",
         "quote": "this strategy is less effective because past popularity does not "
                  "capture the instantaneous and dynamic variations across requests"},
    ],
    "libra": [
        {"short": "imbalance ~1.0 (prefill, Qwen3MoE / GLM-4.5 on 8 H200s)",
         "figure": "imbalance ratio close to 1.0 (prefill, Qwen3MoE / GLM-4.5, 8 H200s; "
                   "the figure's values are only plotted)",
         "imbalance": 1.0,
         "file": "003_1f4c335f70fa03b3.txt", "where": "§5.2, Figure 9 (lines 136-154)",
         "quote": "By maintaining a near-perfect imbalance ratio close to 1.0"},
    ],
}

DEFINITIONS = {
    "experts_active": "distinct experts a step's tokens of the phase use; mean over "
                      "steps, then over layers",
    "mass_kept": "mass_kept_mean / model_mass_kept_mean (means over tokens), mean over "
                 "layers: the fraction of the model's own top-k softmax mass kept",
    "mass_kept_abs": "mass_kept_mean: the policy's chosen experts' softmax probability "
                     "(of the trace's logits), mean over tokens and layers",
    "headline": "the setting with the fewest experts active among those keeping >= the "
                "threshold of mass; reduction = 1 - active / top-k active",
    "peak_per_gpu": "per step, the most distinct active experts on one rank (home "
                    "placement: expert e on rank e // (E / ranks)); mean over steps and "
                    "layers",
    "imbalance": "max rank load / mean rank load (token-expert assignments) per step; "
                 "mean over steps and layers. home: contiguous blocks; eplb: planned "
                 "every 4 steps from the previous 4 (one redundant slot per rank, load "
                 "split evenly over replicas); libra: the rule on each step's own routing "
                 "(a perfect lookahead: an upper bound of Libra's effect), with the "
                 "rule's default knobs (extra_experts N = 4, alpha = 0.5) and with N "
                 "scaled as in the paper's runs (N = E / (2 ranks): 8 extra experts at "
                 "16 experts per GPU); token t starts on rank request_id mod ranks; floor: "
                 "ceil(A/R)/(A/R), the least an unsplit assignment of A pairs on R ranks "
                 "reaches",
}


def setup_path():
    python = os.path.join(BUILD, "python")
    if not os.path.isdir(os.path.join(python, "switchyard")):
        raise BenchError(f"{python}: no built switchyard package (build first, or set "
                         f"SWITCHYARD_BUILD_DIR)")
    if python not in sys.path:
        sys.path.insert(0, python)


def find_traces():
    dirs = sorted(os.path.dirname(p) for pattern in ("shared/traces/public/*/meta.json",
                                                     "traces/vllm/*/meta.json")
                  for p in glob.glob(os.path.join(ROOT, pattern)))
    if not dirs:
        raise BenchError("no traces under shared/traces/public or traces/vllm")
    return dirs


def rnd(x):
    """Numbers as stored: 9 significant digits (well inside the 1e-6 check)."""
    if x is None:
        return None
    return float(f"{float(x):.9g}")


# -- evaluate() runs --------------------------------------------------------------------
def phase_means(result, key):
    """{phase: mean over layers of metrics[key]} for one setting of an evaluate report."""
    out = {}
    layers = result["layers"]
    for phase in PHASE_ORDER:
        values = [layers[layer][phase].get(key) for layer in layers if phase in layers[layer]]
        values = [v for v in values if v is not None]
        if values:
            out[phase] = float(np.mean(values))
    return out


def sweep_points(report):
    """One point per knob setting: {knobs, phase: {experts_active, mass_kept, ...}}."""
    points = []
    for result in report["results"]:
        point = {"knobs": dict(result["knobs"])}
        layers = result["layers"]
        for phase in PHASE_ORDER:
            if not all(phase in layers[layer] for layer in layers):
                continue
            act = np.mean([layers[layer][phase]["experts_active_mean"] for layer in layers])
            mass = np.mean([layers[layer][phase]["mass_kept_mean"] for layer in layers])
            rel = np.mean([layers[layer][phase]["mass_kept_mean"]
                           / layers[layer][phase]["model_mass_kept_mean"] for layer in layers])
            point[phase] = {"experts_active": rnd(act), "mass_kept": rnd(rel),
                            "mass_kept_abs": rnd(mass)}
        points.append(point)
    return points


def cheapest(points, phase, threshold):
    ok = [p for p in points if phase in p and p[phase]["mass_kept"] >= threshold - 1e-12]
    if not ok:
        return None
    return min(ok, key=lambda p: (p[phase]["experts_active"], -p[phase]["mass_kept"]))


# -- XShare-EP and peak per-GPU active experts (the compiled routers, called here) -------
def step_groups(trace):
    """[(step's token indices, {phase name: the step's tokens of that phase, 'all'})]."""
    from switchyard.trace.format import PHASE_NAMES
    out = []
    for s in np.unique(trace.step):
        tokens = np.nonzero(trace.step == s)[0]
        groups = {"all": tokens}
        phases = trace.phase[tokens]
        for code in np.unique(phases):
            groups[PHASE_NAMES[int(code)]] = tokens[phases == code]
        out.append((tokens, groups))
    return out


def ep_stats(trace, route, ranks, probs):
    """{phase: {peak_per_gpu, experts_active, mass_kept}} of a routing function
    route(layer, tokens) -> ids [T, w] (-1: none), home placement."""
    from switchyard.trace.evaluate import mass_kept
    E = trace.num_experts
    per = E // ranks
    steps = step_groups(trace)
    acc = {}
    for layer in trace.layers:
        model_ids = trace.ids[layer].astype(np.int64) if layer in trace.ids else None
        layer_acc = {}
        for tokens, groups in steps:
            ids = route(layer, tokens)
            full = np.full((trace.num_tokens, ids.shape[1]), -1, np.int64)
            full[tokens] = ids
            for phase, members in groups.items():
                chosen = full[members]
                active = np.unique(chosen[chosen >= 0])
                peak = int(np.bincount(active // per, minlength=ranks).max()) if active.size \
                    else 0
                kept = mass_kept(probs[layer][members], chosen)
                model = mass_kept(probs[layer][members], model_ids[members]) \
                    if model_ids is not None else np.ones(members.size)
                entry = layer_acc.setdefault(phase, {"peak": [], "active": [], "kept": [],
                                                     "model": []})
                entry["peak"].append(peak)
                entry["active"].append(active.size)
                entry["kept"].append(kept)
                entry["model"].append(model)
        for phase, entry in layer_acc.items():
            dst = acc.setdefault(phase, {"peak": [], "active": [], "rel": []})
            dst["peak"].append(np.mean(entry["peak"]))
            dst["active"].append(np.mean(entry["active"]))
            dst["rel"].append(np.concatenate(entry["kept"]).mean()
                              / np.concatenate(entry["model"]).mean())
    return {phase: {"peak_per_gpu": rnd(np.mean(v["peak"])),
                    "experts_active": rnd(np.mean(v["active"])),
                    "mass_kept": rnd(np.mean(v["rel"]))}
            for phase, v in sorted(acc.items(), key=lambda kv: PHASE_ORDER.index(kv[0]))}


def ep_section(trace, ranks, xshare_settings):
    import switchyard as sy
    from switchyard.trace.evaluate import softmax
    E, k = trace.num_experts, trace.top_k
    probs = {layer: softmax(trace.layer_logits(layer)) for layer in trace.layers}
    logits = {layer: trace.layer_logits(layer) for layer in trace.layers}

    def router_fn(router, knobs, extra=None, source=None):
        source = source or logits

        def route(layer, tokens):
            out = router(logits=np.ascontiguousarray(source[layer][tokens]), knobs=knobs,
                         **(extra or {}))
            return np.asarray(out["topk_ids"], np.int64)
        return route

    topk = sy.compile("topk_softmax", experts=E, top_k=k, allow_unused=True)
    xshare = sy.compile("xshare", experts=E, top_k=k, allow_unused=True)
    xshare_ep = sy.compile("xshare_ep", experts=E, top_k=k, devices=ranks, allow_unused=True)
    ep_inputs = {"bias": np.zeros(E, np.float32),
                 "placement": np.arange(E, dtype=np.int32).reshape(E, 1)}
    out = {"ranks": ranks, "topk": ep_stats(trace, router_fn(topk, {}), ranks, probs),
           "xshare_ep": [], "xshare": []}
    # The policy follows DeepSeek-R1's sigmoid gate; these models' gate is a softmax. The
    # variant feeds logit(p) = log(p / (1 - p)) of the softmax probabilities, so that
    # the policy's sigmoid scores (its batch mass and its ranking) are the probabilities.
    with np.errstate(divide="ignore"):
        prob_logits = {layer: (np.log(p.astype(np.float64))
                               - np.log1p(-np.minimum(p.astype(np.float64), 1 - 1e-7)))
                       .astype(np.float32) for layer, p in probs.items()}
    out["xshare_ep_prob_gate"] = []
    for m_g in range(0, E // ranks + 1):
        knobs = {"k0": 1, "device_budget": m_g}
        out["xshare_ep"].append(dict(knobs=knobs, **ep_stats(
            trace, router_fn(xshare_ep, knobs, ep_inputs), ranks, probs)))
        out["xshare_ep_prob_gate"].append(dict(knobs=knobs, **ep_stats(
            trace, router_fn(xshare_ep, knobs, ep_inputs, prob_logits), ranks, probs)))
    for knobs in xshare_settings:
        out["xshare"].append(dict(knobs=knobs, **ep_stats(
            trace, router_fn(xshare, knobs), ranks, probs)))
    return out


# -- one trace ----------------------------------------------------------------------------
def evaluate_trace(path, ranks=RANKS):
    import switchyard.trace as st
    trace = st.load_trace(path)
    E, k = trace.num_experts, trace.top_k
    if E % ranks:
        raise BenchError(f"{path}: E = {E} is not divisible by {ranks} ranks")
    name = os.path.relpath(path, ROOT)
    meta = trace.meta if hasattr(trace, "meta") else {}
    prov = meta.get("provenance", {}) if isinstance(meta, dict) else {}
    info = {"path": name, "model": trace.model, "num_experts": E, "top_k": k,
            "layers": len(trace.layers), "tokens": int(trace.num_tokens),
            "steps": int(np.unique(trace.step).size), "ranks": ranks,
            "logits": "derived: log(top-k weight), -inf elsewhere" if
            "logits_derived" in prov else "recorded router logits"}
    phases = {}
    for tokens, groups in step_groups(trace):
        for phase, members in groups.items():
            p = phases.setdefault(phase, {"steps": 0, "tokens": 0})
            p["steps"] += 1
            p["tokens"] += int(members.size)
    info["phases"] = {ph: dict(v, tokens_per_step=rnd(v["tokens"] / v["steps"]))
                      for ph, v in sorted(phases.items(), key=lambda kv: PHASE_ORDER.index(kv[0]))}

    base = st.evaluate(trace, "topk_softmax", ranks=ranks, balance="home,eplb,libra")
    topk = {}
    layers = base["results"][0]["layers"]
    for phase in info["phases"]:
        rows = [layers[layer][phase] for layer in layers]
        topk[phase] = {
            "experts_active": rnd(np.mean([r["experts_active_mean"] for r in rows])),
            "model_experts_active": rnd(np.mean([r["model_experts_active_mean"]
                                                 for r in rows])),
            "mass_kept_abs": rnd(np.mean([r["model_mass_kept_mean"] for r in rows])),
            "imbalance_home": rnd(np.mean([r["ep_imbalance"] for r in rows])),
            "imbalance_eplb": rnd(np.mean([r["ep_imbalance_eplb"] for r in rows])),
            "imbalance_libra": rnd(np.mean([r["ep_imbalance_libra"] for r in rows])),
        }
    # Libra with its replica budget N scaled to the experts per GPU as in the paper's
    # runs (N = 8 extra experts at 128 experts / 8 GPUs = 16 per GPU: N = E / (2 G)).
    n_scaled = max(1, E // (2 * ranks))
    scaled = st.evaluate(trace, "topk_softmax", ranks=ranks, balance="libra",
                         balance_knobs={"extra_experts": n_scaled, "alpha": 0.5})
    layers = scaled["results"][0]["layers"]
    for phase in info["phases"]:
        topk[phase]["imbalance_libra_scaled"] = rnd(np.mean(
            [layers[layer][phase]["ep_imbalance_libra"] for layer in layers]))
    info["libra_scaled_knobs"] = {"extra_experts": n_scaled, "alpha": 0.5}
    # The integer floor of the imbalance: from the step sizes (k assignments per token).
    for phase in info["phases"]:
        floors = []
        for tokens, groups in step_groups(trace):
            if phase in groups:
                a = groups[phase].size * k
                floors.append(math.ceil(a / ranks) / (a / ranks))
        topk[phase]["imbalance_floor"] = rnd(np.mean(floors))

    sweeps = {
        "xshare_budget": sweep_points(st.evaluate(
            trace, "xshare", knobs={"k0": 1, "set_budget": 0},
            sweep={"budget": list(range(0, E + 1))}, ranks=ranks, balance="home")),
        "xshare_set_budget": sweep_points(st.evaluate(
            trace, "xshare", knobs={"k0": 1, "budget": 0},
            sweep={"set_budget": list(range(0, E + 1))}, ranks=ranks, balance="home")),
        "lynx": sweep_points(st.evaluate(trace, "lynx", sweep=LYNX_GRID, ranks=ranks,
                                         balance="home")),
    }
    headline = {}
    for policy, points in sweeps.items():
        for phase in info["phases"]:
            base_active = topk[phase]["model_experts_active"]
            for thr in THRESHOLDS:
                best = cheapest(points, phase, thr)
                key = f">={int(round(thr * 100))}%"
                entry = None
                if best is not None:
                    act = best[phase]["experts_active"]
                    entry = {"knobs": best["knobs"], "experts_active": act,
                             "mass_kept": best[phase]["mass_kept"],
                             "reduction": rnd(1 - act / base_active) if base_active else None}
                headline.setdefault(policy, {}).setdefault(phase, {})[key] = entry
    # XShare (Alg. 2) over its whole budget sweep, for the per-GPU comparison.
    ep = ep_section(trace, ranks, [p["knobs"] for p in sweeps["xshare_budget"]])
    ep_headline, alg2_headline, prob_headline = {}, {}, {}
    for phase in info["phases"]:
        before = ep["topk"][phase]
        for thr in THRESHOLDS:
            key = f">={int(round(thr * 100))}%"
            ep_headline.setdefault(phase, {})[key] = peak_entry(ep["xshare_ep"], phase, thr,
                                                                before)
            alg2_headline.setdefault(phase, {})[key] = peak_entry(ep["xshare"], phase, thr,
                                                                  before)
            prob_headline.setdefault(phase, {})[key] = peak_entry(
                ep["xshare_ep_prob_gate"], phase, thr, before)
        # The paper's setting, (k0, m_g) = (1, 5), where a GPU hosts more than 5 experts.
        paper = [p for p in ep["xshare_ep"] if p["knobs"]["device_budget"] == PAPER_M_G]
        ep_headline[phase][f"m_g={PAPER_M_G}"] = None \
            if not paper or PAPER_M_G >= E // ranks else {
                "knobs": paper[0]["knobs"], "peak_per_gpu": paper[0][phase]["peak_per_gpu"],
                "experts_active": paper[0][phase]["experts_active"],
                "mass_kept": paper[0][phase]["mass_kept"],
                "peak_ratio": rnd(before["peak_per_gpu"] / paper[0][phase]["peak_per_gpu"])}
    headline["xshare_ep"] = ep_headline
    headline["xshare_peak_per_gpu"] = alg2_headline
    headline["xshare_ep_prob_gate"] = prob_headline
    return name, {"info": info, "topk": topk, "sweeps": sweeps, "ep": ep,
                  "headline": headline}


def peak_entry(points, phase, threshold, before):
    """The setting with the fewest peak per-GPU active experts keeping the mass."""
    ok = [p for p in points if p[phase]["mass_kept"] >= threshold - 1e-12]
    if not ok:
        return None
    best = min(ok, key=lambda p: (p[phase]["peak_per_gpu"], p[phase]["experts_active"]))
    return {"knobs": best["knobs"], "peak_per_gpu": best[phase]["peak_per_gpu"],
            "experts_active": best[phase]["experts_active"],
            "mass_kept": best[phase]["mass_kept"],
            "peak_ratio": rnd(before["peak_per_gpu"] / best[phase]["peak_per_gpu"])
            if best[phase]["peak_per_gpu"] else None}


def compute(paths):
    setup_path()
    out = {"generated_by": "bench/eval_traces.py", "definitions": DEFINITIONS,
           "thresholds": list(THRESHOLDS), "lynx_grid": LYNX_GRID,
           "paper_figures": PAPER_FIGURES, "traces": {}}
    for path in paths:
        name, result = evaluate_trace(path)
        out["traces"][name] = result
    return out


# -- markdown -------------------------------------------------------------------------------
def short(name):
    return name.split("/")[-1]


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def knob_text(knobs, keep):
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in knobs.items() if k in keep)


def paper_cell(entries):
    e = entries.get(f"m_g={PAPER_M_G}")
    if e is None:
        return f"n/a (a GPU hosts <= {PAPER_M_G} experts)"
    return f"{e['peak_per_gpu']:.2f}, {e['experts_active']:.2f}, {e['mass_kept']:.3f}"


def markdown(data):
    lines = []
    traces = data["traces"]
    pf = data["paper_figures"]
    lines.append("### The traces")
    lines.append("")
    lines.append("| trace | model | E, k | layers | tokens | steps: tokens / step | logits |")
    lines.append("|---|---|---|---|---|---|---|")
    for name, t in traces.items():
        info = t["info"]
        steps = ", ".join(f"{ph} {v['steps']}: {v['tokens_per_step']:.3g}"
                          for ph, v in info["phases"].items() if ph != "all")
        lines.append(f"| `{name}` | {info['model']} | {info['num_experts']}, "
                     f"{info['top_k']} | {info['layers']} | {info['tokens']} | {steps} | "
                     f"{info['logits']} |")
    lines.append("")
    lines.append("### Headline: each seed system on each trace, next to its paper")
    lines.append("")
    lines += summary(data)
    lines.append("")
    lines.append("### Expert reduction at >= 90% / >= 95% of the mass (LYNX, XShare)")
    lines.append("")
    lines.append("Experts active per step (mean over steps and layers), the model's top-k "
                 "first; each cell: the cheapest setting that keeps the mass, experts "
                 "active, reduction vs top-k, mass kept (of the model's top-k mass).")
    lines.append("")
    lines.append("| trace | phase (tokens/step) | top-k active | policy | >= 90%: setting | "
                 "active | reduction | mass | >= 95%: setting | active | reduction | mass |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    labels = {"xshare_budget": ("XShare (k0=1, budget)", ("budget",)),
              "xshare_set_budget": ("XShare (k0=1, set_budget = m_l)", ("set_budget",)),
              "lynx": ("LYNX", ("alpha", "beta", "theta"))}
    for name, t in traces.items():
        for phase, ph in t["info"]["phases"].items():
            if phase == "all":
                continue   # the markdown shows the phases; 'all' is in the JSON
            for policy, (label, keep) in labels.items():
                cells = []
                for key in (">=90%", ">=95%"):
                    e = t["headline"][policy][phase][key]
                    if e is None:
                        cells += ["none", "-", "-", "-"]
                    else:
                        cells += [knob_text(e["knobs"], keep), fmt(e["experts_active"], 2),
                                  f"{100 * e['reduction']:.1f}%", fmt(e["mass_kept"])]
                lines.append(f"| {short(name)} | {phase} ({ph['tokens_per_step']:.3g}) | "
                             f"{t['topk'][phase]['model_experts_active']:.2f} | {label} | "
                             + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Papers: " + "; ".join(
        f"{sys_}: {f['figure']} ({f['file']}, {f['where']})"
        for sys_ in ("lynx", "xshare") for f in pf[sys_][:1]) + ".")
    lines.append("")
    lines.append(f"### Peak per-GPU active experts (XShare-EP, {RANKS} ranks, home placement)")
    lines.append("")
    lines.append("Each cell: setting: peak per-GPU active experts / experts active (mass kept); "
                 "the setting with the lowest peak among those keeping the mass. XShare-EP "
                 "scores with a sigmoid gate (DeepSeek-R1's); 'softmax gate' feeds it "
                 "logit(p) of the softmax probabilities, so that its scores are the model's.")
    lines.append("")
    lines.append("| trace | phase | experts / GPU | top-k: peak / active | XShare-EP >= 90% | "
                 "XShare-EP >= 95% | XShare-EP, softmax gate, >= 90% | XShare Alg. 2 >= 90% | "
                 f"XShare Alg. 2 >= 95% | XShare-EP at the paper's m_g = {PAPER_M_G} |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")

    def cell(e, knob):
        if e is None:
            return "none"
        return (f"{knob}={e['knobs'][knob]}: {e['peak_per_gpu']:.2f} / "
                f"{e['experts_active']:.2f} ({e['mass_kept']:.3f})")

    for name, t in traces.items():
        ep = t["ep"]
        per = t["info"]["num_experts"] // ep["ranks"]
        for phase in t["info"]["phases"]:
            if phase == "all":
                continue
            before = ep["topk"][phase]
            h = t["headline"]
            cells = [cell(h["xshare_ep"][phase][key], "device_budget").replace(
                "device_budget", "m_g") for key in (">=90%", ">=95%")]
            cells.append(cell(h["xshare_ep_prob_gate"][phase][">=90%"], "device_budget")
                         .replace("device_budget", "m_g"))
            cells += [cell(h["xshare_peak_per_gpu"][phase][key], "budget")
                      for key in (">=90%", ">=95%")]
            lines.append(f"| {short(name)} | {phase} | {per} | "
                         f"{before['peak_per_gpu']:.2f} / {before['experts_active']:.2f} | "
                         + " | ".join(cells) + f" | {paper_cell(h['xshare_ep'][phase])} |")
    f = pf["xshare_ep"][0]
    lines.append("")
    lines.append(f"Paper: {f['figure']} ({f['file']}, {f['where']}).")
    lines.append("")
    lines.append(f"### EP imbalance of the model's routing ({RANKS} ranks): home vs EPLB vs "
                 f"Libra")
    lines.append("")
    lines.append("| trace | phase (tokens/step) | home | EPLB (from history) | "
                 "Libra (oracle; N=4, alpha=0.5) | Libra (oracle; N = E/(2 ranks)) | "
                 "floor (unsplit pairs) |")
    lines.append("|---|---|---|---|---|---|---|")
    for name, t in traces.items():
        for phase, ph in t["info"]["phases"].items():
            if phase == "all":
                continue
            r = t["topk"][phase]
            lines.append(f"| {short(name)} | {phase} ({ph['tokens_per_step']:.3g}) | "
                         f"{fmt(r['imbalance_home'])} | {fmt(r['imbalance_eplb'])} | "
                         f"{fmt(r['imbalance_libra'])} | {fmt(r['imbalance_libra_scaled'])} | "
                         f"{fmt(r['imbalance_floor'])} |")
    lines.append("")
    lines.append("Papers: " + "; ".join(
        f"{sys_.upper() if sys_ == 'eplb' else 'Libra'}: {f['figure']} ({f['file']}, "
        f"{f['where']})" for sys_ in ("libra", "eplb") for f in pf[sys_][:1]) + ".")
    return "\n".join(lines) + "\n"


# -- plot ------------------------------------------------------------------------------------
def front(points):
    """The Pareto front (fewest experts active for at least that mass), by mass."""
    pts = sorted(points, key=lambda p: (-p[0], p[1]))
    out, best = [], math.inf
    for mass, active in pts:
        if active < best - 1e-12:
            out.append((mass, active))
            best = active
    return sorted(out)


def headline_phase(info):
    """The phase a trace's headline uses: decode batches; a trace whose decode steps hold
    one token (nothing to share between tokens) shows its prefill."""
    phases = info["phases"]
    if "decode" in phases and phases["decode"]["tokens_per_step"] > 1:
        return "decode"
    return next((p for p in ("prefill", "decode") if p in phases), "all")


def summary(data):
    """One row per seed system: the paper's figure, then each trace's headline."""
    traces = data["traces"]
    pf = data["paper_figures"]
    names = list(traces)
    head = ["system", "paper"] + [
        f"{short(n)} ({headline_phase(traces[n]['info'])}, "
        f"{traces[n]['info']['phases'][headline_phase(traces[n]['info'])]['tokens_per_step']:.3g}"
        f" tok/step, E={traces[n]['info']['num_experts']})" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def red(t, policy, phase):
        cells = []
        for key in (">=90%", ">=95%"):
            e = t["headline"][policy][phase][key]
            cells.append("-" if e is None else f"{100 * e['reduction']:.0f}%")
        return " / ".join(cells)

    rows = [
        ("LYNX: fewer experts active at >= 90% / >= 95% mass", pf["lynx"][0]["short"],
         lambda t, ph: red(t, "lynx", ph)),
        ("XShare (k0 = 1, budget): same", pf["xshare"][0]["short"],
         lambda t, ph: red(t, "xshare_budget", ph)),
        ("XShare (k0 = 1, set_budget = m_l, Eq. 2): same", pf["xshare"][0]["short"],
         lambda t, ph: red(t, "xshare_set_budget", ph)),
    ]

    def ep(t, ph):
        e = t["headline"]["xshare_ep"][ph][">=90%"]
        before = t["ep"]["topk"][ph]["peak_per_gpu"]
        per = t["info"]["num_experts"] // t["ep"]["ranks"]
        text = f"{before:.2f} of {per} -> -" if e is None else (
            f"{before:.2f} -> {e['peak_per_gpu']:.2f} of {per} "
            f"(m_g={e['knobs']['device_budget']}, mass {e['mass_kept']:.2f})")
        paper = t["headline"]["xshare_ep"][ph].get(f"m_g={PAPER_M_G}")
        if paper is not None:
            text += (f"; m_g={PAPER_M_G}: {paper['peak_per_gpu']:.2f} "
                     f"({paper['peak_ratio']:.2f}x, mass {paper['mass_kept']:.2f})")
        return text

    def imb(key):
        return lambda t, ph: (f"{t['topk'][ph]['imbalance_home']:.2f} -> "
                              f"{t['topk'][ph][key]:.2f}")

    rows += [
        (f"XShare-EP: peak per-GPU active experts, top-k -> XShare-EP at >= 90% mass "
         f"({RANKS} ranks)", pf["xshare_ep"][0]["short"], ep),
        (f"EPLB: imbalance, home -> EPLB ({RANKS} ranks)", pf["eplb"][0]["short"],
         imb("imbalance_eplb")),
        (f"Libra (oracle, N = E / (2 ranks)): imbalance, home -> Libra ({RANKS} ranks)",
         pf["libra"][0]["short"], imb("imbalance_libra_scaled")),
    ]
    for label, paper, cell in rows:
        cells = [cell(traces[n], headline_phase(traces[n]["info"])) for n in names]
        lines.append("| " + " | ".join([label, paper] + cells) + " |")
    return lines


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    traces = data["traces"]
    cols = min(2, len(traces))
    rows = -(-len(traces) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.8 * rows), squeeze=False)
    for ax in axes.flat[len(traces):]:
        ax.set_visible(False)
    styles = {"xshare_budget": ("XShare, budget (k0=1)", "C0", "o"),
              "xshare_set_budget": ("XShare, set_budget = m_l (k0=1)", "C1", "s"),
              "lynx": ("LYNX (front of the alpha x beta x theta grid)", "C2", "^")}
    for ax, (name, t) in zip(axes.flat, traces.items()):
        phase = headline_phase(t["info"])
        for policy, (label, color, marker) in styles.items():
            pts = [(p[phase]["mass_kept"], p[phase]["experts_active"])
                   for p in t["sweeps"][policy] if phase in p]
            if policy == "lynx":
                ax.scatter([m for m, _ in pts], [a for _, a in pts], s=10, color=color,
                           alpha=0.3)
                pts = front(pts)
            else:
                pts = sorted(pts)
            ax.plot([m for m, _ in pts], [a for _, a in pts], marker=marker, color=color,
                    label=label, ms=4)
        ep = [(p[phase]["mass_kept"], p[phase]["experts_active"]) for p in t["ep"]["xshare_ep"]]
        ax.plot(*zip(*sorted(ep)), marker="D", color="C3", ms=4,
                label="XShare-EP, m_g (k0=1, 4 ranks)")
        top = t["topk"][phase]["model_experts_active"]
        ax.scatter([1.0], [top], marker="*", s=120, color="k", label="model top-k", zorder=5)
        for thr in THRESHOLDS:
            ax.axvline(thr, color="grey", lw=0.6, ls=":")
        info = t["info"]
        ax.set_title(f"{short(name)} ({phase}, {info['phases'][phase]['tokens_per_step']:.3g} "
                     f"tok/step)\n{info['model'][:60]}, E={info['num_experts']}, "
                     f"k={info['top_k']}", fontsize=8)
        ax.set_xlabel("mass kept (fraction of the model's top-k mass)")
        ax.set_ylabel("experts active per step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# -- check / docs ----------------------------------------------------------------------------
def diff(a, b, where="", out=None):
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{where}/{key}: only in {'recomputed' if key in a else 'file'}")
            else:
                diff(a[key], b[key], f"{where}/{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} entries recomputed, {len(b)} in the file")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        if abs(a - b) > TOLERANCE:
            out.append(f"{where}: recomputed {a!r}, file {b!r}")
    elif a != b:
        out.append(f"{where}: recomputed {a!r}, file {b!r}")
    return out


def update_docs():
    """The pages' generated blocks from the JSON just written (scripts/update-numbers.py
    renders them: `trace-results` in docs/results-traces.md, `readme-trace-results` in
    the README), so that its check and this script agree."""
    import subprocess
    tool = os.path.join(ROOT, "scripts", "update-numbers.py")
    run = subprocess.run([sys.executable, tool, "--pages", DOC_PATH,
                          os.path.join(ROOT, "README.md")], capture_output=True, text=True)
    if run.returncode != 0:
        raise BenchError(f"scripts/update-numbers.py: {run.stdout}{run.stderr}".strip())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=JSON_PATH, help="the results file (default: %(default)s)")
    ap.add_argument("--plot", default=PLOT_PATH, help="the Pareto plot (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="recompute and compare with --json (1e-6); write nothing; exit 1 on "
                         "a difference")
    ap.add_argument("--update-docs", action="store_true",
                    help="write the tables between the markers in "
                         f"{os.path.relpath(DOC_PATH, ROOT)}")
    ap.add_argument("--from-json", action="store_true",
                    help="do not recompute: print / plot / update the docs from --json")
    ap.add_argument("traces", nargs="*", help="trace directories (default: every committed one)")
    args = ap.parse_args(argv)
    try:
        if args.from_json:
            with open(args.json) as f:
                data = json.load(f)
        else:
            if args.check and not os.path.isfile(args.json):
                print(f"eval_traces --check: {args.json} does not exist", file=sys.stderr)
                return 1
            start = time.time()
            data = compute([os.path.abspath(p) for p in args.traces] or find_traces())
            print(f"# evaluated {len(data['traces'])} traces in {time.time() - start:.1f} s",
                  file=sys.stderr)
        data = json.loads(json.dumps(data))  # the JSON's own types (tuples -> lists)
        if args.check:
            try:
                with open(args.json) as f:
                    stored = json.load(f)
            except (OSError, ValueError) as e:
                print(f"eval_traces --check: cannot read {args.json}: {e}", file=sys.stderr)
                return 1
            problems = diff(data, stored)
            if problems:
                print(f"eval_traces --check: {len(problems)} differences from {args.json} "
                      f"(rerun bench/eval_traces.py --update-docs):", file=sys.stderr)
                for p in problems[:40]:
                    print("  " + p, file=sys.stderr)
                return 1
            print(f"eval_traces --check: {args.json} matches the recomputed numbers "
                  f"(within {TOLERANCE:g})")
            return 0
        text = markdown(data)
        print(text)
        if not args.from_json:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
        plot(data, args.plot)
        if args.update_docs:
            update_docs()
    except BenchError as e:
        print(f"eval_traces: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
