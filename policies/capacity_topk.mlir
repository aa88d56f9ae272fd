// capacity_topk.mlir - capacity-limited softmax top-k (GShard, Lepikhin et al. 2020 §2.2;
// Switch Transformer, Fedus et al. 2021 §2.2): every token picks its top-k experts by
// softmax probability (weights renormalized over the k, as Mixtral), then each expert
// admits at most C = ceil(capacity_factor * T * k / E) of the routed slots, in GShard's
// priority order - all tokens' first choices in token order, then all second choices.
// A slot that finds its expert full is dropped (id -1, weight 0; the token's residual
// carries it); kept weights are not renormalized again.
//
// Shape: generic in E experts and k (bind with --experts E --top-k 2, or --model
//        models/mixtral-8x7b.json).
// Inputs: logits f32 [T, E].
// Knobs: capacity_factor (1.25, Switch Transformer's training value; > 0).
// Outputs: the kept top-k, per-expert admitted counts, the number of dropped slots,
//          and vLLM's block-aligned order of the kept slots for a grouped GEMM.
moe.router @capacity_topk(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>, num_dropped: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %capacity_factor = moe.knob "capacity_factor" = 1.25 : f32
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %kept, %kept_weights, %counts, %dropped = moe.capacity %ids, %weights
      capacity_factor(%capacity_factor : f32)
      : tensor<?x?xi32>, tensor<?x?xf32>
      -> tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %kept, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %kept, %kept_weights, %counts, %dropped, %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
