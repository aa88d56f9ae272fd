// xshare.mlir - XShare batch-aware expert selection, Algorithm 2 (Vankov et al.;
// ../shared/papers/001_*.txt, §3.2-3.4):
//   1. warm-up: S0 = union over tokens of each token's top-k0 experts;
//   2. greedy: add the `budget` experts outside S0 with the largest batch gating mass
//      sum_t p[t,e] (optimal for the modular proxy objective, Prop. 3.2 / Cor. 3.3);
//   3. refinement: route every token to its top-k within S, weights renormalized.
//
// Shape: GPT-OSS-120B, 128 experts, top-4.
// Knobs: k0 (warm-up experts per token, default 1), budget (m_l, experts added beyond
//        the warm-up set, default 24): (m_l, k0) = (24, 1) is one of the paper's
//        Pareto-optimal settings (Fig. 4).
moe.router @xshare(%logits: tensor<?x128xf32>)
    -> (topk_ids: tensor<?x4xi32>, topk_weights: tensor<?x4xf32>,
        selected: !moe.set<128>, expert_counts: tensor<128xi32>,
        active_experts: tensor<128xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 128, top_k = 4} {
  %k0 = moe.knob "k0" = 1 : i64
  %budget = moe.knob "budget" = 24 : i64
  %probs = moe.softmax %logits : tensor<?x128xf32>
  // Rankings use the logits (the same order as the probabilities, computed exactly).
  %warm = moe.union_topk %logits, %k0 : tensor<?x128xf32> -> !moe.set<128>
  %mass = moe.batch_reduce sum %probs : tensor<?x128xf32> -> tensor<128xf32>
  %selected = moe.fill %warm with %mass budget(%budget : i64)
      : tensor<128xf32> -> !moe.set<128>
  %ids, %weights = moe.route %logits within %selected weights(%probs : tensor<?x128xf32>)
      k = 4 renormalize
      : tensor<?x128xf32>, !moe.set<128> -> tensor<?x4xi32>, tensor<?x4xf32>
  %counts = moe.expert_counts %ids : tensor<?x4xi32> -> tensor<128xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<128xi32> -> tensor<128xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x4xi32>, tensor<128xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x4xi32>, tensor<?x4xf32>, !moe.set<128>, tensor<128xi32>, tensor<128xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
