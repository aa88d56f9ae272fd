// moe-map-to-gpu: the whole policy becomes one single-CTA kernel. Token loops are
// block-strided (one thread per token), sequential code runs on thread 0, barriers
// separate the phases, temporaries are views into the workspace parameter.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s

// CHECK: module attributes {gpu.container_module}
// The host function stays.
// CHECK: func.func @r(
// CHECK: gpu.module @r_kernels {
// CHECK: gpu.func @r(%[[T:.*]]: index, %{{.*}}: memref<?x16xf32>, %{{.*}}: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %{{.*}}: memref<16xi8>, %[[WS:.*]]: memref<?xi8>) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: moe.workspace = array<i64: {{[0-9]+}}, {{[0-9]+}}>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[NT:.*]] = gpu.block_dim x
// The softmax rows live in the workspace.
// CHECK: %[[P:.*]] = memref.view %[[WS]][%{{.*}}][%[[T]]] : memref<?xi8> to memref<?x16xf32>
// The token stage: a block-strided loop, then a barrier.
// CHECK: %[[FROM:.*]] = arith.addi %{{.*}}, %[[TID]] : index
// CHECK: scf.for %{{.*}} = %[[FROM]] to %[[T]] step %[[NT]] {
// CHECK:   math.exp
// CHECK: gpu.barrier
// The batch and select stages run on thread 0, then a barrier.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}} : index
// CHECK: scf.if %[[FIRST]] {
// CHECK: gpu.barrier
// Routing: strided again.
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]] step %[[NT]] {
// CHECK: gpu.barrier
// CHECK: gpu.return
// CHECK-NOT: memref.alloc
moe.router @r(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, selected: !moe.set<16>)
    attributes {experts = 16, top_k = 2} {
  %k0 = arith.constant 1 : i64
  %budget = arith.constant 4 : i64
  %p = moe.softmax %logits : tensor<?x16xf32>
  %warm = moe.union_topk %logits, %k0 : tensor<?x16xf32> -> !moe.set<16>
  %mass = moe.batch_reduce sum %p : tensor<?x16xf32> -> tensor<16xf32>
  %sel = moe.fill %warm with %mass budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %ids, %w = moe.route %logits within %sel weights(%p : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w, %sel : tensor<?x2xi32>, tensor<?x2xf32>, !moe.set<16>
}
