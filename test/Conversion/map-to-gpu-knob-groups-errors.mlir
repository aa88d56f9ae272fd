// moe-map-to-gpu{knob-groups}: a router that cannot be routed by groups says why.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="knob-groups=2" --split-input-file --verify-diagnostics

// A result that is not per token.
// expected-error @+1 {{knob groups route each group's tokens as a batch of their own, so every result must be per token: @c's result 'expert_counts' is not (compile only topk_ids,topk_weights)}}
moe.router @c(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, expert_counts: tensor<16xi32>)
    attributes {experts = 16, top_k = 2} {
  %budget = moe.knob "budget" = 4 : i64
  %mass = moe.batch_reduce sum %logits : tensor<?x16xf32> -> tensor<16xf32>
  %none = moe.empty_set : !moe.set<16>
  %sel = moe.fill %none with %mass budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %ids, %w = moe.route %logits within %sel k = 2
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  moe.yield %ids, %counts : tensor<?x2xi32>, tensor<16xi32>
}

// -----

// No knobs: nothing differs between groups.
// expected-error @+1 {{knob groups: @n has no knobs (nothing differs between groups)}}
moe.router @n(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 16, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x16xf32>
  %ids, %w = moe.route %logits weights(%p : tensor<?x16xf32>) k = 2
      : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
