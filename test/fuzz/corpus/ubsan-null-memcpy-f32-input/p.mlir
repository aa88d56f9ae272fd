moe.router @topk_softmax(%logits: tensor<?x128xf32>)
    -> (topk_ids: tensor<?x8xi32>, topk_weights: tensor<?x8xf32>,
        selected: !moe.set<128>, expert_counts: tensor<128xi32>,
        active_experts: tensor<128xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 128, top_k = 8} {
  // Rank by logits (softmax is monotonic, and logits rank exactly), weigh by the
  // probabilities.
  %probs = moe.softmax %logits : tensor<?x128xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x128xf32>) k = 8 renormalize
      : tensor<?x128xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
  // The experts the batch activates: the union of every token's top-8.
  %k = arith.constant 8 : i64
  %selected = moe.union_topk %logits, %k : tensor<?x128xf32> -> !moe.set<128>
  %counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<128xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<128xi32> -> tensor<128xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x8xi32>, tensor<128xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x8xi32>, tensor<?x8xf32>, !moe.set<128>, tensor<128xi32>, tensor<128xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
