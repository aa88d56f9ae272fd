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
  tokens_per_expert_mean/_max per step, the token-expert assignments per active expert
                              (mean) and of the busiest expert (max); averaged over steps
  ep_imbalance                experts in `ranks` contiguous equal blocks (the home
                              placement): max rank load / mean rank load per step,
                              averaged over steps with any load
  rank_experts_active_max     per step, the most distinct active experts on one rank
                              (home placement; XShare's "peak GPU load"), averaged
  and, with the options of `evaluate`: ep_imbalance_eplb / _libra (balance.py),
  bytes_read_mean, modeled_time_us, modeled_speedup (hardware.py), dynaexq_* and
  expertflow_* (memory.py)
"""
from __future__ import annotations

import itertools
import re
import warnings
from typing import Dict, List, Optional

import numpy as np

from .._errors import InputError
from . import balance as _balance
from . import hardware as _hardware
from . import memory as _memory
from .format import PHASE_NAMES, Trace, check_trace, load_trace

ALL = "all"


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax of float32 logits (-inf -> probability 0)."""
    x = np.asarray(logits, dtype=np.float32)
    with np.errstate(over="ignore"):   # -3e38 - 3e38 -> -inf: probability 0, as it is
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
    values = [start + i * step for i in range(count)]
    if any(isinstance(v, float) for v in values):   # 0.1 + 2 * 0.1 -> 0.3, not 0.30000000000000004
        values = [float(f"{v:.12g}") for v in values]
    return name, values


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
    """The router's inputs other than logits: the trace's per-token arrays; a zero
    correction bias and the home placement (expert e in slot e) for EP-aware policies."""
    feeds = {}
    for name in router.inputs:
        if name == "logits":
            continue
        if name == "request_ids":
            feeds[name] = np.ascontiguousarray(trace.request_ids[tokens], dtype=np.int32)
        elif name == "positions":
            feeds[name] = np.ascontiguousarray(trace.positions[tokens], dtype=np.int32)
        elif name == "bias":   # a trace records no score-correction bias
            feeds[name] = np.zeros(trace.num_experts, np.float32)
        elif name == "placement":
            feeds[name] = np.arange(trace.num_experts, dtype=np.int32).reshape(-1, 1)
        elif name == "phase":
            phases = np.unique(trace.phase[tokens])
            feeds[name] = int(phases[0]) if phases.size == 1 else 2  # 2: a mixed batch
        else:
            raise InputError(f"policy input '{name}': a trace has no such data (it gives "
                             f"logits, request_ids, positions, phase; bias and placement "
                             f"default to zeros and the home placement)")
    return feeds



class Options:
    """What `evaluate` measures beyond the routing itself (see its documentation)."""

    def __init__(self, trace: Trace, ranks=1, balance=None, balance_window=4,
                 redundant=None, hardware=None, model=None, expert_dtype=None,
                 batch_sizes=None, memory=None, cache_experts=None, memory_interval=1,
                 memory_knobs=None, balance_knobs=None):
        E = trace.num_experts
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks <= 0 or E % ranks:
            raise InputError(f"ranks = {ranks!r}: must be a positive divisor of num_experts "
                             f"= {E} (the home placement splits the experts into equal "
                             f"contiguous blocks)")
        self.ranks = ranks
        rules = _balance.parse_rules(balance)   # checked at one rank too
        self.balance = rules if ranks > 1 else []
        self.eplb = self.libra = None
        if ranks > 1 and "eplb" in self.balance:
            self.eplb = _balance.EplbHistory(E, ranks, trace.groups, balance_window,
                                             ranks if redundant is None else redundant)
        if ranks > 1 and "libra" in self.balance:
            self.libra = _balance.LibraOracle(E, ranks, balance_knobs)
        self.geometry = _hardware.expert_geometry(trace, model, expert_dtype)
        self.profiles = _hardware.profiles(hardware) if hardware else {}
        if self.profiles and self.geometry is None:
            raise InputError("hardware profiles need the experts' sizes: pass model= "
                             "(--model CONFIG: a config.json with hidden_size and "
                             "moe_intermediate_size) or record them in the trace's meta.json")
        self.batch_sizes = _positive_ints(batch_sizes, "batch size") if batch_sizes else []
        if self.batch_sizes and not self.profiles:
            raise InputError("batch_sizes (--batch-sizes) model the speedup on a hardware "
                             "profile: pass hardware= (--hardware) too")
        self.memory = _memory.parse_rules(memory)
        self.dynaexq = self.expertflow = None
        if cache_experts is not None and not self.memory:
            raise InputError("cache_experts (--cache-experts) sizes the memory rules: pass "
                             "memory= (--memory dynaexq,expertflow) too")
        if self.memory:
            if isinstance(cache_experts, bool) or not isinstance(cache_experts, int) \
                    or not 1 <= cache_experts <= E:
                raise InputError(f"cache_experts (--cache-experts) = {cache_experts!r}: the "
                                 f"memory rules need the experts per layer that fit, an "
                                 f"integer in [1, {E}]")
            layers = len(trace.layers)
            if "dynaexq" in self.memory:
                self.dynaexq = _memory.DynaExqReplay(E, layers, cache_experts,
                                                     memory_interval, self.geometry,
                                                     memory_knobs)
            if "expertflow" in self.memory:
                self.expertflow = _memory.ExpertFlowReplay(E, trace.top_k, layers,
                                                           cache_experts, self.geometry,
                                                           memory_knobs)
        self.cache_experts = cache_experts
        self.request_ids_known = trace.request_ids_known

    def describe(self) -> dict:
        out = {"ranks": self.ranks, "balance": self.balance}
        if self.libra:
            out["libra_token_rank"] = ("request id mod ranks" if self.request_ids_known else
                                       "index in the step mod ranks (no request ids)")
        if self.geometry:
            out["experts"] = self.geometry
        if self.profiles:
            out["hardware"] = self.profiles
        if self.memory:
            out["memory"] = {"rules": self.memory, "cache_experts": self.cache_experts}
            if self.expertflow:
                out["memory"]["expertflow_expert_bytes"] = self.expertflow.expert_bytes
                out["memory"]["expertflow_expert_bytes_from"] = self.expertflow.bytes_from
            if self.geometry:
                out["memory"]["cache_bytes_per_layer"] = \
                    self.cache_experts * self.geometry["expert_bytes"]
        return out


def _positive_ints(values, what) -> List[int]:
    if isinstance(values, str):
        values = values.split(",")
    out = []
    for v in values:
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise InputError(f"{what} '{v}': not an integer") from None
        if n <= 0:
            raise InputError(f"{what} {n}: must be positive")
        out.append(n)
    return out


def _step_metrics(ids, probs, experts, ranks):
    counts = _counts(ids, experts)
    loads = _balance.rank_loads(counts, ranks)
    rank_active = (counts > 0).reshape(ranks, -1).sum(axis=1)
    active = int((counts > 0).sum())
    # tokens per ACTIVE expert: over all E it would be T * k / E whatever the policy does
    return {"counts": counts, "active": active,
            "mean": counts.sum() / active if active else 0.0,
            "max": counts.max(), "assignments": int(counts.sum()),
            "imbalance": _balance.imbalance(loads), "rank_active_max": int(rank_active.max()),
            "mass": mass_kept(probs, ids)}


def _phase_groups(trace: Trace, step_tokens: List[np.ndarray]):
    """phase name -> [(step index, the step's token indices of that phase)]."""
    out: Dict[str, list] = {}
    for i, tokens in enumerate(step_tokens):
        out.setdefault(ALL, []).append((i, tokens))
        phases = trace.phase[tokens]
        for code in np.unique(phases):
            out.setdefault(PHASE_NAMES[int(code)], []).append((i, tokens[phases == code]))
    return out


def _mean(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _routing_summary(steps: List[dict], opts: Options) -> dict:
    active = np.array([s["active"] for s in steps], dtype=np.float64)
    out = {
        "steps": len(steps),
        "tokens": int(sum(s["mass"].size for s in steps)),
        "experts_active_mean": float(active.mean()),
        "experts_active_p99": float(np.percentile(active, 99)),
        "mass_kept_mean": float(np.concatenate([s["mass"] for s in steps]).mean()),
        "tokens_per_expert_mean": float(np.mean([s["mean"] for s in steps])),
        "tokens_per_expert_max": float(np.mean([s["max"] for s in steps])),
        "ep_imbalance": _mean(s["imbalance"] for s in steps),
        "rank_experts_active_max": float(np.mean([s["rank_active_max"] for s in steps])),
    }
    if opts.geometry:
        out["bytes_read_mean"] = float(active.mean()) * opts.geometry["expert_bytes"]
    if opts.profiles:
        out["modeled_time_us"] = {
            name: 1e6 * float(np.mean([_hardware.layer_time(s["active"], s["assignments"],
                                                            opts.geometry, profile)
                                       for s in steps]))
            for name, profile in opts.profiles.items()}
    return out


def _model_summaries(trace: Trace, probs: Dict[int, np.ndarray], groups,
                     opts: Options) -> Dict[int, Dict[str, dict]]:
    """{layer: {phase: summary}} of the trace's own ids (layers that have them): the same
    for every knob setting, so computed once."""
    out = {}
    for layer in trace.layers:
        if layer not in trace.ids:
            continue
        ids = trace.ids[layer].astype(np.int64)
        out[layer] = {phase: _routing_summary([_step_metrics(ids[t], probs[layer][t],
                                                             trace.num_experts, opts.ranks)
                                               for _, t in members], opts)
                      for phase, members in groups.items()}
    return out


def _layer_metrics(trace: Trace, ids: np.ndarray, probs: np.ndarray,
                   step_tokens: List[np.ndarray], groups, opts: Options,
                   model_phases: Optional[Dict[str, dict]]) -> dict:
    E = trace.num_experts
    step_ids = [ids[tokens] for tokens in step_tokens]
    all_counts = [_counts(s, E) for s in step_ids]
    plans = opts.eplb.plans(all_counts) if opts.eplb else None
    dynaexq = opts.dynaexq.replay(step_ids) if opts.dynaexq else None
    expertflow = None
    if opts.expertflow:
        masses = [probs[tokens].sum(axis=0) for tokens in step_tokens]
        expertflow = opts.expertflow.replay(step_ids, masses)
    layer = {}
    for phase, members in groups.items():
        steps = [_step_metrics(ids[t], probs[t], E, opts.ranks) for _, t in members]
        metrics = _routing_summary(steps, opts)
        if plans is not None:
            metrics["ep_imbalance_eplb"] = _mean(
                _balance.imbalance(_balance.placed_loads(s["counts"], *plans[i], opts.ranks))
                if plans[i] is not None else s["imbalance"]
                for (i, _), s in zip(members, steps))
        if opts.libra:
            metrics["ep_imbalance_libra"] = _mean(
                opts.libra.imbalance(ids[t], trace.request_ids[t] if trace.request_ids_known
                                     else None) for _, t in members)
        if dynaexq is not None:
            metrics.update(_memory.dynaexq_metrics([dynaexq[i] for i, _ in members],
                                                   [ids[t] for _, t in members]))
        if expertflow is not None:
            metrics.update(_memory.expertflow_metrics([expertflow[i] for i, _ in members],
                                                      [ids[t] for _, t in members],
                                                      with_stalls=phase == ALL))
        if model_phases is not None:
            model = model_phases[phase]
            metrics["model_experts_active_mean"] = model["experts_active_mean"]
            metrics["model_experts_active_p99"] = model["experts_active_p99"]
            metrics["model_mass_kept_mean"] = model["mass_kept_mean"]
            metrics["mass_kept_relative"] = (metrics["mass_kept_mean"] / model["mass_kept_mean"]
                                             if model["mass_kept_mean"] > 0 else None)
            metrics["model_rank_experts_active_max"] = model["rank_experts_active_max"]
            if "modeled_time_us" in model:
                metrics["model_modeled_time_us"] = model["modeled_time_us"]
                metrics["modeled_speedup"] = {
                    name: model["modeled_time_us"][name] / t if t > 0 else None
                    for name, t in metrics["modeled_time_us"].items()}
        layer[phase] = metrics
    return layer


def _route(router, policy, trace: Trace, logits: np.ndarray, tokens: np.ndarray,
           setting: dict, layer: int) -> np.ndarray:
    """The policy's ids for `tokens` of MoE layer `layer` (a per-layer knob's value is
    the layer's: lists are indexed by the trace's layer numbers)."""
    out = router(logits=np.ascontiguousarray(logits[tokens]), knobs=setting, layer=layer,
                 **_feeds(router, trace, tokens))
    if "topk_ids" not in out:
        raise InputError(f"policy '{policy}' returns no topk_ids (results: {sorted(out)}): "
                         f"not a router to evaluate")
    return np.asarray(out["topk_ids"], dtype=np.int64)


def _model_ids(trace: Trace, layer: int, logits: np.ndarray) -> np.ndarray:
    """The trace's own ids of the layer, else the top-k of its logits (plain layout)."""
    if layer in trace.ids:
        return trace.ids[layer].astype(np.int64)
    order = np.argsort(-logits, axis=1, kind="stable")[:, :trace.top_k]
    return np.where(np.isfinite(np.take_along_axis(logits, order, 1)), order, -1)


def _speedup_vs_batch(router, policy, trace: Trace, logits: Dict[int, np.ndarray],
                      setting: dict, opts: Options, max_batches: int = 32) -> dict:
    """Modeled speedup over the model's own routing (the trace's ids, else the top-k of
    its logits) when the trace's tokens (decode tokens if any, else all; in step order)
    are regrouped into batches of each size."""
    decode = np.nonzero(trace.phase == 1)[0]
    pool = decode if decode.size else np.arange(trace.num_tokens)
    pool = pool[np.argsort(trace.step[pool], kind="stable")]
    out = {"tokens": "decode" if decode.size else "all", "batch_sizes": []}
    curves: Dict[str, list] = {name: [] for name in opts.profiles}
    model_ids = {layer: _model_ids(trace, layer, logits[layer]) for layer in trace.layers}
    for size in opts.batch_sizes:
        batches = [pool[i:i + size] for i in range(0, pool.size - size + 1, size)]
        batches = batches[:max_batches]
        if not batches:
            continue
        times = {name: [0.0, 0.0] for name in opts.profiles}  # [policy, model]
        for layer in trace.layers:
            for tokens in batches:
                ids = _route(router, policy, trace, logits[layer], tokens, setting, layer)
                for which, chosen in ((0, ids), (1, model_ids[layer][tokens])):
                    counts = _counts(chosen, trace.num_experts)
                    for name, profile in opts.profiles.items():
                        times[name][which] += _hardware.layer_time(
                            int((counts > 0).sum()), int(counts.sum()), opts.geometry,
                            profile)
        out["batch_sizes"].append(size)
        for name, (policy_time, model_time) in times.items():
            curves[name].append(model_time / policy_time if policy_time > 0 else None)
    out["speedup"] = curves
    return out


def evaluate(trace, policy, knobs=None, sweep=None, ranks: int = 1, *, balance=None,
             balance_window: int = 4, redundant: Optional[int] = None,
             balance_knobs: Optional[dict] = None, hardware=None, model=None,
             expert_dtype: Optional[str] = None, batch_sizes=None, memory=None,
             cache_experts: Optional[int] = None, memory_interval: int = 1,
             memory_knobs: Optional[dict] = None, **shape) -> dict:
    """Run `policy` on every layer and step of `trace` (a Trace or a trace directory) for
    each knob setting (`knobs`, with `sweep`: 'knob=a:b[:step]' strings, (knob, values)
    pairs or a {knob: values} dict) and report, per layer and phase, the metrics of the
    module documentation; returns {"trace", "policy", "options", "results": [{"knobs",
    "layers": {layer: {phase: metrics}}, "speedup_vs_batch"?}]}.

    ranks, balance ("home", "eplb", "libra"; a list or comma-separated), balance_window,
    redundant, balance_knobs (Libra's knobs; EPLB has none): expert-parallel imbalance
    (balance.py).
    hardware (profile names: h100, h200, a100, this-cpu), model (a config.json path or
    dict for the experts' sizes; default: meta.json's), expert_dtype, batch_sizes:
    bytes read, modeled layer time and speedup (hardware.py).
    memory ("dynaexq", "expertflow"), cache_experts, memory_interval, memory_knobs:
    expert memory under a budget (memory.py).
    `shape` binds or overrides the policy's shape (groups, topk_groups, ...)."""

    source = trace.model if isinstance(trace, Trace) else str(trace)
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    else:
        check_trace(trace)
    if trace.num_tokens == 0 or not trace.layers:
        raise InputError(f"trace {source}: no tokens to evaluate ({trace.num_tokens} tokens, "
                         f"{len(trace.layers)} layers)")
    opts = Options(trace, ranks=ranks, balance=balance, balance_window=balance_window,
                   redundant=redundant, hardware=hardware, model=model,
                   expert_dtype=expert_dtype, batch_sizes=batch_sizes, memory=memory,
                   cache_experts=cache_experts, memory_interval=memory_interval,
                   memory_knobs=memory_knobs, balance_knobs=balance_knobs)
    # devices / slots: the home placement of EP-aware policies (unused by the others)
    implied = {"devices": ranks, "slots": trace.num_experts}
    if trace.groups is not None:
        implied["groups"] = trace.groups
    _require_router(policy)
    settings = _sweep_settings(knobs, sweep)
    router = _compile_for_trace(policy, {"experts": trace.num_experts,
                                         "top_k": trace.top_k}, implied,
                                {k: v for k, v in shape.items() if v is not None},
                                {name for setting in settings for name in setting})
    step_tokens = _steps(trace.step)
    groups = _phase_groups(trace, step_tokens)
    logits = {layer: trace.layer_logits(layer) for layer in trace.layers}
    probs = {layer: softmax(x) for layer, x in logits.items()}
    model = _model_summaries(trace, probs, groups, opts)
    results = []
    for setting in settings:
        layers = {}
        for layer in trace.layers:
            chosen = [_route(router, policy, trace, logits[layer], tokens, setting, layer)
                      for tokens in step_tokens]
            width = max(c.shape[1] for c in chosen)
            ids = np.full((trace.num_tokens, width), -1, dtype=np.int64)
            for tokens, c in zip(step_tokens, chosen):
                ids[tokens, :c.shape[1]] = c
            layers[str(layer)] = _layer_metrics(trace, ids, probs[layer], step_tokens, groups,
                                                opts, model.get(layer))
        result = {"knobs": setting, "layers": layers}
        if opts.batch_sizes:
            result["speedup_vs_batch"] = _speedup_vs_batch(router, policy, trace, logits,
                                                           setting, opts)
        results.append(result)
    return {"trace": source, "policy": str(policy) if len(str(policy)) < 200 else "<text>",
            "ranks": ranks, "num_experts": trace.num_experts, "top_k": trace.top_k,
            "options": opts.describe(), "results": results}


_UNUSED_SIZE = re.compile(r"--([a-z-]+) \S+ is not used by this policy file")


def _compile_for_trace(policy, sizes: dict, implied: dict, requested: dict, knobs_set):
    """Compile `policy` for the trace: `sizes` (experts, top_k) and `requested` (the
    caller's shape=, moe-eval's --groups / --shape) must be used by the policy, as in
    moe-compile; `implied` (the trace's groups, the home placement's devices and slots)
    is bound only where the policy has that parameter. Compiler warnings about the
    default of a knob in `knobs_set` (set or swept here) are left out."""
    from .. import compile as _compile
    from .._errors import CompileError, CompileWarning
    bind = {**implied, **sizes, **requested}
    while True:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CompileWarning)
                router = _compile(policy, allow_unused=False, **bind)
            for w in caught:
                if not (isinstance(w.message, CompileWarning) and w.message.knob in knobs_set):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return router
        except CompileError as error:
            unused = _UNUSED_SIZE.search(str(error))
            name = unused.group(1).replace("-", "_") if unused else None
            if name not in implied or name in requested:
                raise
            del bind[name]


def _require_router(policy) -> None:
    """A file with rules only (eplb, libra's balance, dynaexq, ...) is not evaluated as a
    router: say where rules go instead of failing on their shape."""
    from .._compile import policy_path
    with open(policy_path(policy), errors="replace") as f:
        text = f.read()
    if not re.search(r"^\s*moe\.router\s+@", text, re.M):
        raise InputError(f"policy '{policy}' has no router (moe.router) to evaluate: "
                         f"balance rules run through balance= (--balance eplb,libra), "
                         f"residency and prefetch rules through memory= (--memory "
                         f"dynaexq,expertflow)")


def _steps(step: np.ndarray) -> List[np.ndarray]:
    """The token indices of each step, in step order."""
    step = np.asarray(step)
    return [np.nonzero(step == s)[0] for s in np.unique(step)]
