"""Engine-neutral routing entry points: a policy bound to one MoE layer shape as a step
router (`bind`), and a function with the `custom_routing_function(hidden_states,
gating_output, topk, renormalize) -> (topk_weights, topk_ids)` signature vLLM and SGLang
share (`custom_routing_function`). switchyard.vllm and switchyard.sglang re-export them;
the engine plugins build on them.

Every result honours the engines' contract: ids int32 in [0, E), weights float32; a slot
a policy leaves empty gets weight 0 and an expert the token (or else the batch) already
uses. Batch-aware policies read request ids / positions / the phase from the step's
batch metadata (switchyard.set_batch_metadata(...), which the vLLM plugin calls from
vLLM's model runner).
"""
from typing import Any, Callable, Dict, Optional, Tuple

from ._compile import compile as _compile
from ._errors import SwitchyardError

ROUTING_OUTPUTS = ("topk_ids", "topk_weights")


def bind(policy: str, *, experts: int, top_k: int, renormalize: Optional[bool] = None,
         knobs: Optional[Dict[str, Any]] = None, layer_inputs=(), target: str = "host",
         label: str = "", logits_dtypes=(), pinned=None, **shape: Any):
    """A StepRouter (switchyard._step) for one MoE layer shape: the policy compiled for
    the host (and, with target="cuda", for the GPU too) with only the routing results;
    `logits_dtypes` (torch.bfloat16 / torch.float16) adds host entries that read
    logits of that dtype in place; `pinned`: the StepRouter of the model's own routing
    for the same layer, which routes the requests that ask for it (pinned rows)."""
    import torch
    from ._step import StepRouter
    if renormalize is not None:
        shape["norm_topk_prob"] = bool(renormalize)
    def routing(**options):   # the policy with only its routing results, every slot
        return _compile(policy, experts=experts, top_k=top_k, knobs=knobs,   # an expert
                        outputs=ROUTING_OUTPUTS, allow_unused=True, fill_empty_slots=True,
                        **options, **shape)

    # Single-threaded host code: the engine's own threads own the cores (an OpenMP
    # team of ours would spin against vLLM's torch threads between calls).
    host = routing(host_threads_min_work=0)
    narrow = {dtype: routing(host_threads_min_work=0, input_dtypes={"logits": dtype})
              for dtype in logits_dtypes if dtype in (torch.bfloat16, torch.float16)}
    cuda = routing(target="cuda") if target == "cuda" else None
    return StepRouter(host, experts=experts, layer_inputs=layer_inputs, cuda_router=cuda,
                      label=label, narrow_routers=narrow, pinned=pinned)


def custom_routing_function(policy: str = "topk_softmax", *,
                            knobs: Optional[Dict[str, Any]] = None,
                            experts: Optional[int] = None, top_k: Optional[int] = None,
                            renormalize: Optional[bool] = None,
                            **shape: Any) -> Callable:
    """A function with vLLM's routing signature running `policy` (a file, text or a
    shipped policy's name). `experts` / `top_k` (and `renormalize`) compile it now;
    `shape` adds binding values (groups=, topk_groups=, scaling=, model=...); knobs
    are the policy's run-time defaults."""
    import torch

    steps: Dict[tuple, Any] = {}
    if experts is not None and top_k is not None:
        step = bind(policy, experts=experts, top_k=top_k, renormalize=renormalize,
                    knobs=knobs, **shape)
        steps[(experts, top_k, renormalize)] = step

    def route(hidden_states, gating_output, topk: int, renormalize: bool
              ) -> Tuple[Any, Any]:
        num_experts = int(gating_output.shape[-1])
        step = steps.get((num_experts, topk, renormalize)) or \
            steps.get((num_experts, topk, None))
        if step is None:
            if torch.compiler.is_compiling():
                raise SwitchyardError(
                    f"switchyard custom_routing_function('{policy}'): first called "
                    f"inside torch.compile for {num_experts} experts, top-{topk}: give the "
                    "shape when you create it (experts=, top_k=) so the policy is "
                    "compiled before tracing")
            step = bind(policy, experts=num_experts, top_k=int(topk),
                        renormalize=bool(renormalize), knobs=knobs, **shape)
            steps[(num_experts, topk, renormalize)] = step
        return torch.ops.switchyard.route_step(gating_output.reshape(-1, num_experts), [],
                                               step.handle)

    route.policy = policy
    return route


__all__ = ["custom_routing_function", "bind", "ROUTING_OUTPUTS"]
