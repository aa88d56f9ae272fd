// RUN: moe-opt %s --moe-specialize="experts=8 top_k=2 groups=4 topk_groups=2" | FileCheck %s
// RUN: moe-opt %s --moe-specialize="experts=8 top_k=2 groups=4 topk_groups=2 scaling=2.5 norm_topk_prob=false" | FileCheck %s --check-prefix=MODEL
// RUN: moe-opt %s | FileCheck %s --check-prefix=GENERIC

// A generic router becomes today's static form: every `?` expert dimension is E, every
// `k = ?` and moe.param "top_k" is k, the result types follow.
// CHECK-LABEL: moe.router @grouped(%logits: tensor<?x8xf32>, %bias: tensor<8xf32>)
// CHECK-SAME: -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, expert_counts: tensor<8xi32>, active_experts: tensor<8xi32>, num_active: tensor<1xi32>, sorted_token_ids: tensor<?xi32>)
// CHECK-SAME: attributes {experts = 8 : i64, top_k = 2 : i64}
// CHECK: moe.sigmoid %logits : tensor<?x8xf32>
// CHECK: moe.add_bias %{{.*}}, %bias : tensor<?x8xf32>, tensor<8xf32>
// CHECK: moe.group_limit %{{.*}} groups = 4 keep = 2 : tensor<?x8xf32>
// CHECK: moe.route %{{.*}} weights(%{{.*}} : tensor<?x8xf32>) k = 2 renormalize scaling = 1.500000e+00 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
// CHECK: moe.expert_counts %{{.*}} : tensor<?x2xi32> -> tensor<8xi32>
// CHECK: moe.compact_active %{{.*}} : tensor<8xi32> -> tensor<8xi32>, tensor<1xi32>
// CHECK: moe.align_blocks %{{.*}}, %{{.*}} block_size = 16 : tensor<?x2xi32>, tensor<8xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
// The model's routed scaling factor and renormalization replace the policy's.
// MODEL-LABEL: moe.router @grouped
// MODEL: moe.route %{{.*}} k = 2 scaling = 2.500000e+00
// As written, the policy stays generic (and round-trips).
// GENERIC-LABEL: moe.router @grouped(%logits: tensor<?x?xf32>, %bias: tensor<?xf32>)
// GENERIC: moe.group_limit %{{.*}} groups = ? keep = ? : tensor<?x?xf32>
// GENERIC: k = ? renormalize scaling = 1.500000e+00
moe.router @grouped(%logits: tensor<?x?xf32>, %bias: tensor<?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>, active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>) {
  %scores = moe.sigmoid %logits : tensor<?x?xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x?xf32>, tensor<?xf32>
  %limited = moe.group_limit %biased groups = ? keep = ? : tensor<?x?xf32>
  %ids, %weights = moe.route %limited weights(%scores : tensor<?x?xf32>) k = ?
      renormalize scaling = 1.5 : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %active, %n = moe.compact_active %counts : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 16
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %active, %n, %sorted
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<?xi32>
}

