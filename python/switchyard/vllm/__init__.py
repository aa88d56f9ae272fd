"""vLLM: Switchyard as the routing backend of a vLLM engine.

The plugin (nothing to write): installing the package registers a vLLM general plugin
(entry point group `vllm.general_plugins`, switchyard.vllm.plugin:register). With

    SWITCHYARD_POLICY=xshare            # a shipped policy's name or a .mlir file
    SWITCHYARD_KNOBS='{"budget": 8}'    # optional: the policy's knobs, a JSON object

in the environment of `vllm.LLM(...)` or of the OpenAI server, every MoE layer of the
served model routes with the policy, compiled when the model loads for the layer's
shape (experts, top-k, groups, scaling, renormalisation); unset, vLLM is untouched.
See switchyard.vllm.plugin and docs/vllm.md.

Wiring it yourself: `custom_routing_function` has the signature of vLLM's (and
SGLang's) `custom_routing_function(hidden_states, gating_output, topk, renormalize)`
and returns `(topk_weights float32 [T, k], topk_ids int32 [T, k])`:

    from switchyard.vllm import custom_routing_function
    FusedMoE(..., custom_routing_function=custom_routing_function(
        "xshare", experts=64, top_k=8, knobs={"budget": 32}))

Give the shape (experts= and top_k=, or model=config) to compile ahead of the first
call: that is what makes it safe under torch.compile (the call is then one opaque op,
torch.ops.switchyard.route_step). Without it the policy is compiled at the first call
of each shape, which only works in eager mode.

Every result honours vLLM's contract: ids int32 in [0, E), weights float32; a slot a
policy leaves empty gets weight 0 and an expert the token (or else the batch) already
uses. Batch-aware policies read request ids / positions / the phase from the step's
batch metadata (the plugin sets it from vLLM's model runner; wiring it yourself:
switchyard.set_batch_metadata(...)).
"""
from ..routing import ROUTING_OUTPUTS, bind, custom_routing_function

__all__ = ["custom_routing_function", "bind", "ROUTING_OUTPUTS"]
