"""Expert-parallel imbalance of a routed trace under the home placement and under the
plans of the shipped balance rules, computed by the compiled rules themselves
(policies/eplb.mlir, policies/libra.mlir) from the trace (docs/traces.md, "Balancing").

Loads are token-expert assignments. A rank's load is the sum of its experts' loads;
the imbalance of a step is max rank load / mean rank load (1 = balanced).

  home   expert e lives on rank e // (E / ranks), nothing replicated
  eplb   every `window` steps the @eplb rule plans a placement (E + redundant slots,
         `redundant` replicas, one node, the trace's expert groups) from the loads of
         the previous `window` steps; the next `window` steps run on that plan, each
         expert's load split evenly over its replicas (slot p on rank p // (P / ranks));
         the first window runs on the home placement. The plan comes from history: it
         shows what EPLB achieves on a workload that drifts.
  libra  the @libra rule on each step's own routing (token t's rank: its request id
         mod ranks, data-parallel attention; a trace without request ids spreads a
         step's tokens round-robin, by their index in the step): replication plus
         remote-token sharding.
         Libra predicts the routing one layer ahead from the hidden states, which a
         trace does not hold, so this is the plan of a perfect predictor: an upper
         bound of Libra's effect.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .._errors import InputError
from .rules import rule_defaults

RULES = ("home", "eplb", "libra")


def parse_rules(rules) -> List[str]:
    if rules is None:
        return ["home"]
    if isinstance(rules, str):
        rules = [r for r in rules.split(",") if r]
    out = []
    for rule in rules:
        if rule not in RULES:
            raise InputError(f"balance rule '{rule}': not one of {', '.join(RULES)}")
        if rule not in out:
            out.append(rule)
    return out or ["home"]


def rank_loads(counts: np.ndarray, ranks: int) -> np.ndarray:
    """Home placement: [ranks] loads of contiguous equal expert blocks."""
    return counts.reshape(ranks, -1).sum(axis=1)


def placed_loads(counts: np.ndarray, phy2log: np.ndarray, replicas: np.ndarray,
                 ranks: int) -> np.ndarray:
    """EPLB placement: each expert's load split evenly over its replicas."""
    slot = counts[phy2log].astype(np.float64) / np.maximum(replicas[phy2log], 1)
    return slot.reshape(ranks, -1).sum(axis=1)


def imbalance(loads: np.ndarray) -> Optional[float]:
    total = float(np.sum(loads))
    return float(np.max(loads) / (total / len(loads))) if total > 0 else None


class EplbHistory:
    """EPLB plans from the trace's own history, one layer at a time."""

    def __init__(self, experts: int, ranks: int, groups: Optional[int], window: int,
                 redundant: int):
        from .. import compile as _compile
        if window <= 0:
            raise InputError(f"balance window = {window}: must be a positive number of steps")
        if redundant < 0 or (experts + redundant) % ranks:
            raise InputError(f"redundant = {redundant}: E + redundant = "
                             f"{experts + redundant} slots must split evenly over "
                             f"{ranks} ranks")
        groups = groups if groups and experts % groups == 0 else 1
        self.rule = _compile("eplb", entry="eplb", experts=experts, groups=groups, nodes=1,
                             devices=ranks, slots=experts + redundant,
                             outputs=["phy2log", "replica_count", "gpu_loads_after"])
        self.ranks, self.window = ranks, window

    def plans(self, step_counts: List[np.ndarray]) -> List[Optional[tuple]]:
        """Per step: the (phy2log, replica_count) it runs on (None: home placement)."""
        out: List[Optional[tuple]] = []
        plan = None
        for i in range(len(step_counts)):
            if i and i % self.window == 0:
                history = np.sum(step_counts[i - self.window:i], axis=0).astype(np.float32)
                result = self.rule(loads=history)
                plan = (np.asarray(result["phy2log"]), np.asarray(result["replica_count"]))
            out.append(plan)
        return out


class LibraOracle:
    """Libra's replication + sharding on each step's routing (a perfect lookahead)."""

    def __init__(self, experts: int, ranks: int, knobs: Optional[dict] = None):
        self.experts, self.ranks = experts, ranks
        self.knobs = dict(knobs or {})
        # Below 4 experts the default replica count (4) is capped at E (the rule takes
        # extra_experts in [0, E]) and compiled in: the verifier checks the value the rule
        # is built with.
        self.frozen = {}
        if rule_defaults("libra", devices=ranks, hidden_size=8)["extra_experts"] > experts:
            self.frozen = {"extra_experts": self.knobs.pop("extra_experts", experts)}
        self._rules: Dict[int, object] = {}

    def imbalance(self, ids: np.ndarray, request_ids: Optional[np.ndarray]) -> Optional[float]:
        """`request_ids` None: the trace has none (tokens round-robin over the ranks)."""
        if not np.any(ids >= 0):
            return None
        from .. import compile as _compile
        width = ids.shape[1]
        rule = self._rules.get(width)
        if rule is None:
            # (hidden_size binds the file's predictor entry, which is not compiled)
            rule = _compile("libra", entry="libra", experts=self.experts, top_k=width,
                            devices=self.ranks, hidden_size=8, allow_unused=True,
                            outputs=["loads_after", "imbalance_after"],
                            knobs=self.frozen or None, freeze_knobs=bool(self.frozen))
            self._rules[width] = rule
        owner = np.arange(ids.shape[0]) if request_ids is None else request_ids
        token_rank = (np.asarray(owner, np.int64) % self.ranks).astype(np.int32)
        result = rule(next_topk_ids=np.ascontiguousarray(ids, np.int32),
                      token_gpu=token_rank, knobs=self.knobs)
        return float(np.asarray(result["imbalance_after"]).reshape(-1)[0])
