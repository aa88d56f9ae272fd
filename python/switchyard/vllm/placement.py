"""vLLM's expert placement under expert parallelism (--enable-expert-parallel) as a
Switchyard placement, for policies that take one (xshare_ep).

vLLM places the experts of every MoE layer on the EP ranks by its own rule
(determine_expert_map: `linear` or `round_robin`, experts split as evenly as possible).
The placement is the same on every rank and every layer of a shape, so it is built once
from vLLM's parallel config with vLLM's function, one rank at a time: expert e on rank r
at local index l is physical slot r * S + l, S = ceil(E / ranks) slots per rank. EPLB's
logical -> physical mapping of redundant experts stays vLLM's (after routing).
"""
from typing import Any, Optional, Tuple

import torch


def expert_parallel(vllm_config: Any = None) -> Optional[Tuple[int, str]]:
    """(EP ranks, placement strategy) when vLLM runs the MoE layers expert-parallel
    (FusedMoEParallelConfig's rule: TP x DP x PCP ranks > 1 with
    enable_expert_parallel), else None."""
    if vllm_config is None:
        try:
            from vllm.config import get_current_vllm_config
            vllm_config = get_current_vllm_config()
        except Exception:   # outside a vLLM model build
            return None
    parallel = getattr(vllm_config, "parallel_config", None)
    if parallel is None or not getattr(parallel, "enable_expert_parallel", False):
        return None
    ranks = int(parallel.tensor_parallel_size) * int(parallel.data_parallel_size) * \
        int(getattr(parallel, "prefill_context_parallel_size", 1) or 1)
    if ranks <= 1:
        return None
    return ranks, str(getattr(parallel, "expert_placement_strategy", "linear"))


def placement_tables(experts: int, ranks: int, strategy: str):
    """({ABI name: table}, slots): the placement's ABI parameters for `experts`
    experts on `ranks` ranks — placement.replica_count int32 [E] (one copy each) and
    placement.log2phy int32 [E, R], R = slots - E + 1 columns (the table's width for
    `slots` slots)."""
    from vllm.model_executor.layers.fused_moe.expert_map_manager import determine_expert_map
    per_rank = -(-experts // ranks)
    slots = per_rank * ranks
    log2phy = torch.full((experts, slots - experts + 1), -1, dtype=torch.int32)
    for rank in range(ranks):
        _, expert_map, _ = determine_expert_map(ranks, rank, experts, strategy)
        local = torch.nonzero(expert_map >= 0).flatten()
        log2phy[local, 0] = rank * per_rank + expert_map[local]
    return {"placement.replica_count": torch.ones(experts, dtype=torch.int32),
            "placement.log2phy": log2phy}, slots
