"""Per-layer knob tuning from a routing trace (`moe-eval --tune`; docs/traces.md).

    report = tune(trace, "xshare", "budget", target_mass=0.90)
    report["knobs"]    # {"budget": [v0, v1, ...]}: one value per MoE layer, the form the
                       # vLLM plugin's SWITCHYARD_KNOBS / knobs file take unchanged

For every candidate value of the knob, the policy runs on every layer of the trace
(evaluate(): every token, phase "all"). Per layer, the chosen value is the one with
the smallest objective — experts active per step (`experts`) or the modeled MoE time
on a hardware profile (`modeled-time`) — among the values that keep at least
`target_mass` of the model's own top-k mass on that layer (mass_kept_relative); ties go
to the value that keeps more mass, then to the smaller value. The best uniform value is
the one that keeps the target on every layer with the smallest mean objective; as it
is a candidate of every layer, the per-layer choice never costs more on any layer. A
layer no value brings to the target gets the value that keeps the most mass, and the
report lists it.

Candidates: `values`, else for an integer knob every integer its rule allows (its
`[lo, hi]`, an unbounded end capped at the trace's expert count); a float knob needs
`values`. The knobs list is indexed by MoE layer number, 0 up to the trace's largest
layer; a layer the trace does not hold gets the uniform value.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Sequence

from .._errors import InputError
from .evaluate import evaluate
from .format import Trace, load_trace

OBJECTIVES = ("experts", "modeled-time")
_RULE = re.compile(r"must be in \[(-?\d+), (-?\d+|inf)\]")


def candidate_values(router_knobs: Dict[str, Any], knob: str, experts: int) -> List[int]:
    """Every integer the knob's rule allows (an unbounded end capped at `experts`)."""
    spec = router_knobs.get(knob)
    if spec is None:
        raise InputError(f"--tune {knob}: the policy has no such knob (its knobs: "
                         f"{', '.join(router_knobs) or 'none'})")
    if spec.is_float:
        raise InputError(f"--tune {knob}: a {spec.dtype.name} knob needs its values "
                         f"(--tune {knob}=A:B:STEP)")
    lo, hi = 0, experts
    for rule in spec.rules:
        match = _RULE.search(rule.text)
        if match:
            lo = max(lo, int(match.group(1)))
            if match.group(2) != "inf":
                hi = min(hi, int(match.group(2)))
    if lo > hi:
        raise InputError(f"--tune {knob}: its rules allow no value in [0, {experts}]")
    return list(range(lo, hi + 1))


def _layer_metric(metrics: dict, objective: str, profile: Optional[str]) -> float:
    if objective == "experts":
        return metrics["experts_active_mean"]
    times = metrics.get("modeled_time_us") or {}
    if profile not in times:
        raise InputError("--objective modeled-time needs --hardware (and the experts' "
                         "sizes: --model or the trace's meta.json)")
    return times[profile]


def tune(trace, policy, knob: str, target_mass: float = 0.90, objective: str = "experts",
         values: Optional[Sequence[Any]] = None, knobs: Optional[Dict[str, Any]] = None,
         hardware: Optional[str] = None, **options) -> Dict[str, Any]:
    """The per-layer choice of `knob` (module documentation); `knobs`: the policy's
    other knob values; `hardware`: the profile of the modeled-time objective (first of
    a comma-separated list); `options` go to evaluate() (model=, shape...)."""
    if objective not in OBJECTIVES:
        raise InputError(f"--objective {objective}: expected one of {', '.join(OBJECTIVES)}")
    if isinstance(target_mass, bool) or not 0 < float(target_mass) <= 1:
        raise InputError(f"--target-mass {target_mass}: expected a number in (0, 1]")
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    base = dict(knobs or {})
    if knob in base:
        raise InputError(f"--tune {knob} and --set {knob}: tune it or set it, not both")
    if values is None:
        from .._compile import compile as _compile
        router = _compile(policy, experts=trace.num_experts, top_k=trace.top_k,
                          allow_unused=True, **{k: v for k, v in options.items()
                                                if k in ("groups", "topk_groups")})
        values = candidate_values(router.knobs, knob, trace.num_experts)
    values = list(values)
    if not values:
        raise InputError(f"--tune {knob}: no values to try")
    profile = hardware.split(",")[0] if hardware else None
    report = evaluate(trace, policy, knobs=base, sweep={knob: values}, hardware=hardware,
                      **options)
    # value -> {layer: (objective, mass kept)}
    table: Dict[Any, Dict[int, tuple]] = {}
    for result in report["results"]:
        value = result["knobs"][knob]
        table[value] = {}
        for layer, phases in result["layers"].items():
            metrics = phases["all"]
            mass = metrics.get("mass_kept_relative")
            if mass is None:
                raise InputError("the trace has no model routing to compare mass with "
                                 "(mass_kept_relative): tuning needs the model's own ids")
            table[value][int(layer)] = (_layer_metric(metrics, objective, profile), mass)
    layers = sorted(trace.layers)
    uniform = _best_uniform(table, layers, target_mass)
    chosen, missed = {}, []
    for layer in layers:
        meets = [v for v in values if table[v][layer][1] >= target_mass]
        if meets:
            chosen[layer] = min(meets, key=lambda v: (table[v][layer][0], -table[v][layer][1],
                                                      v))
        else:
            missed.append(layer)
            chosen[layer] = max(values, key=lambda v: (table[v][layer][1], -v))
    fallback = uniform if uniform is not None else chosen[layers[0]]
    per_layer_list = [chosen.get(layer, fallback) for layer in range(max(layers) + 1)]

    def summary(pick):
        rows = {str(layer): {"value": pick(layer), "objective": table[pick(layer)][layer][0],
                             "mass_kept": table[pick(layer)][layer][1]} for layer in layers}
        return {"layers": rows,
                "objective_mean": sum(r["objective"] for r in rows.values()) / len(rows),
                "mass_kept_min": min(r["mass_kept"] for r in rows.values())}

    out = {"trace": report["trace"], "policy": report["policy"], "knob": knob,
           "target_mass": float(target_mass), "objective": objective,
           "objective_profile": profile, "values": values, "knobs_set": base,
           "per_layer": summary(lambda layer: chosen[layer]),
           "layers_below_target": missed,
           "uniform": (summary(lambda layer: uniform) | {"value": uniform})
           if uniform is not None else None,
           "knobs": {**base, knob: per_layer_list}}
    if uniform is not None:
        gain = out["uniform"]["objective_mean"] - out["per_layer"]["objective_mean"]
        out["gain"] = gain
        out["gain_relative"] = gain / out["uniform"]["objective_mean"] \
            if out["uniform"]["objective_mean"] > 0 else None
    return out


def _best_uniform(table, layers, target_mass):
    """The value keeping the target on every layer with the smallest mean objective."""
    best = None
    for value, per_layer in table.items():
        if all(per_layer[layer][1] >= target_mass for layer in layers):
            mean = sum(per_layer[layer][0] for layer in layers) / len(layers)
            key = (mean, -min(per_layer[layer][1] for layer in layers), value)
            if best is None or key < best[0]:
                best = (key, value)
    return None if best is None else best[1]


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
