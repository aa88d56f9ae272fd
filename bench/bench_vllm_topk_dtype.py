#!/usr/bin/env python3
"""Switchyard's topk_softmax against vLLM's own CPU router on the same 16-bit logits.

vLLM's CPU softmax top-k (cpu_router._softmax_topk) picks the k largest logits with
torch.topk(sorted=False) in the logits' dtype and computes the weights there (softmax
over the k picked logits, rounded to bfloat16 / float16, returned as float32). The
plugin rounds Switchyard's float32 weights the same way (router.py), so on the same
logits the weights are bit-identical whenever the picked experts are. They differ only
where the k-th place is tied: Switchyard takes the lower expert id (the rule every
shipped policy states); torch's CPU top-k takes whichever its selection algorithm
leaves there (measured below: about half the time the higher ids). Slot order differs
too (torch's unsorted order is its selection's; Switchyard's is by weight).

Per (dtype, E, k), over --tokens random rows (normal logits, scale 2): the rows whose
expert sets are equal, the rows with a tie at the k-th place, and among the equal rows
those whose weights are bit-identical (as the plugin returns them).

    .venv-vllm/bin/python bench/bench_vllm_topk_dtype.py [--tokens 20000] [--json out.json]
"""
import argparse
import json
import sys

import numpy as np


def measure(dtype_name, experts, top_k, tokens, seed=0):
    import torch
    import switchyard
    from vllm.model_executor.layers.fused_moe.router.cpu_router import _softmax_topk
    dtype = getattr(torch, dtype_name)
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(tokens, experts, generator=generator) * 2).to(dtype)
    native_weights, native_ids = _softmax_topk(logits, top_k, True)
    router = switchyard.compile(
        "topk_softmax", experts=experts, top_k=top_k,
        input_dtypes=None if dtype_name == "float32" else {"logits": dtype_name},
        outputs=("topk_ids", "topk_weights"))
    out = router(logits)
    ids = torch.as_tensor(np.asarray(out["topk_ids"]))
    weights = torch.as_tensor(np.asarray(out["topk_weights"]))
    if dtype_name != "float32":
        weights = weights.to(dtype).float()   # what the plugin hands vLLM
    ours, order = ids.sort(dim=1)
    theirs, their_order = native_ids.sort(dim=1)
    same_set = (ours == theirs.to(ours.dtype)).all(dim=1)
    same_weights = (weights.gather(1, order) == native_weights.gather(1, their_order)).all(1)
    values = logits.float()
    kth = values.sort(dim=1, descending=True).values[:, top_k - 1:top_k]
    tied = (values >= kth).sum(dim=1) > top_k   # more candidates than places at the k-th
    return {"dtype": dtype_name, "experts": experts, "top_k": top_k, "tokens": tokens,
            "same_experts": float(same_set.float().mean()),
            "kth_place_tied": float(tied.float().mean()),
            "different_experts_untied": int((~same_set & ~tied).sum()),
            "same_weights_given_same_experts": float(same_weights[same_set].float().mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    try:
        import vllm  # noqa: F401
    except ImportError as error:
        print(f"needs vLLM (.venv-vllm): {error}")
        return 1
    rows = [measure(d, e, k, args.tokens)
            for d in ("bfloat16", "float16", "float32")
            for e, k in ((16, 4), (64, 8), (128, 8))]
    print(f"{'dtype':9} {'E':>4} {'k':>2} {'same experts':>13} {'k-th tied':>10} "
          f"{'differ untied':>14} {'same weights':>13}")
    for r in rows:
        print(f"{r['dtype']:9} {r['experts']:4d} {r['top_k']:2d} {r['same_experts']:13.4f} "
              f"{r['kth_place_tied']:10.4f} {r['different_experts_untied']:14d} "
              f"{r['same_weights_given_same_experts']:13.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
