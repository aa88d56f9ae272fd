// xshare.mlir - XShare batch-aware expert selection, Algorithm 2 (Vankov et al.;
// ../shared/papers/001_*.txt, §3.2-3.4):
//   1. warm-up: S0 = union over tokens of each token's top-k0 experts;
//   2. greedy: add the experts outside S0 with the largest batch gating mass
//      sum_t p[t,e] (optimal for the modular proxy objective, Prop. 3.2 / Cor. 3.3):
//      first `budget` of them, then more until S holds `set_budget` experts;
//   3. refinement: route every token to its top-k within S, weights renormalized.
//
// Shape: generic in E and k (e.g. --model models/gpt-oss-120b.json: 128 experts, top-4).
// Knobs: k0 (warm-up experts per token, default 1);
//        budget (experts added beyond the warm-up set, default 24): the reading of m_l
//        this policy has always used (with (m_l, k0) = (24, 1), one of the paper's
//        Pareto-optimal settings, Fig. 4, as budget = 24);
//        set_budget (default 0 = off): the paper's Eq. 2 reading, |S_l| <= m_l: S0 is
//        grown to m_l experts in all (never shrunk: a warm-up set larger than m_l is
//        kept whole). For the paper's meaning set budget = 0, set_budget = m_l; both
//        readings agree when k0 = 0.
moe.router @xshare(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %k0 = moe.knob "k0" = 1 : i64
  %budget = moe.knob "budget" = 24 : i64
  %set_budget = moe.knob "set_budget" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  // Rankings use the logits (the same order as the probabilities, computed exactly).
  %warm = moe.union_topk %logits, %k0 : tensor<?x?xf32> -> !moe.set<?>
  %mass = moe.batch_reduce sum %probs : tensor<?x?xf32> -> tensor<?xf32>
  %added = moe.fill %warm with %mass budget(%budget : i64)
      : tensor<?xf32> -> !moe.set<?>
  %selected = moe.fill %added with %mass min_size(%set_budget : i64)
      : tensor<?xf32> -> !moe.set<?>
  %ids, %weights = moe.route %logits within %selected weights(%probs : tensor<?x?xf32>)
      k = ? renormalize
      : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
