// expert_choice.mlir - expert-choice routing (Zhou et al. 2022, "Mixture-of-Experts with
// Expert Choice Routing", §3.1): scores S = softmax over experts of each token's logits;
// every expert takes the c = ceil(capacity_factor * T * k / E) tokens with the highest
// score for it (ties to the lower token index), so the load is balanced by
// construction and a token may get 0..E experts. A token's weight for an expert is
// its score (the paper's gating matrix G = TopK(S^T, c)).
//
// Shape: generic in E experts and k, the average number of experts per token the
//        capacity is sized for (bind with --experts E --top-k 2: EC-CF2 is
//        capacity_factor 1, k 2).
// Inputs: logits f32 [T, E].
// Knobs: capacity_factor (1.0; > 0).
// Outputs: the per-token view (a token's experts by score, at most 4), the grouped
//          layout a grouped-GEMM launcher consumes (per expert its token ids and
//          weights, block-aligned with block size 64, sentinel T), and the number of
//          tokens no expert took.
moe.router @expert_choice(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x4xi32>, topk_weights: tensor<?x4xf32>,
        expert_token_ids: tensor<?xi32>, expert_token_weights: tensor<?xf32>,
        expert_block_ids: tensor<?xi32>, expert_tokens_post_padded: tensor<1xi32>,
        num_unrouted: tensor<1xi32>) {
  %capacity_factor = moe.knob "capacity_factor" = 1.0 : f32
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights, %tokens, %token_weights, %blocks, %padded, %unrouted =
      moe.expert_choice %probs capacity_factor(%capacity_factor : f32) k = ?
      max_experts = 4 block_size = 64
      : tensor<?x?xf32> -> tensor<?x4xi32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %tokens, %token_weights, %blocks, %padded, %unrouted
      : tensor<?x4xi32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xi32>,
        tensor<1xi32>, tensor<1xi32>
}
