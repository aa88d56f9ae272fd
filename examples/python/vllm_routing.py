#!/usr/bin/env python3
"""A Switchyard policy as vLLM's / SGLang's custom_routing_function.

vLLM's FusedMoE calls `custom_routing_function(hidden_states, gating_output, topk,
renormalize)`; this calls the function the way vLLM does on a decode batch of 4
requests with 4 tokens each (a speculative verify step), with XShare-spec reading the
request ids from the batch metadata the engine sets for the step.

    .venv/bin/python examples/python/vllm_routing.py
    # in vLLM:  FusedMoE(..., custom_routing_function=custom_routing_function("xshare_spec"))
"""
import torch

import switchyard
from switchyard.vllm import custom_routing_function

tokens, experts, top_k = 16, 64, 4
hidden = torch.randn(tokens, 256)
gating_output = torch.randn(tokens, experts)
request_ids = torch.arange(tokens) // 4

plain = custom_routing_function("topk_softmax")
spec = custom_routing_function("xshare_spec", knobs={"budget": 4})

weights, ids = plain(hidden, gating_output, top_k, True)
print(f"topk_softmax: {len(ids.unique())} experts for {tokens} tokens; ids {tuple(ids.shape)} "
      f"{ids.dtype}, weights {weights.dtype}")
with switchyard.batch_metadata(request_ids=request_ids, phase="decode"):
    weights, ids = spec(hidden, gating_output, top_k, True)
per_request = [len(ids[request_ids == r].unique()) for r in range(4)]
print(f"xshare_spec:  {len(ids.unique())} experts in all, per request {per_request}")
