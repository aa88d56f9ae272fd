// topk_softmax.mlir - the standard softmax top-k router (Mixtral, Qwen2/Qwen3-MoE, vLLM
// `topk_softmax`): every token is routed to its k most probable experts, with the k
// probabilities renormalized to sum to 1 (Qwen3's norm_topk_prob; for Mixtral this is
// exactly the softmax over the k selected logits).
//
// Shape: Qwen3-30B-A3B, 128 experts, top-8. Change the signature for another model.
// Paper: the baseline every batch-aware policy in ../shared/papers is compared with.
// Knobs: none.
moe.router @topk_softmax(%logits: tensor<?x128xf32>)
    -> (topk_ids: tensor<?x8xi32>, topk_weights: tensor<?x8xf32>,
        selected: !moe.set<128>, expert_counts: tensor<128xi32>)
    attributes {experts = 128, top_k = 8} {
  %probs = moe.softmax %logits : tensor<?x128xf32>
  %ids, %weights = moe.route %probs k = 8 renormalize
      : tensor<?x128xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
  // The experts the batch activates: the union of every token's top-8.
  %k = arith.constant 8 : i64
  %selected = moe.union_topk %probs, %k : tensor<?x128xf32> -> !moe.set<128>
  %counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<128xi32>
  moe.yield %ids, %weights, %selected, %counts
      : tensor<?x8xi32>, tensor<?x8xf32>, !moe.set<128>, tensor<128xi32>
}
