#!/usr/bin/env python3
"""A transformers MoE model with its routing swapped for a compiled Switchyard policy.

Builds a small random Mixtral from a config (no download), runs it unpatched, patched
with its native routing (the same logits) and patched with XShare (the batch shares a
small expert set), printing the logits' deviation and the experts each batch touches.

    .venv/bin/python examples/python/hf_patch.py
"""
import torch
from transformers import MixtralConfig, MixtralForCausalLM

import switchyard.hf

config = MixtralConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, num_local_experts=32,
                       num_experts_per_tok=4, vocab_size=128)
torch.manual_seed(0)
model = MixtralForCausalLM(config).eval()
ids = torch.randint(0, 128, (1, 6))

touched = []


def count_experts(module, args, output):
    touched.append(len(set(output[2].flatten().tolist()) - {config.num_local_experts}))


def run():
    """The logits, counting the experts each layer's router hands to its experts."""
    touched.clear()
    # Registered after the patch's own hook, so it sees the routing the experts get.
    hooks = [layer.mlp.gate.register_forward_hook(count_experts) for layer in model.model.layers]
    with torch.no_grad():
        logits = model(ids).logits
    for hook in hooks:
        hook.remove()
    return logits


reference = run()
print(f"{'unpatched':<27} experts per layer {touched}")
for policy, knobs in ((switchyard.hf.native_policy(config), None), ("xshare", {"budget": 2})):
    switchyard.hf.patch(model, policy, knobs=knobs)
    logits = run()
    switchyard.hf.unpatch(model)
    print(f"{policy:<12} {str(knobs or ''):<14} experts per layer {touched}, "
          f"max |logits - unpatched| = {(logits - reference).abs().max():.2e}")
