// capacity_topk with an absolute capacity computed from the token count, C =
// ceil(T / tokens_per_slot) (moe.num_tokens and scalar arith on a knob), and the kept
// weights renormalized over the kept slots (test_policies.py's capacity_topk cases).
moe.router @capacity_topk(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>, num_dropped: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %per = moe.knob "tokens_per_slot" = 3 : i64
  %t = moe.num_tokens : i64
  %capacity = arith.ceildivsi %t, %per : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %kept, %kept_weights, %counts, %dropped = moe.capacity %ids, %weights
      capacity(%capacity : i64) renormalize_after_drop
      : tensor<?x?xi32>, tensor<?x?xf32>
      -> tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %kept, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %kept, %kept_weights, %counts, %dropped, %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
