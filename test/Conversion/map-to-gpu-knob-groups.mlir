// moe-map-to-gpu{knob-groups=3}: ONE kernel routes a batch whose tokens belong to
// different knob groups. It takes `knob_group` (int32 per token) after the inputs and
// the knob memory (3 structs of 24 bytes: i64, f32, i64) in place of the knobs; for
// each group g it scans the tokens of g, skips an empty group, gathers the group's
// logits rows, reads struct g (field offsets g * 24 + 0, 8, 16), routes the rows as a
// batch of their own and scatters the results back. No large-batch kernels: the
// one-CTA kernel serves every batch.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128 knob-groups=3" | FileCheck %s
// RUN: not moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="knob-groups=65" 2>&1 | FileCheck %s --check-prefix=RANGE

// CHECK: gpu.func @k(%{{.*}}: index, %{{.*}}: memref<?x16xf32>, %[[GROUP:.*]]: memref<?xi32>, %[[IDS:.*]]: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %[[KNOBS:.*]]: memref<?xi8>, %{{.*}}: memref<?xi8>)
// CHECK-SAME: name = "knob_group", role = in, kind = tensor, type = memref<?xi32>, size = [1, 0, 1]>
// CHECK-SAME: moe.knob_groups = 3
// CHECK: scf.for %[[G:.*]] = %{{.*}} to %c3 step %{{.*}} {
// CHECK:   memref.load %[[GROUP]]
// CHECK:   arith.muli %[[G]], %c24
// CHECK:   memref.view %[[KNOBS]]
// CHECK:   memref.store {{.*}}, %[[IDS]]
// CHECK-NOT: gpu.func @k_large

// RANGE: knob-groups must be in [0, 64], got 65

moe.router @k(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 16, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %scale = moe.knob "scale" = 0.5 : f32
  %budget = moe.knob "budget" = 4 : i64
  %p = moe.softmax %logits : tensor<?x16xf32>
  %warm = moe.union_topk %logits, %k0 : tensor<?x16xf32> -> !moe.set<16>
  %mass = moe.batch_reduce sum %p : tensor<?x16xf32> -> tensor<16xf32>
  %sel = moe.fill %warm with %mass budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %ids, %w = moe.route %logits within %sel weights(%p : tensor<?x16xf32>) k = 2 renormalize scaled_by(%scale : f32)
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
