// deepseek_v3.mlir - DeepSeek-V3 / R1 routing (DeepSeek-V3 technical report §2.1.2;
// vLLM `grouped_topk` with `e_score_correction_bias`):
//   1. scores = sigmoid(logits);
//   2. selection scores = scores + bias (the auxiliary-loss-free correction bias; it only
//      decides *which* experts are chosen, never their weights);
//   3. node-limited routing: 8 groups of 32 experts, a group's score is the sum of its
//      top-2 selection scores, each token keeps its top-4 groups;
//   4. top-8 experts by selection score within the kept groups;
//   5. weights = the unbiased scores of those 8, renormalized, times the routed scaling
//      factor 2.5.
// One shared expert runs for every token besides the 8 routed ones.
//
// Shape: 256 routed experts, top-8, 1 shared expert.
// Inputs: logits f32 [T, 256], bias f32 [256].
// Knobs: none (the model fixes every parameter).
moe.router @deepseek_v3(%logits: tensor<?x256xf32>, %bias: tensor<256xf32>)
    -> (topk_ids: tensor<?x8xi32>, topk_weights: tensor<?x8xf32>,
        expert_counts: tensor<256xi32>,
        active_experts: tensor<256xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 256, top_k = 8, shared_experts = 1} {
  %scores = moe.sigmoid %logits : tensor<?x256xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x256xf32>, tensor<256xf32>
  %limited = moe.group_limit %biased groups = 8 keep = 4 : tensor<?x256xf32>
  %ids, %weights = moe.route %limited weights(%scores : tensor<?x256xf32>) k = 8
      renormalize scaling = 2.5 : tensor<?x256xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
  %counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<256xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<256xi32> -> tensor<256xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x8xi32>, tensor<256xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x8xi32>, tensor<?x8xf32>, tensor<256xi32>, tensor<256xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
