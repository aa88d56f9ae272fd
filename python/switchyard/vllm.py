"""vLLM: a Switchyard policy as vLLM's `custom_routing_function`.

vLLM's FusedMoE layer calls `custom_routing_function(hidden_states, gating_output, topk,
renormalize)` and expects `(topk_weights float32 [T, k], topk_ids int32 [T, k])`. The
function returned here compiles the policy for the call's shape (E from gating_output,
k from topk, renormalize as norm_topk_prob) once, through the JIT cache, and runs it on
the call's device (CPU tensors: the host target; CUDA tensors: the GPU kernels on the
current stream).

    from switchyard.vllm import custom_routing_function
    FusedMoE(..., custom_routing_function=custom_routing_function("xshare",
                                                                  knobs={"budget": 32}))

Batch-aware policies read per-token request ids / the phase from the batch metadata the
engine sets per step (switchyard.set_batch_metadata(request_ids=..., phase=...), e.g. in
the model runner before the forward pass): vLLM itself passes none to its router.
"""
from typing import Any, Callable, Dict, Optional, Tuple

from ._compile import compile as _compile

ROUTING_OUTPUTS = ("topk_ids", "topk_weights")


def custom_routing_function(policy: str = "topk_softmax", *,
                            knobs: Optional[Dict[str, Any]] = None,
                            **shape: Any) -> Callable:
    """A function with vLLM's routing signature running `policy` (a file, text or a
    shipped policy's name). `shape` adds binding values (groups=, topk_groups=,
    scaling=, ...); knobs are the policy's run-time defaults."""
    routers: Dict[tuple, Any] = {}

    def route(hidden_states, gating_output, topk: int, renormalize: bool
              ) -> Tuple[Any, Any]:
        experts = int(gating_output.shape[-1])
        target = "cuda" if getattr(gating_output, "is_cuda", False) else "host"
        key = (experts, int(topk), bool(renormalize), target)
        router = routers.get(key)
        if router is None:
            router = _compile(policy, experts=experts, top_k=int(topk),
                              norm_topk_prob=bool(renormalize), target=target, knobs=knobs,
                              outputs=ROUTING_OUTPUTS, allow_unused=True, **shape)
            routers[key] = router
        out = router(logits=gating_output.reshape(-1, experts))
        return out["topk_weights"], out["topk_ids"]

    route.policy = policy
    return route
