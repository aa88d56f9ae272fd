"""The same routing written straightforwardly in PyTorch on the GPU: the baselines the
kit's benchmark sets beside the generated kernels.

- softmax_topk: softmax over the experts, top-k, renormalise (Mixtral / Qwen3-MoE's
  router, vLLM's fused_topk semantics);
- grouped_topk: DeepSeek-V3's noaux_tc router as transformers writes it (sigmoid scores,
  + correction bias for the choice, per-group sum of the top-2, top groups, masked
  top-k, weights from the unbiased scores, renormalised, times the scaling factor).
"""
import torch


def softmax_topk(logits, top_k, renormalize=True):
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return ids.to(torch.int32), weights


def grouped_topk(logits, bias, top_k, n_group, topk_group, scaling, renormalize=True):
    scores = logits.sigmoid()
    choice = scores + bias
    tokens, experts = logits.shape
    group_scores = choice.view(tokens, n_group, experts // n_group).topk(2, dim=-1)[0].sum(-1)
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(tokens, n_group, experts // n_group) \
        .reshape(tokens, experts)
    masked = choice.masked_fill(~score_mask.bool(), 0.0)
    ids = torch.topk(masked, k=top_k, dim=-1, sorted=False)[1]
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return ids.to(torch.int32), weights * scaling


def baselines(router, inputs):
    """(name, zero-argument callable) of the PyTorch baselines for a packed router on
    `inputs` (name -> CUDA tensor)."""
    logits = inputs.get("logits")
    if logits is None or not router["top_k"]:
        return []
    top_k = router["top_k"]
    out = [("torch softmax+topk", lambda: softmax_topk(logits, top_k))]
    cfg = router.get("grouped")
    if cfg:
        bias = inputs["bias"]
        out.append(("torch grouped top-k (transformers)",
                    lambda: grouped_topk(logits, bias, top_k, cfg["n_group"],
                                         cfg["topk_group"], cfg["scaling"])))
    return out
