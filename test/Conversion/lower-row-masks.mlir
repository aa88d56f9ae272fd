// moe-lower-to-loops on rows(%mask), MoE-Spec's per-token gate (BatchOps.cpp,
// RouteOps.cpp): a batch reduction adds only the masked tokens' rows, and a route
// applies its set only to them (a token whose mask is 0 routes over every expert).
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[LOGITS:[a-z0-9]+]]: memref<?x8xf32>, %[[MASK:[a-z0-9]+]]: memref<?xi32>,
// The reduction, per expert over the tokens: a masked-out row keeps the sum.
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c8) step (%c1) {
// CHECK:   scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:     %[[NEXT:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// CHECK:     %[[M:.*]] = memref.load %[[MASK]][%[[TOK]]] : memref<?xi32>
// CHECK:     %[[IN:.*]] = arith.cmpi ne, %[[M]], %c0_i32 : i32
// CHECK:     arith.select %[[IN]], %[[NEXT]], %[[ACC]] : f32
// The route, per token: an expert is eligible when in the set or the token unmasked.
// CHECK: scf.parallel (%[[TOK2:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[M2:.*]] = memref.load %[[MASK]][%[[TOK2]]] : memref<?xi32>
// CHECK:   scf.while
// CHECK:     %[[INSET:.*]] = arith.cmpi ne, %{{.*}}, %c0_i8 : i8
// CHECK:     %[[OFF:.*]] = arith.cmpi eq, %[[M2]], %c0_i32 : i32
// CHECK:     %[[EITHER:.*]] = arith.ori %[[OFF]], %[[INSET]] : i1
// CHECK:     arith.andi %{{.*}}, %[[EITHER]] : i1
moe.router @rows(%logits: tensor<?x8xf32>, %mask: tensor<?xi32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, mass: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  %b = moe.knob "budget" = 3 : i64
  %p = moe.softmax %logits : tensor<?x8xf32>
  %mass = moe.batch_reduce sum %p rows(%mask : tensor<?xi32>)
      : tensor<?x8xf32> -> tensor<8xf32>
  %none = moe.empty_set : !moe.set<8>
  %s = moe.fill %none with %mass budget(%b : i64) : tensor<8xf32> -> !moe.set<8>
  %ids, %w = moe.route %logits within %s weights(%p : tensor<?x8xf32>) k = 2 renormalize
      rows(%mask : tensor<?xi32>)
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w, %mass : tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xf32>
}
