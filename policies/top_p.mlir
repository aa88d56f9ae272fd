// top_p.mlir - dynamic-k routing by probability mass ("top-p" routing): each token
// takes its experts in decreasing softmax probability until they hold at least `p` of
// its probability, at least `k_min` of them and at most the model's top-k; the other
// slots stay empty (id -1, weight 0; an engine build fills them with weight 0 on an
// expert the token already uses). Weights are the kept probabilities, renormalized to
// sum 1 when the model renormalizes (Qwen3's norm_topk_prob), else the raw ones.
//
// Source: post-hoc top-p routing of a top-k-trained model (Qwen3-30B-A3B: GSM8K 87.9%
// vs 81.9% for static top-4 at matched average k), the dynamic-k idea behind vLLM
// #2096 / #17150 and llama.cpp #13572 / PR #18029. Choices where the sources differ:
// the mass is the full softmax over all E experts (not renormalized over the top-k
// first), a token never takes more than the model's k, and ties go to the lower id
// (by logit order, which softmax keeps exactly).
//
// Shape: generic in E and k (--experts E --top-k K, or --model config.json).
// Knobs: p (0.9; in (0, 1]: 1 keeps all k), k_min (1; in [1, k]).
moe.router @top_p(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %p = moe.knob "p" = 0.9 : f32
  %k_min = moe.knob "k_min" = 1 : i64
  // Ranked by logits, weighed and truncated by the probabilities (the softmax stays:
  // the truncation needs each expert's share of the whole row).
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      top_p(%p : f32) min_k(%k_min : i64)
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %num_active, %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
