// moe-lower-to-loops on the capacity family (CapacityOps.cpp): moe.admit, capacity-
// aware admission, is two radix selects over order-preserving i32 keys - per token its
// m-th best expert (the proposals), per expert its C-th best proposal - then one pass
// writing the admitted scores and -inf elsewhere.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @admit(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[OUT:[a-z0-9]+]]: memref<?x8xf32>,
// CHECK-SAME: #moe.rule<text = "capacity_factor must be finite and > 0", op = "moe.admit
// CHECK-SAME: #moe.rule<text = "candidates must be in [0, 8]", op = "moe.admit
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// C = ceil(factor * T * k / E) in double precision.
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// Per token: its proposals' threshold key and last tie, in [T] temporaries.
// CHECK: %[[TKEY:.*]] = memref.alloc(%[[T]]) : memref<?xi32>
// CHECK: %[[TTIE:.*]] = memref.alloc(%[[T]]) : memref<?xi32>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.for %{{.*}} = %c0 to %c32 step %c1
// CHECK:     scf.for %{{.*}} = %c0 to %c8 step %c1
// CHECK:   memref.store %{{.*}}, %[[TKEY]][%[[TOK]]] : memref<?xi32>
// CHECK:   memref.store %{{.*}}, %[[TTIE]][%[[TOK]]] : memref<?xi32>
// Per expert: the C-th best proposal over the tokens (a non-proposal keyed 0).
// CHECK: %[[EKEY:.*]] = memref.alloc() : memref<8xi32>
// CHECK: %[[ETIE:.*]] = memref.alloc() : memref<8xi32>
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c8) step (%c1) {
// CHECK:   scf.for %{{.*}} = %c0 to %c32 step %c1
// CHECK:     scf.for %{{.*}} = %c0 to %[[T]] step %c1
// The admitted scores: a nonzero key the expert takes keeps its score, else -inf.
// CHECK: scf.parallel (%[[TOK2:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     memref.load %[[TKEY]][%[[TOK2]]]
// CHECK:     memref.load %[[EKEY]][%[[E]]]
// CHECK:     %[[NZ:.*]] = arith.cmpi ne, %{{.*}}, %c0_i32 : i32
// CHECK:     %[[IN:.*]] = arith.andi %[[NZ]], %{{.*}} : i1
// CHECK:     %[[V:.*]] = memref.load %[[X]][%[[TOK2]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[R:.*]] = arith.select %[[IN]], %[[V]], %[[NEGINF]] : f32
// CHECK:     memref.store %[[R]], %[[OUT]][%[[TOK2]], %[[E]]] : memref<?x8xf32>
moe.router @admit(%logits: tensor<?x8xf32>) -> (scores: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  %m = moe.knob "candidates" = 4 : i64
  %a = moe.admit %logits candidates(%m : i64) capacity_factor(%cf : f32) k = 2
      : tensor<?x8xf32>
  moe.yield %a : tensor<?x8xf32>
}
