// moe-fill-empty-slots: a router's topk_ids / topk_weights go through
// moe.fill_empty_slots. A route over all experts fills from each token's own row (no
// batch counts: the policy stays token loops); capacity drops also take the batch's
// expert counts. Routers without both results are left alone; a generic router is an
// error.
// RUN: moe-opt %s -split-input-file --moe-fill-empty-slots -verify-diagnostics | FileCheck %s

// CHECK-LABEL: moe.router @own_row
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route
// CHECK-NOT: moe.expert_counts
// CHECK: %[[FI:.*]], %[[FW:.*]] = moe.fill_empty_slots %[[IDS]], %[[W]] experts = 8 : tensor<?x2xi32>, tensor<?x2xf32>
// CHECK: moe.yield %[[FI]], %[[FW]]
moe.router @own_row(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// CHECK-LABEL: moe.router @drops
// CHECK: %[[KEPT:.*]], %[[KW:.*]], %{{.*}}, %{{.*}} = moe.capacity
// CHECK: %[[COUNTS:.*]] = moe.expert_counts %[[KEPT]] : tensor<?x2xi32> -> tensor<8xi32>
// CHECK: %[[FI:.*]], %[[FW:.*]] = moe.fill_empty_slots %[[KEPT]], %[[KW]] batch(%[[COUNTS]] : tensor<8xi32>) experts = 8
// The other results stay as they were.
// CHECK: moe.yield %[[FW]], %{{.*}}, %[[FI]] :
moe.router @drops(%logits: tensor<?x8xf32>)
    -> (topk_weights: tensor<?x2xf32>, dropped: tensor<1xi32>, topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  %factor = moe.knob "capacity_factor" = 0.5 : f32
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity_factor(%factor : f32)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %kw, %dropped, %kept : tensor<?x2xf32>, tensor<1xi32>, tensor<?x2xi32>
}

// -----

// CHECK-LABEL: moe.router @no_weights
// CHECK-NOT: moe.fill_empty_slots
moe.router @no_weights(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{--fill-empty-slots: @generic is generic; bind its expert count first (--experts, --model)}}
moe.router @generic(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>) {
  %ids, %w = moe.route %logits k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids, %w : tensor<?x?xi32>, tensor<?x?xf32>
}
