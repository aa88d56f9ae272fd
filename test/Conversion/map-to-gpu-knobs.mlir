// moe-map-to-gpu: every kernel takes the knobs as ONE i8 buffer, the C entry's knob
// struct in device memory, just before the workspace, and reads each field at its entry
// (an empty buffer: the defaults), so that a captured CUDA graph routes with the knobs
// written there before each replay. The struct's C layout: an f32 after an i64 at 8,
// an i64 after the f32 at 16.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128 cta-tokens=64 tokens-per-cta=32" | FileCheck %s

// CHECK: gpu.func @k(%{{.*}}: index, %{{.*}}: memref<?x16xf32>, %{{.*}}: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %[[KNOBS:.*]]: memref<?xi8>, %{{.*}}: memref<?xi8>)
// CHECK: %[[SIZE:.*]] = memref.dim %[[KNOBS]], %c0
// CHECK: %[[GIVEN:.*]] = arith.cmpi ne, %[[SIZE]], %c0
// CHECK: %[[K0:.*]] = scf.if %[[GIVEN]] -> (i64) {
// CHECK:   %[[F0:.*]] = memref.view %[[KNOBS]][%c0{{.*}}][] : memref<?xi8> to memref<1xi64>
// CHECK:   memref.load %[[F0]][%c0{{.*}}]
// CHECK: } else {
// CHECK:   arith.constant 1 : i64
// CHECK: scf.if %[[GIVEN]] -> (f32) {
// CHECK:   memref.view %[[KNOBS]][%c8{{.*}}][] : memref<?xi8> to memref<1xf32>
// CHECK: } else {
// CHECK:   arith.constant 5.000000e-01 : f32
// CHECK: scf.if %[[GIVEN]] -> (i64) {
// CHECK:   memref.view %[[KNOBS]][%c16{{.*}}][] : memref<?xi8> to memref<1xi64>
// CHECK: } else {
// CHECK:   arith.constant 4 : i64
// The large-batch pair and the cooperative kernel read them the same way.
// CHECK: gpu.func @k_large_k1({{.*}}memref<?x2xf32>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi8>)
// CHECK: memref.dim
// CHECK: gpu.func @k_large_k2({{.*}}memref<?x2xf32>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi8>)
// CHECK: memref.dim
// CHECK: gpu.func @k_large_coop({{.*}}memref<?x2xf32>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi8>)
// CHECK: memref.dim
// CHECK-NOT: gpu.func

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
