// moe-map-to-gpu, the large-batch pair of a router with counts and block alignment:
// the initialisations move to CTA 0 of kernel 1, kernel 2 counts its CTA's tokens
// with atomics, and the last CTA (an atomic ticket between device-scope fences) writes
// the alignment with block-parallel passes.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=64 cta-tokens=64 tokens-per-cta=32" | FileCheck %s
// A batch stage that writes per-token data over the whole batch (each token gets its
// request's summed scores) runs in the last CTA's tail, with the routing after it.
// RUN: moe-opt %S/Inputs/segment-reduce-router.mlir --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu 2>&1 | FileCheck %s --check-prefix=TAIL
// TAIL-NOT: warning: no large-batch kernels
// TAIL: gpu.func @per_request_large_k1(
// TAIL: gpu.func @per_request_large_k2(
// TAIL: memref.atomic_rmw addi
// TAIL: scf.if
// ONE-NOT: gpu.func

// CHECK: gpu.func @counted_large_k1(%[[T:[^:]*]]: index, %{{.*}}: memref<?x16xf32>, %[[IDS:[^:]*]]: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %[[COUNTS:[^:]*]]: memref<16xi32>, %[[SORTED:[^:]*]]: memref<?xi32>, %[[BLOCKS:[^:]*]]: memref<?xi32>,
// CHECK: %[[CTA:.*]] = gpu.block_id x
// CHECK: %[[TICKET:.*]] = memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8> to memref<1xi32>
// Softmax and routing write their own tokens' rows: both run here, on this CTA's tokens.
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[IDS]]
// CTA 0: the ticket, zeroed counts, sentinel-filled sorted ids and block ids.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[CTA]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: memref.store %c0_i32{{.*}}, %[[TICKET]]
// CHECK: memref.store %c0_i32, %[[COUNTS]]
// CHECK: memref.store %{{.*}}, %[[SORTED]]
// CHECK: memref.store %c-1_i32, %[[BLOCKS]]
// CHECK: gpu.return
// CHECK: gpu.func @counted_large_k2(
// CHECK-NOT: math.exp
// Counting this CTA's tokens.
// CHECK: memref.atomic_rmw addi %{{.*}}, %{{.*}} : (i32, memref<16xi32>) -> i32
// CHECK: gpu.barrier
// The ticket: every thread fences, a barrier, thread 0 takes it, the count is
// broadcast, every thread fences again.
// CHECK: nvvm.memory.barrier <gpu>
// CHECK-NEXT: gpu.barrier
// CHECK: %[[DONE:.*]] = memref.atomic_rmw addi %c1_i32{{.*}}, %{{.*}}[%{{.*}}] : (i32, memref<1xi32>) -> i32
// CHECK: gpu.barrier
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i32
// CHECK: scf.if %[[LAST]] {
// The last CTA: the padded counts' prefix sum in chunks, block ids per expert, then
// the stable scatter (per-chunk counts, per-expert offsets, in-order placement).
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %{{.*}} {
// CHECK: memref.store %{{.*}}, %[[BLOCKS]]
// CHECK: memref.store %c0_i32, %{{.*}} : memref<128x16xi32>
// CHECK: memref.store %{{.*}}, %[[SORTED]]
// CHECK: gpu.return
moe.router @counted(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>,
        expert_counts: tensor<16xi32>, sorted_token_ids: tensor<?xi32>,
        expert_ids: tensor<?xi32>, num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 16, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x16xf32>
  %ids, %w = moe.route %logits weights(%p : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 16
      : tensor<?x2xi32>, tensor<16xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %w, %counts, %sorted, %blocks, %padded
      : tensor<?x2xi32>, tensor<?x2xf32>, tensor<16xi32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
