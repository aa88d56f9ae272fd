// deepseek_v3.mlir - DeepSeek-V3 / R1 routing (DeepSeek-V3 technical report §2.1.2;
// vLLM `grouped_topk` with `e_score_correction_bias`):
//   1. scores = sigmoid(logits);
//   2. selection scores = scores + bias (the auxiliary-loss-free correction bias; it only
//      decides *which* experts are chosen, never their weights);
//   3. node-limited routing: `groups` groups of E/groups experts (DeepSeek-V3: 8 of 32), a group's score is the sum of its
//      top-2 selection scores, each token keeps its top-`topk_groups` groups;
//   4. top-k experts by selection score within the kept groups;
//   5. weights = the unbiased scores of those k, renormalized, times the routed scaling
//      factor (2.5).
// The model's shared experts run for every token besides the k routed ones.
//
// Shape: generic in E, k and the groups: --model models/deepseek-v3.json binds 256
//        routed experts, top-8, 8 groups keeping 4, 1 shared expert and the routed
//        scaling factor 2.5 (the policy's default; --scaling sets another).
// Inputs: logits f32 [T, E], bias f32 [E].
// Knobs: routed_scaling_factor (2.5; --model / --scaling set the model's).
moe.router @deepseek_v3(%logits: tensor<?x?xf32>, %bias: tensor<?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  // The routed scaling factor: the model's (DeepSeek-V3: 2.5), tunable at run time.
  %scale = moe.knob "routed_scaling_factor" = 2.5 : f32
  %scores = moe.sigmoid %logits : tensor<?x?xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x?xf32>, tensor<?xf32>
  %limited = moe.group_limit %biased groups = ? keep = ? : tensor<?x?xf32>
  %ids, %weights = moe.route %limited weights(%scores : tensor<?x?xf32>) k = ?
      renormalize scaled_by(%scale : f32) : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
