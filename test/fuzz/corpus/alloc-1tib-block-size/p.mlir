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
  %active, %num_active = moe.compact_active %counts
      : tensor<256xi32> -> tensor<256xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 4294967296
      : tensor<?x8xi32>, tensor<256xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x8xi32>, tensor<?x8xf32>, tensor<256xi32>, tensor<256xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}