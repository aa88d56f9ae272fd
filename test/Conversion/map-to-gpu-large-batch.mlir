// moe-map-to-gpu, the large-batch pair of a router with counts and block alignment
// (their GPU form over token tiles of 8, TokenTiles.cpp): kernel 1 routes its CTA's
// tokens and counts each of its tiles' slots per expert; CTA 0 fills the sorted ids
// and block ids; kernel 2 sums the tiles into the counts, scans the padded counts
// (every CTA), scans the tiles before its own per expert, and places its own tiles'
// slots. No atomics, no ticket, no last-CTA tail.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=64 cta-tokens=64 tokens-per-cta=32" | FileCheck %s
// A batch stage that writes per-token data over the whole batch (each token gets its
// request's summed scores) runs in the last CTA's tail, with the routing after it.
// RUN: moe-opt %S/Inputs/segment-reduce-router.mlir --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu 2>&1 | FileCheck %s --check-prefix=TAIL
// Tokens per CTA must be whole tiles.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=64 cta-tokens=16 tokens-per-cta=12" 2>&1 | FileCheck %s --check-prefix=TILES
// TAIL-NOT: warning: no large-batch kernels
// TAIL: gpu.func @per_request_large_k1(
// TAIL: gpu.func @per_request_large_k2(
// TAIL: memref.atomic_rmw addi
// TAIL: scf.if
// ONE-NOT: gpu.func
// TILES: warning: no large-batch kernels for @counted: tokens per CTA (12) must be a multiple of the token tiles' 8

// CHECK: gpu.func @counted_large_k1(%[[T:[^:]*]]: index, %{{.*}}: memref<?x16xf32>, %[[IDS:[^:]*]]: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %[[COUNTS:[^:]*]]: memref<16xi32>, %[[SORTED:[^:]*]]: memref<?xi32>, %[[BLOCKS:[^:]*]]: memref<?xi32>,
// CHECK: %[[CTA:.*]] = gpu.block_id x
// Softmax and routing write their own tokens' rows: both run here, on this CTA's tokens.
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[IDS]]
// This CTA's tiles (32 tokens = 4 tiles): each tile's count per expert.
// CHECK: %[[FIRSTTILE:.*]] = arith.muli %[[CTA]], %c4
// CHECK: %[[LASTTILE:.*]] = arith.minui
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[LASTTILE]]
// CHECK: memref.store %{{.*}}, %[[HIST:.*]][%{{.*}}, %{{.*}}] : memref<?x16xi32>
// CTA 0: sentinel-filled sorted ids and block ids.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[CTA]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: memref.store %{{.*}}, %[[SORTED]]
// CHECK: memref.store %c-1_i32, %[[BLOCKS]]
// CHECK: gpu.return
// CHECK: gpu.func @counted_large_k2(
// CHECK-NOT: math.exp
// CHECK-NOT: memref.atomic_rmw
// CHECK-NOT: nvvm.memory.barrier
// Every CTA: the counts from the tiles, the padded counts' prefix sum in chunks.
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c1{{.*}} iter_args
// CHECK: memref.store %{{.*}}, %{{.*}} : memref<16xi32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %{{.*}} {
// CTA 0 copies the counts out.
// CHECK: memref.store %{{.*}}, %[[COUNTS2:.*]][%{{.*}}] : memref<16xi32>
// The scan over the tiles up to this CTA's, storing at its own tiles' rows only.
// CHECK: %[[MINE:.*]] = arith.cmpi uge, %{{.*}}, %{{.*}} : index
// CHECK: scf.if %[[MINE]] {
// CHECK: memref.store %{{.*}}, %{{.*}} : memref<?x16xi32>
// Its own tiles' slots placed, the first slot of each block naming its expert.
// CHECK: memref.store %{{.*}}, %[[SORTED2:.*]][%{{.*}}] : memref<?xi32>
// CHECK: memref.store %{{.*}}, %[[BLOCKS2:.*]][%{{.*}}] : memref<?xi32>
// CHECK-NOT: memref.atomic_rmw
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
