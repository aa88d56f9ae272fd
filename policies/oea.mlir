// oea.mlir - Opportunistic Expert Activation (Oncescu et al., "Opportunistic Expert
// Activation: Batch-Aware Expert Routing for Faster Decode Without Retraining", arXiv
// 2511.02237): decode latency follows the number of experts a batch activates, so
//   1. baseline: every token keeps its top-k0 experts (its quality floor); the batch
//      activates S = the union of these;
//   2. piggy-backing: every token then takes, best first, the experts of S that are
//      among its own top `max_rank`, until it holds k (no expert outside S is loaded);
//   3. weights: the taken experts' softmax probabilities, renormalized over them when
//      the model renormalizes (Qwen3's norm_topk_prob).
// Paper: -39% MoE-layer decode latency on Qwen3-30B-A3B at batch 16 without a
// statistically significant accuracy loss.
//
// Choices (our reading; written here and in docs/traces.md): a token piggy-backs only
// on experts of its own top `max_rank`, 0 meaning the model's k, so that by default it
// only ever drops experts of its own top-k; max_rank = E lets it take any expert of S
// (which is XShare's Algorithm 2 with budget 0). Ranked by logits (the probabilities'
// order, exactly), ties to the lower id. Slots a token cannot fill stay empty (id -1,
// weight 0; an engine build fills them with weight 0 on an expert the token uses).
//
// Shape: generic in E and k (--experts E --top-k K, or --model config.json).
// Knobs: k0 (1; in [0, E]), max_rank (0 = k; in [0, E]).
moe.router @oea(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %k0 = moe.knob "k0" = 1 : i64
  %max_rank = moe.knob "max_rank" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %baseline = moe.union_topk %logits, %k0 : tensor<?x?xf32> -> !moe.set<?>
  %ids, %weights = moe.route %logits within %baseline weights(%probs : tensor<?x?xf32>)
      k = ? renormalize max_rank(%max_rank : i64)
      : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %baseline, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
