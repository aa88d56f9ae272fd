"""Expert memory under a budget, replayed over a routed trace by the compiled residency
and prefetch rules (policies/dynaexq.mlir, policies/expertflow.mlir; docs/traces.md,
"Expert memory").

The budget is `cache_experts`: the experts per layer that fit in fast memory (GPU
memory, or high precision for DynaExq). Each layer is replayed on its own, step by
step, with the experts the evaluated policy routed to:

  dynaexq     every `interval` steps the @dynaexq rule updates the hotness from the
              interval's expert counts and picks the high-precision set; its budget
              knobs are set so that exactly `cache_experts` experts per layer fit
              (budget = layers * E * lo_bytes + layers * cache_experts * hi_bytes,
              nothing fixed). hi_hit_rate: the share of token-expert assignments whose
              expert was high precision when the step ran (the rest run on the
              low-precision copy: DynaExq never stalls); promoted_bytes_mean: the
              high-precision bytes promoted per step.
  expertflow  the @expertflow rule once per step, after the step ran: the experts the
              step requested are loaded on demand, the experts its pre-gate mass
              expects (the step's own routing probabilities, as a predictor of the next
              step: decode batches drift slowly) are prefetched, with a cache of
              `cache_experts` experts; stall and overfetch events feed its step size.
              hit_rate: the share of requested experts resident when the step ran;
              stall_ms_mean: per step, misses * expert_bytes / bandwidth (the rule's
              own knobs), the modeled time the step waits for demand loads.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .._errors import InputError
from .rules import rule_defaults

RULES = ("dynaexq", "expertflow")


def parse_rules(rules) -> List[str]:
    if not rules:
        return []
    if isinstance(rules, str):
        rules = [r for r in rules.split(",") if r]
    for rule in rules:
        if rule not in RULES:
            raise InputError(f"memory rule '{rule}': not one of {', '.join(RULES)}")
    return list(dict.fromkeys(rules))


def _requested(ids: np.ndarray, experts: int) -> np.ndarray:
    flags = np.zeros(experts, bool)
    valid = ids[ids >= 0]
    flags[valid] = True
    return flags


class DynaExqReplay:
    def __init__(self, experts: int, layers: int, cache_experts: int, interval: int,
                 geometry: Optional[dict], knobs: Optional[dict] = None):
        from .. import compile as _compile
        if interval <= 0:
            raise InputError(f"memory interval = {interval}: must be a positive number "
                             f"of steps")
        knobs = dict(knobs or {})
        hi = int(knobs.get("hi_bytes", geometry["expert_bytes"] if geometry
                           else rule_defaults("dynaexq")["hi_bytes"]))
        lo = int(knobs.get("lo_bytes", hi // 4))
        knobs.update({"hi_bytes": hi, "lo_bytes": lo, "layers": layers, "fixed_bytes": 0,
                      "budget_bytes": layers * experts * lo + layers * cache_experts * hi})
        # Compiled with the values in: the default budget (Qwen3-30B-A3B's) cannot hold
        # the low-precision copies of more than about 265 experts.
        self.rule = _compile("dynaexq", entry="dynaexq", experts=experts, knobs=knobs,
                             freeze_knobs=True)
        self.knobs, self.hi_bytes = {}, hi
        self.experts, self.interval = experts, interval

    def replay(self, step_ids: List[np.ndarray]) -> List[dict]:
        """Per step: {"hi": bool [E] set when the step ran, "promoted_bytes"}."""
        hotness = np.zeros(self.experts, np.float32)
        current = np.zeros(self.experts, bool)
        counts = np.zeros(self.experts, np.int64)
        out = []
        for i, ids in enumerate(step_ids):
            valid = ids[ids >= 0]
            counts += np.bincount(valid, minlength=self.experts)[:self.experts]
            record = {"hi": current.copy(), "promoted_bytes": 0}
            if (i + 1) % self.interval == 0:
                result = self.rule(hotness=hotness, counts=counts.astype(np.int32),
                                   current=current, knobs=self.knobs)
                hotness = np.asarray(result["hotness_out"], np.float32)
                current = np.asarray(result["hi_set"], bool)
                record["promoted_bytes"] = int(np.asarray(result["num_promotions"])[0]) \
                    * self.hi_bytes
                counts[:] = 0
            out.append(record)
        return out


class ExpertFlowReplay:
    def __init__(self, experts: int, top_k: int, layers: int, cache_experts: int,
                 geometry: Optional[dict], knobs: Optional[dict] = None):
        from .. import compile as _compile
        memory_knobs = knobs
        knobs = dict(knobs or {})
        if geometry and "expert_bytes" not in knobs:
            knobs["expert_bytes"] = int(geometry["expert_bytes"])
        knobs.update({"capacity": cache_experts, "layers": layers})
        # Compiled with the values in: the policy's default capacity (32) may not fit E.
        defaults = rule_defaults("expertflow", top_k=top_k)
        self.rule = _compile("expertflow", entry="expertflow", experts=experts, top_k=top_k,
                             knobs=knobs, freeze_knobs=True)
        self.knobs = {}
        self.expert_bytes = float(knobs.get("expert_bytes", defaults["expert_bytes"]))
        # Recorded with the results: a stall time from the rule's default size says little.
        self.bytes_from = ("the experts' sizes" if geometry else
                           "--memory-set expert_bytes" if "expert_bytes" in (memory_knobs or {})
                           else "the rule's default (DeepSeek-V2-Lite's): pass --model or "
                                "--memory-set expert_bytes for the trace's model")
        self.bandwidth = float(knobs.get("bandwidth", defaults["bandwidth"]))
        self.experts = experts

    def replay(self, step_ids: List[np.ndarray], step_mass: List[np.ndarray]) -> List[dict]:
        """Per step: {"resident": bool [E] when the step ran, "requested", "stall_s"}."""
        E = self.experts
        resident = np.zeros(E, bool)
        last_use = np.full(E, -1, np.int32)
        state = {"step": 0, "stalls": 0, "overfetches": 0}
        prefetched = np.zeros(E, bool)  # loaded by prediction at the previous step
        out = []
        for now, (ids, mass) in enumerate(zip(step_ids, step_mass)):
            requested = _requested(ids, E)
            missed = requested & ~resident
            unused = prefetched & ~requested
            events = np.array([1] * int(missed.sum()) + [2] * int(unused.sum()), np.int32)
            out.append({"resident": resident.copy(), "requested": requested,
                        "stall_s": float(missed.sum()) * self.expert_bytes / self.bandwidth})
            result = self.rule(
                pregate_mass=np.asarray(mass, np.float32), requested=requested,
                resident=resident, last_use=last_use, now=np.array([now], np.int32),
                step=np.array([state["step"]], np.int32),
                stalls=np.array([state["stalls"]], np.int32),
                overfetches=np.array([state["overfetches"]], np.int32), events=events,
                knobs=self.knobs)
            loads = np.asarray(result["loads"])
            loads = loads[loads >= 0]
            prefetched = np.zeros(E, bool)
            prefetched[loads] = True
            prefetched &= ~requested
            resident = np.asarray(result["resident_out"], bool)
            last_use = np.asarray(result["last_use_out"], np.int32)
            state = {"step": int(np.asarray(result["step_size"])[0]),
                     "stalls": int(np.asarray(result["stalls_out"])[0]),
                     "overfetches": int(np.asarray(result["overfetches_out"])[0])}
        return out


def dynaexq_metrics(records: List[dict], step_ids: List[np.ndarray]) -> Dict[str, float]:
    hits = total = 0
    for record, ids in zip(records, step_ids):
        valid = ids[ids >= 0]
        hits += int(record["hi"][valid].sum())
        total += valid.size
    return {"dynaexq_hi_hit_rate": hits / total if total else None,
            "dynaexq_promoted_bytes_mean": float(np.mean([r["promoted_bytes"]
                                                          for r in records]))}


def expertflow_metrics(records: List[dict], step_ids: List[np.ndarray],
                       with_stalls: bool) -> Dict[str, float]:
    hits = total = 0
    for record, ids in zip(records, step_ids):
        wanted = _requested(ids, len(record["resident"]))
        hits += int((wanted & record["resident"]).sum())
        total += int(wanted.sum())
    out = {"expertflow_hit_rate": hits / total if total else None}
    if with_stalls:
        out["expertflow_stall_ms_mean"] = 1e3 * float(np.mean([r["stall_s"] for r in records]))
    return out
