// moe-map-to-gpu: below cta-tokens the whole policy is one single-CTA kernel. Token loops are
// block-strided (one thread per token), sequential code runs on thread 0, barriers
// separate the phases, temporaries are views into the workspace parameter.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s
// With the lane-parallel form (what moe-compile --target=ptx|cuda uses), a token loop
// becomes one warp per token: lane-strided expert loops, butterfly shuffles, lane-0
// sequential code broadcast by shuffle, warp barriers.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=WARP
// Beyond cta-tokens tokens, the large-batch pair: ceil(T / tokens-per-cta) CTAs per
// launch, kernel 1 the token stage + per-CTA partials, kernel 2 the combined partials,
// set selection in every CTA and routing of the CTA's tokens.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128 cta-tokens=64 tokens-per-cta=32" | FileCheck %s --check-prefix=LARGE
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="large-batch=false" | FileCheck %s --check-prefix=ONLYONE
// ONLYONE: gpu.func @r(
// ONLYONE-SAME: moe.launch = #moe.launch<size_class = decode, min_tokens = 1, max_tokens = 0, tokens_per_cta = 0,
// ONLYONE-NOT: gpu.func
// RUN: not moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-map-to-gpu="block-size=100" 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: error: moe-map-to-gpu: block-size must be a multiple of 32 in [32, 1024], got 100

// WARP: gpu.func @r(
// The block-shared slots: per-warp partials of block reductions, thread-0 broadcasts.
// WARP-SAME: workgroup(%[[SH:.*]] : memref<96xi64, #gpu.address_space<workgroup>>)
// WARP: %[[TID:.*]] = gpu.thread_id x
// WARP: %[[NT:.*]] = gpu.block_dim x
// WARP: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// WARP: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// WARP: %[[WARPS:.*]] = arith.divui %[[NT]], %c32
// The softmax stage: warp w takes tokens w, w + warps, ...
// WARP: %[[TOK0:.*]] = arith.addi %{{.*}}, %[[WARP]] : index
// WARP: scf.for %{{.*}} = %[[TOK0]] to %{{.*}} step %[[WARPS]] {
// Row max: lane-strided partial maxima, then 5 butterfly rounds.
// WARP: scf.for {{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// WARP:   arith.maximumf
// WARP: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// WARP: arith.maximumf
// WARP: gpu.shuffle xor
// WARP: gpu.shuffle xor
// WARP: gpu.shuffle xor
// WARP: gpu.shuffle xor %{{.*}}, %c1_i32
// WARP: nvvm.bar.warp.sync
// Row sum of the exponentials, the same way.
// WARP: math.exp
// WARP: gpu.shuffle xor
// WARP: arith.addf
// WARP: nvvm.bar.warp.sync
// WARP: gpu.barrier
// Batch reductions keep one thread per expert.
// WARP: scf.for %{{.*}} = %{{.*}} to %c16 step %[[NT]] {
// Set selection (budget 4) runs on warp 0 alone: 4 rounds of a warp arg-max -
// lane-strided partial keys and a butterfly, no CTA barrier per round - and lane 0
// marks each winner; the results reach the block through shared memory after it.
// WARP: arith.cmpi ult, %[[TID]], %c32
// WARP: scf.if
// WARP: scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args(%{{.*}} = %c-1_i64) -> (i64) {
// WARP:   scf.for %{{.*}} = %{{.*}} to %c16 step %{{.*}} iter_args(%{{.*}} = %c0_i64) -> (i64) {
// WARP:   gpu.shuffle xor
// WARP-NOT: gpu.barrier
// WARP:   arith.cmpi eq, %[[LANE]]
// WARP:   nvvm.bar.warp.sync
// WARP: gpu.barrier
// The route stage: k rounds of a warp arg-max over packed i64 keys (two 32-bit
// shuffles per round), each below the last round's key; lane 0 writes the outputs.
// WARP: scf.for %{{.*}} = %{{.*}} to %c2 step %c1 iter_args(%{{.*}} = %c-1_i64) -> (i64) {
// WARP:   scf.for {{.*}} iter_args(%{{.*}} = %c0_i64) -> (i64) {
// WARP:     arith.maxui
// WARP:   gpu.shuffle xor %{{.*}} : i32
// WARP:   gpu.shuffle xor %{{.*}} : i32
// WARP:   arith.maxui
// WARP:   %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}} : index
// WARP:   scf.if %[[FIRST]]
// WARP:   nvvm.bar.warp.sync
// The last phase needs no CTA barrier: nothing after it reads what it wrote
// (BarrierElimination.cpp).
// WARP-NOT: gpu.barrier
// WARP: gpu.return

// Each kernel's launch contract, in one typed attribute.
// LARGE: gpu.func @r(
// LARGE-SAME: moe.launch = #moe.launch<size_class = decode, min_tokens = 1, max_tokens = 64, tokens_per_cta = 0,
// LARGE: gpu.func @r_large_k1(%[[T:[^:]*]]: index,
// LARGE-SAME: moe.launch = #moe.launch<size_class = large, min_tokens = 65, max_tokens = 0, tokens_per_cta = 32,
// This CTA's tokens [first, last).
// LARGE: %[[CTA:.*]] = gpu.block_id x
// LARGE: %[[AT:.*]] = arith.muli %[[CTA]], %c32{{.*}} : index
// LARGE: %[[FIRST:.*]] = arith.minui %[[AT]], %[[T]] : index
// LARGE: %[[LAST:.*]] = arith.minui %{{.*}}, %[[T]] : index
// The ticket, then one [G, 16] partial array per token fold (i8 union, f32 mass).
// LARGE: %[[TICKET:.*]] = memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8> to memref<1xi32>
// LARGE: %[[UNION:.*]] = memref.view {{.*}} : memref<?xi8> to memref<?xi8>
// LARGE: %[[MASS:.*]] = memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// The softmax stage on this CTA's tokens, one warp per token.
// LARGE: scf.for %{{.*}} = %{{.*}} to %[[LAST]] step
// LARGE: math.exp
// LARGE: gpu.barrier
// The folds over this CTA's tokens, stored at [cta, e].
// LARGE: scf.for %{{.*}} = %[[FIRST]] to %[[LAST]] step %c1{{.*}} iter_args(%{{.*}} = %c0_i8) -> (i8) {
// LARGE: memref.store %{{.*}}, %[[UNION]][%{{.*}}] : memref<?xi8>
// LARGE: scf.for %{{.*}} = %[[FIRST]] to %[[LAST]] step %c1{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// LARGE: arith.addf
// LARGE: memref.store %{{.*}}, %[[MASS]][%{{.*}}] : memref<?xf32>
// CTA 0 resets the ticket; nothing of kernel 2 is left.
// LARGE: arith.cmpi eq, %[[CTA]], %c0
// LARGE: memref.store %c0_i32{{.*}}, %[[TICKET]]
// LARGE-NOT: moe.route
// LARGE: gpu.return
// LARGE: gpu.func @r_large_k2(%[[T2:[^:]*]]: index,
// LARGE-SAME: %[[SELECTED:[^:]*]]: memref<16xi8>, %{{.*}}: memref<?xi8>)
// LARGE: %[[CTA2:.*]] = gpu.block_id x
// LARGE: %[[GRID:.*]] = arith.divui
// LARGE: arith.minui %{{.*}}, %[[T2]] : index
// LARGE: %[[LAST2:.*]] = arith.minui %{{.*}}, %[[T2]] : index
// LARGE: %[[MASS2:.*]] = memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// Set selection writes CTA-private copies: of the union and the mass (the folds'
// results), and of `selected`.
// LARGE: memref.view {{.*}} : memref<?xi8> to memref<16xi8>
// LARGE: memref.view {{.*}} : memref<?xi8> to memref<16xf32>
// LARGE: %[[MINE:.*]] = memref.view {{.*}} : memref<?xi8> to memref<16xi8>
// The partials combined in CTA order, 8 CTAs' loads in flight a step.
// LARGE: scf.for %{{.*}} = %c0{{.*}} to %[[GRID]] step %c8{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// LARGE:   memref.load %[[MASS2]]
// LARGE:   arith.addf
// Greedy fill rounds on warp 0 (warp arg-max), the winner marked in the private copy.
// LARGE: scf.for %{{.*}} = %c0{{.*}} to %c4 step
// LARGE: memref.store %c1_i8, %[[MINE]]
// CTA 0 copies it out, a thread an element.
// LARGE: arith.cmpi eq, %[[CTA2]], %c0
// LARGE: scf.for %{{.*}} = %{{.*}} to %c16{{.*}} step %block_dim_x
// LARGE: memref.store %{{.*}}, %[[SELECTED]][%{{.*}}] : memref<16xi8>
// Routing of this CTA's tokens against the private copy.
// LARGE: scf.for %{{.*}} = %{{.*}} to %[[LAST2]] step
// LARGE: memref.load %[[MINE]]
// LARGE: gpu.return
// The pair as one cooperative kernel: kernel 1's body, a grid barrier, kernel 2's.
// LARGE: gpu.func @r_large_coop(
// LARGE-SAME: moe.launch = #moe.launch<size_class = cooperative, min_tokens = 65, max_tokens = 0, tokens_per_cta = 32,
// LARGE-SAME: nvvm.minctasm = 8 : i32, nvvm.reqntid = array<i32: 128, 1, 1>
// LARGE: math.exp
// LARGE: memref.store %c0_i32{{.*}}, %{{.*}}[%c0
// LARGE: moe.grid_barrier
// LARGE-NOT: moe.grid_barrier
// LARGE: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c8{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// LARGE: gpu.return

// CHECK: module attributes {gpu.container_module}
// The host function stays.
// CHECK: func.func @r(
// CHECK: gpu.module @r_kernels {
// CHECK: gpu.func @r(%[[T:.*]]: index, %{{.*}}: memref<?x16xf32>, %{{.*}}: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %{{.*}}: memref<16xi8>, %[[WS:.*]]: memref<?xi8>) workgroup(%{{.*}} : memref<96xi64, #gpu.address_space<workgroup>>) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: workspace_per_token = {{[0-9]+}}, workspace_fixed = {{[0-9]+}}>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[NT:.*]] = gpu.block_dim x
// The softmax rows live in the workspace.
// CHECK: %[[P:.*]] = memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x16xf32>
// The token stage: a block-strided loop, then a barrier.
// CHECK: %[[FROM:.*]] = arith.addi %{{.*}}, %[[TID]] : index
// CHECK: scf.for %{{.*}} = %[[FROM]] to %[[T]] step %[[NT]] {
// CHECK:   math.exp
// CHECK: gpu.barrier
// The batch and select stages run on thread 0, then a barrier.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}} : index
// CHECK: scf.if %[[FIRST]] {
// CHECK: gpu.barrier
// Routing: strided again, the last phase (no barrier after it).
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]] step %[[NT]] {
// CHECK-NOT: gpu.barrier
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
