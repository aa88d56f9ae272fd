// topk_softmax.mlir - the standard softmax top-k router (Mixtral, Qwen2/Qwen3-MoE, vLLM
// `topk_softmax`): every token is routed to its k most probable experts, with the k
// probabilities renormalized to sum to 1 (Qwen3's norm_topk_prob; for Mixtral this is
// exactly the softmax over the k selected logits).
//
// Shape: generic in E experts and k (bind with --experts E --top-k K or --model
//        models/qwen3-30b-a3b.json; norm_topk_prob / routed_scaling_factor of the
//        model set renormalize / scaling).
// Paper: the baseline every batch-aware policy in ../shared/papers is compared with.
// Knobs: none.
moe.router @topk_softmax(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  // Rank by logits (softmax is monotonic, and logits rank exactly), weigh by the
  // probabilities. Renormalized, these are the softmax over the k selected logits:
  // the compiler folds the softmax into the route (moe-fold-route-softmax), k exp per
  // token instead of E.
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  // The experts the batch activates: the union of every token's top-k.
  %k = moe.param "top_k" : i64
  %selected = moe.union_topk %logits, %k : tensor<?x?xf32> -> !moe.set<?>
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
