"""Evaluate a routing policy offline on a trace (docs/traces.md, "Evaluating").

The policy is compiled for the trace's shape (num_experts, top_k, groups from meta.json;
`**shape` overrides or adds) and called once per layer and forward pass (step) on that
step's logits, as an engine would batch them. Per layer and per phase ("prefill",
"decode", "verify", and "all": every token) it reports:

  experts_active_mean / _p99  distinct experts the policy's topk_ids use per step (ids
                              -1 ignored), over the steps with tokens of the phase;
                              model_experts_active_* the same for the trace's own ids
  mass_kept_mean              per token, the softmax probability (of the float32 logits)
                              of the distinct experts chosen, summed; mean over tokens
                              (model_mass_kept_mean: the trace's ids)
  tokens_per_expert_mean/_max per step, the token-expert assignments per expert: mean
                              and max over experts; averaged over steps
  ep_imbalance                experts in `ranks` contiguous equal blocks (the home
                              placement): max rank load / mean rank load per step,
                              averaged over steps with any load
"""
from __future__ import annotations

import itertools
from typing import Dict, Iterable, List, Optional

import numpy as np

from .._errors import InputError
from .format import PHASE_NAMES, Trace, load_trace

ALL = "all"


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax of float32 logits (-inf -> probability 0)."""
    x = np.asarray(logits, dtype=np.float32)
    shifted = x - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def mass_kept(probs: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per token: the probability of the distinct experts in its ids (-1 ignored)."""
    chosen = np.zeros(probs.shape, dtype=bool)
    rows, cols = np.nonzero(ids >= 0)
    chosen[rows, ids[rows, cols]] = True
    return np.where(chosen, probs, 0).sum(axis=1)


def _counts(ids: np.ndarray, experts: int) -> np.ndarray:
    """Token-expert assignments per expert (-1 ignored)."""
    flat = ids.reshape(-1)
    return np.bincount(flat[flat >= 0], minlength=experts)[:experts]


def _step_metrics(ids, probs, experts, ranks):
    counts = _counts(ids, experts)
    loads = counts.reshape(ranks, experts // ranks).sum(axis=1)
    total = loads.sum()
    return {"active": int((counts > 0).sum()), "mean": counts.mean(), "max": counts.max(),
            "imbalance": loads.max() / (total / ranks) if total else None,
            "mass": mass_kept(probs, ids)}


def _summarize(per_step: List[dict], model_steps: Optional[List[dict]]) -> dict:
    active = np.array([s["active"] for s in per_step], dtype=np.float64)
    masses = np.concatenate([s["mass"] for s in per_step])
    imbalance = [s["imbalance"] for s in per_step if s["imbalance"] is not None]
    out = {
        "steps": len(per_step),
        "tokens": int(masses.size),
        "experts_active_mean": float(active.mean()),
        "experts_active_p99": float(np.percentile(active, 99)),
        "mass_kept_mean": float(masses.mean()),
        "tokens_per_expert_mean": float(np.mean([s["mean"] for s in per_step])),
        "tokens_per_expert_max": float(np.mean([s["max"] for s in per_step])),
        "ep_imbalance": float(np.mean(imbalance)) if imbalance else None,
    }
    if model_steps is not None:
        model_active = np.array([s["active"] for s in model_steps], dtype=np.float64)
        out["model_experts_active_mean"] = float(model_active.mean())
        out["model_experts_active_p99"] = float(np.percentile(model_active, 99))
        out["model_mass_kept_mean"] = float(
            np.concatenate([s["mass"] for s in model_steps]).mean())
    return out


def parse_sweep(spec: str):
    """'knob=a:b[:step]' -> (knob, [a, a+step, ..., b]) (integers when a, b, step are)."""
    name, sep, rng = spec.partition("=")
    parts = rng.split(":")
    if not sep or not name or len(parts) not in (2, 3):
        raise InputError(f"sweep '{spec}': expected knob=start:stop[:step]")
    try:
        values = [_number(p) for p in parts]
    except ValueError:
        raise InputError(f"sweep '{spec}': start, stop and step must be numbers") from None
    start, stop = values[0], values[1]
    step = values[2] if len(values) == 3 else 1
    if step <= 0 or stop < start:
        raise InputError(f"sweep '{spec}': needs start <= stop and step > 0")
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    return name, [start + i * step for i in range(count)]


def _number(text):
    text = str(text).strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def _sweep_settings(knobs: Optional[dict], sweep) -> List[dict]:
    base = dict(knobs or {})
    if not sweep:
        return [base]
    if isinstance(sweep, (str, tuple)):
        sweep = [sweep]
    if isinstance(sweep, dict):
        axes = list(sweep.items())
    else:
        axes = [parse_sweep(s) if isinstance(s, str) else tuple(s) for s in sweep]
    names = [name for name, _ in axes]
    return [dict(base, **dict(zip(names, combo)))
            for combo in itertools.product(*[list(values) for _, values in axes])]


def _feeds(router, trace: Trace, tokens: np.ndarray) -> Dict[str, np.ndarray]:
    """The router's inputs other than logits, from the trace's per-token arrays."""
    feeds = {}
    for name in router.inputs:
        if name == "logits":
            continue
        if name == "request_ids":
            feeds[name] = np.ascontiguousarray(trace.request_ids[tokens], dtype=np.int32)
        elif name == "positions":
            feeds[name] = np.ascontiguousarray(trace.positions[tokens], dtype=np.int32)
        elif name == "phase":
            phases = np.unique(trace.phase[tokens])
            feeds[name] = int(phases[0]) if phases.size == 1 else 2  # 2: a mixed batch
        else:
            raise InputError(f"policy input '{name}': a trace has no such per-token data "
                             f"(it gives logits, request_ids, positions, phase)")
    return feeds


def evaluate(trace, policy, knobs=None, sweep=None, ranks: int = 1, **shape) -> dict:
    """Run `policy` on every layer and step of `trace` (a Trace or a trace directory) for
    each knob setting (`knobs`, with `sweep`: 'knob=a:b[:step]' strings, (knob, values)
    pairs or a {knob: values} dict); returns {"trace", "policy", "ranks", "results":
    [{"knobs", "layers": {layer: {phase: metrics}}}]} (see the module documentation)."""
    from .. import compile as _compile

    source = trace.model if isinstance(trace, Trace) else str(trace)
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    if not isinstance(ranks, int) or ranks <= 0 or trace.num_experts % ranks:
        raise InputError(f"ranks = {ranks!r}: must be a positive divisor of num_experts = "
                         f"{trace.num_experts} (the home placement splits the experts into "
                         f"equal contiguous blocks)")
    bind = {"experts": trace.num_experts, "top_k": trace.top_k}
    if trace.groups is not None:
        bind["groups"] = trace.groups
    bind.update({k: v for k, v in shape.items() if v is not None})
    router = _compile(policy, allow_unused=True, **bind)
    settings = _sweep_settings(knobs, sweep)

    step_tokens = _steps(trace.step)
    probs = {layer: softmax(trace.layer_logits(layer)) for layer in trace.layers}
    model = {layer: _per_step(trace.ids[layer].astype(np.int64), probs[layer], step_tokens,
                              trace, ranks) for layer in trace.layers if layer in trace.ids}
    results = []
    for setting in settings:
        layers = {}
        for layer in trace.layers:
            logits = trace.layer_logits(layer)
            chosen = []
            for tokens in step_tokens:
                out = router(logits=np.ascontiguousarray(logits[tokens]), knobs=setting,
                             **_feeds(router, trace, tokens))
                if "topk_ids" not in out:
                    raise InputError(f"policy '{policy}' returns no topk_ids (results: "
                                     f"{sorted(out)}): not a router to evaluate")
                chosen.append(np.asarray(out["topk_ids"], dtype=np.int64))
            width = max(c.shape[1] for c in chosen)
            ids = np.full((trace.num_tokens, width), -1, dtype=np.int64)
            for tokens, c in zip(step_tokens, chosen):
                ids[tokens, :c.shape[1]] = c
            policy_steps = _per_step(ids, probs[layer], step_tokens, trace, ranks)
            layers[str(layer)] = {
                phase: _summarize(steps, model[layer].get(phase) if layer in model else None)
                for phase, steps in policy_steps.items()}
        results.append({"knobs": setting, "layers": layers})
    return {"trace": source, "policy": str(policy) if len(str(policy)) < 200 else "<text>",
            "ranks": ranks, "num_experts": trace.num_experts, "top_k": trace.top_k,
            "results": results}


def _steps(step: np.ndarray) -> List[np.ndarray]:
    """The token indices of each step, in step order."""
    step = np.asarray(step)
    return [np.nonzero(step == s)[0] for s in np.unique(step)]


def _per_step(ids, probs, step_tokens: Iterable[np.ndarray], trace: Trace, ranks: int):
    """phase name -> one metrics dict per step holding tokens of that phase."""
    out: Dict[str, List[dict]] = {}
    for tokens in step_tokens:
        out.setdefault(ALL, []).append(
            _step_metrics(ids[tokens], probs[tokens], trace.num_experts, ranks))
        phases = trace.phase[tokens]
        for code in np.unique(phases):
            sub = tokens[phases == code]
            out.setdefault(PHASE_NAMES[int(code)], []).append(
                _step_metrics(ids[sub], probs[sub], trace.num_experts, ranks))
    return out
