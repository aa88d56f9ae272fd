// moe-select-outputs keeps the named results of each policy (in their order) and
// erases the ops that fed only the others; knobs stay (the knob struct is the same
// whatever the outputs). Errors name the results a policy has.
// RUN: moe-opt %s --moe-select-outputs="names=topk_ids,topk_weights" | FileCheck %s
// RUN: moe-opt %s --moe-select-outputs="names=expert_counts" | FileCheck %s --check-prefix=COUNTS
// RUN: not moe-opt %s --moe-select-outputs="names=nope" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not moe-opt %s --moe-select-outputs="names=topk_ids,nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// CHECK-LABEL: moe.router @xshare
// CHECK-SAME: -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
// CHECK: moe.knob "budget"
// CHECK: moe.union_topk
// CHECK: moe.route
// CHECK-NOT: moe.expert_counts
// CHECK-NOT: moe.compact_active
// CHECK: moe.yield %{{.*}}, %{{.*}} : tensor<?x2xi32>, tensor<?x2xf32>

// COUNTS: -> (expert_counts: tensor<8xi32>)
// COUNTS: moe.expert_counts
// COUNTS-NOT: moe.compact_active
// COUNTS: moe.yield %{{.*}} : tensor<8xi32>

// NONE: error: none of the outputs asked for (nope) is a result of @xshare (its results: topk_ids, topk_weights, expert_counts, active_experts, num_active)
// UNKNOWN: error: output 'nope' is not a result of any policy in the module
moe.router @xshare(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>,
        expert_counts: tensor<8xi32>, active_experts: tensor<8xi32>, num_active: tensor<1xi32>)
    attributes {experts = 8, top_k = 2} {
  %budget = moe.knob "budget" = 4 : i64
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %warm = moe.union_topk %probs, %budget : tensor<?x8xf32> -> !moe.set<8>
  %ids, %weights = moe.route %probs within %warm k = 2 renormalize
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %active, %num = moe.compact_active %counts : tensor<8xi32> -> tensor<8xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %num
      : tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<8xi32>, tensor<1xi32>
}
