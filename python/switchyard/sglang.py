"""SGLang: a Switchyard policy as the `custom_routing_function` of SGLang's
`select_experts` (TopK / TopKConfig): SGLang calls it as
`custom_routing_function(hidden_states=..., gating_output=..., topk=..., renormalize=...)`
and expects `(topk_weights, topk_ids)`, vLLM's signature.

    from switchyard.sglang import custom_routing_function
    TopK(top_k=8, custom_routing_function=custom_routing_function("xshare_spec"))

Per-token request ids / phase for batch-aware policies: switchyard.set_batch_metadata(...)
from the scheduler's ForwardBatch before the forward pass (SGLang passes none).
"""
from .routing import custom_routing_function  # vLLM's signature, engine-neutral

__all__ = ["custom_routing_function"]
