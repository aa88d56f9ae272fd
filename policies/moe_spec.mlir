// moe_spec.mlir - MoE-Spec, expert budgeting at speculative verification (McDanel et
// al., "MoE-Spec: Expert Budgeting for Efficient Speculative Decoding", arXiv
// 2602.16052): the draft tokens of a verification step together activate most experts,
// so
//   1. the budget set: the `budget` (B) experts with the largest aggregate routing
//      probability over the step's draft tokens (sum_t p[t,e], ties to the lower id);
//   2. every draft token routes within it: with `max_rank` = 0 (= k) it keeps the
//      experts of its own top-k that are in the set ("truncation"); with `max_rank` = E
//      it takes its best k experts of the set ("substitution"); in between, experts of
//      its own top `max_rank`;
//   3. weights: the kept experts' softmax probabilities, renormalized over them when
//      the model renormalizes; slots it cannot fill stay empty (id -1, weight 0).
// Paper: 10-30% more throughput than EAGLE-3 at comparable quality.
//
// Choices (our reading; written here and in docs/traces.md): the budget binds the
// draft tokens (`draft_mask` = 1, vLLM's scheduled speculative tokens). The other
// tokens - each request's token the drafts continue, prefills, plain decodes - route
// by their own top-k, as they would without speculation, so the experts speculation
// adds to a step are at most B.
//
// Shape: generic in E and k (--experts E --top-k K, or --model config.json).
// Inputs: logits f32 [T, E], draft_mask i32 [T].
// Knobs: budget (B, 32; >= 0), max_rank (0 = k: truncation; E: substitution).
moe.router @moe_spec(%logits: tensor<?x?xf32>, %draft_mask: tensor<?xi32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %budget = moe.knob "budget" = 32 : i64
  %max_rank = moe.knob "max_rank" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %draft_mass = moe.batch_reduce sum %probs rows(%draft_mask : tensor<?xi32>)
      : tensor<?x?xf32> -> tensor<?xf32>
  %none = moe.empty_set : !moe.set<?>
  %budgeted = moe.fill %none with %draft_mass budget(%budget : i64)
      : tensor<?xf32> -> !moe.set<?>
  %ids, %weights = moe.route %logits within %budgeted weights(%probs : tensor<?x?xf32>)
      k = ? renormalize max_rank(%max_rank : i64) rows(%draft_mask : tensor<?xi32>)
      : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %budgeted, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
