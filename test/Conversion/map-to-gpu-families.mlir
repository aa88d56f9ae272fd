// moe-map-to-gpu on each op family (MapToGPU.cpp, WarpMapping.cpp, BlockMapping.cpp,
// BarrierElimination.cpp, LargeBatchKernels.cpp), from the lane-parallel loop form.
// Token ops (prefix TOKEN): a policy of token loops only is ONE grid kernel - each CTA
// its slice of the tokens, one warp per token, lane-strided expert loops, butterfly
// arg-max rounds, lane-0 writes, warp barriers, no CTA barrier, no large-batch pair.
// Batch ops (prefix BATCH): batch folds keep one thread per expert (each a sequential,
// reproducible fold over the tokens), union_topk's token loop one warp per token; the
// large-batch pair folds per-CTA partials in kernel 1 and combines them in CTA order in
// kernel 2.
// Set ops (prefix SET): set selection never leaves warp 0 - sequential code on thread
// 0, arg-max rounds as warp reductions with lane 0 marking the winner - joined by warp
// barriers only.
// Route ops (prefix ROUTE): routing one warp per token, then block-wide passes (the
// tile histogram of the ids, the counts, the compaction with a block reduction through
// shared memory), separated by CTA barriers where a later pass reads what an earlier
// one wrote.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=TOKEN
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=BATCH
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=SET
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=ROUTE

// TOKEN-LABEL: gpu.func @token(
// TOKEN-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[BIAS:[a-z0-9]+]]: memref<8xf32>,
// TOKEN-SAME: %[[VALS:[a-z0-9]+]]: memref<?x2xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[WS:[a-z0-9]+]]: memref<?xi8>)
// TOKEN: %[[TID:.*]] = gpu.thread_id x
// TOKEN: %[[NT:.*]] = gpu.block_dim x
// TOKEN: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// TOKEN: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// TOKEN: %[[WARPS:.*]] = arith.divui %[[NT]], %c32
// This CTA's tokens: [cta * ceil(T / grid), + ceil(T / grid)) clamped to T.
// TOKEN: %[[CTA:.*]] = gpu.block_id x
// TOKEN: %[[GRID:.*]] = gpu.grid_dim x
// TOKEN: %[[PER:.*]] = arith.divui %{{.*}}, %[[GRID]] : index
// TOKEN: %[[AT:.*]] = arith.muli %[[CTA]], %[[PER]] : index
// TOKEN: %[[FIRST:.*]] = arith.minui %[[AT]], %[[T]] : index
// TOKEN: %[[LAST:.*]] = arith.minui %{{.*}}, %[[T]] : index
// The ticket, then the stage's rows in the workspace: sigmoid, add_bias, group_limit
// ([T, 8] f32), the group scores ([T, 4] f32) and kept groups ([T, 4] i8).
// TOKEN: %[[TICKET:.*]] = memref.view %[[WS]][%c0{{.*}}][] : memref<?xi8> to memref<1xi32>
// TOKEN: %[[S:.*]] = memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x8xf32>
// TOKEN: %[[B:.*]] = memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x8xf32>
// TOKEN: memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x8xf32>
// TOKEN: memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x4xf32>
// TOKEN: memref.view %[[WS]][%{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x4xi8>
// One warp per token of the slice.
// TOKEN: %[[TOK0:.*]] = arith.addi %[[FIRST]], %[[WARP]] : index
// TOKEN: scf.for %[[TOK:.*]] = %[[TOK0]] to %[[LAST]] step %[[WARPS]] {
// sigmoid: e = lane, lane + 32, ...
// TOKEN:   %[[SROW:.*]] = memref.subview %[[S]][%[[TOK]], 0] [1, 8] [1, 1]
// TOKEN:   %[[OFF:.*]] = arith.muli %[[LANE]], %c1{{.*}} : index
// TOKEN:   %[[E0:.*]] = arith.addi %c0{{.*}}, %[[OFF]] : index
// TOKEN:   %[[STRIDE:.*]] = arith.muli %c1{{.*}}, %c32{{.*}} : index
// TOKEN:   scf.for %[[E:.*]] = %[[E0]] to %c8 step %[[STRIDE]] {
// TOKEN:     math.exp
// TOKEN:     memref.store %{{.*}}, %[[SROW]][%[[E]]]
// TOKEN:   nvvm.bar.warp.sync
// add_bias, lane-strided the same way.
// TOKEN:   memref.subview %[[B]][%[[TOK]], 0] [1, 8] [1, 1]
// TOKEN:   scf.for %{{.*}} = %{{.*}} to %c8 step %{{.*}} {
// TOKEN:     memref.load %[[BIAS]]
// TOKEN:   nvvm.bar.warp.sync
// group_limit: the 4 groups in turn, each group's 2 best by warp arg-max rounds: five
// butterfly steps of two 32-bit shuffles (the packed i64 key).
// TOKEN:   scf.for %{{.*}} = %c0{{.*}} to %c4{{.*}} step %c1{{.*}} {
// TOKEN:     gpu.shuffle xor %{{.*}}, %c16_i32{{.*}}, %c32_i32 : i32
// TOKEN:     gpu.shuffle xor %{{.*}}, %c16_i32{{.*}}, %c32_i32 : i32
// TOKEN:     gpu.shuffle xor %{{.*}}, %c8_i32
// TOKEN:     gpu.shuffle xor %{{.*}}, %c4_i32
// TOKEN:     gpu.shuffle xor %{{.*}}, %c2_i32
// TOKEN:     gpu.shuffle xor %{{.*}}, %c1_i32
// TOKEN:     nvvm.bar.warp.sync
// The top-2: two rounds, each below the last round's key; lane 0 writes the slot.
// TOKEN:   %[[KEYS:.*]] = scf.for %[[J:.*]] = %c0{{.*}} to %c2 step %c1{{.*}} iter_args(%{{.*}} = %c-1_i64) -> (i64) {
// TOKEN:     arith.maxui
// TOKEN:     gpu.shuffle xor
// TOKEN:     %[[LANE0:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}} : index
// TOKEN:     scf.if %[[LANE0]] {
// TOKEN:       memref.store %{{.*}}, %[[VALS]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// TOKEN:       memref.store %{{.*}}, %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// TOKEN:     nvvm.bar.warp.sync
// No CTA barrier anywhere (tokens are independent); CTA 0 thread 0 resets the ticket.
// TOKEN-NOT: gpu.barrier
// TOKEN: arith.cmpi eq, %[[CTA]], %c0
// TOKEN: memref.store %c0_i32{{.*}}, %[[TICKET]]
// TOKEN-NOT: gpu.barrier
// TOKEN: gpu.return
// TOKEN-NOT: gpu.func @token_large
// TOKEN: gpu.module @batch_kernels
moe.router @token(%logits: tensor<?x8xf32>, %bias: tensor<8xf32>)
    -> (values: tensor<?x2xf32>, ids: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  %s = moe.sigmoid %logits : tensor<?x8xf32>
  %b = moe.add_bias %s, %bias : tensor<?x8xf32>, tensor<8xf32>
  %g = moe.group_limit %b groups = 4 keep = 2 : tensor<?x8xf32>
  %v, %i = moe.topk %g k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  moe.yield %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// BATCH-LABEL: gpu.func @batch(
// BATCH-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[MASS:[a-z0-9]+]]: memref<8xf32>,
// BATCH-SAME: %[[WARM:[a-z0-9]+]]: memref<8xi8>, %[[PEAK:[a-z0-9]+]]: memref<8xf32>, %[[WS:[a-z0-9]+]]: memref<?xi8>)
// BATCH: %[[TID:.*]] = gpu.thread_id x
// BATCH: %[[NT:.*]] = gpu.block_dim x
// BATCH: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// BATCH: %[[WARPS:.*]] = arith.divui %[[NT]], %c32
// The sum: thread e folds expert e over the tokens in order.
// BATCH: %[[E0:.*]] = arith.addi %c0{{.*}}, %[[TID]] : index
// BATCH: scf.for %[[E:.*]] = %[[E0]] to %c8 step %[[NT]] {
// BATCH:   scf.for %[[TOK:.*]] = %c0{{.*}} to %[[T]] step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// BATCH:     memref.load %[[P]][%[[TOK]], %[[E]]] : memref<?x8xf32>
// BATCH:     arith.addf
// BATCH:   memref.store %{{.*}}, %[[MASS]][%[[E]]] : memref<8xf32>
// No barrier: union_topk's token loop does not touch what the sum wrote.
// BATCH-NOT: gpu.barrier
// BATCH: %[[FLAGS:.*]] = memref.view %[[WS]][%c0{{.*}}][%[[T]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x8xi8>
// BATCH: scf.for %[[TOK2:.*]] = %{{.*}} to %[[T]] step %[[WARPS]] {
// BATCH:   %[[ROW:.*]] = memref.subview %[[FLAGS]][%[[TOK2]], 0] [1, 8] [1, 1]
// Lane 0 clears the row, the warp finds the top-1, lane 0 flags it.
// BATCH:   %[[L0:.*]] = arith.cmpi eq, %[[LANE]], %c0{{.*}} : index
// BATCH:   scf.if %[[L0]] {
// BATCH:     memref.store %c0_i8, %[[ROW]]
// BATCH:   nvvm.bar.warp.sync
// BATCH:   gpu.shuffle xor
// BATCH:   memref.store %c1_i8, %[[ROW]]
// BATCH:   nvvm.bar.warp.sync
// BATCH-NOT: gpu.barrier
// BATCH: }
// The flags are complete before the OR over the tokens reads them.
// BATCH-NEXT: gpu.barrier
// BATCH: scf.for %[[E2:.*]] = %{{.*}} to %c8 step %[[NT]] {
// BATCH:   scf.for %[[TOK3:.*]] = %c0{{.*}} to %[[T]] step %c1{{.*}} iter_args(%{{.*}} = %c0_i8) -> (i8) {
// BATCH:     memref.load %[[FLAGS]][%[[TOK3]], %[[E2]]] : memref<?x8xi8>
// BATCH:     arith.ori
// BATCH:   memref.store %{{.*}}, %[[WARM]][%[[E2]]] : memref<8xi8>
// The max, again one thread per expert; nothing after it: no barrier.
// BATCH-NOT: gpu.barrier
// BATCH: scf.for %[[E3:.*]] = %{{.*}} to %c8 step %[[NT]] {
// BATCH:   arith.maximumf
// BATCH:   memref.store %{{.*}}, %[[PEAK]][%[[E3]]] : memref<8xf32>
// BATCH-NOT: gpu.barrier
// BATCH: gpu.return
// Large batches, kernel 1: each fold over this CTA's tokens [first, last) into a
// per-CTA partial at [cta * 8 + e] (the max one shown).
// BATCH: gpu.func @batch_large_k1(%[[T1:[^:]*]]: index,
// BATCH: %[[CTA:.*]] = gpu.block_id x
// BATCH: %[[FIRST:.*]] = arith.minui %{{.*}}, %[[T1]] : index
// BATCH: %[[LAST:.*]] = arith.minui %{{.*}}, %[[T1]] : index
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<?xi8>
// BATCH: %[[MAXP:.*]] = memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// BATCH: gpu.barrier
// BATCH: scf.for %[[E4:.*]] = %{{.*}} to %c8{{.*}} step %{{.*}} {
// BATCH:   scf.for %{{.*}} = %[[FIRST]] to %[[LAST]] step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// BATCH:     arith.maximumf
// BATCH:   %[[BASE:.*]] = arith.muli %[[CTA]], %c8{{.*}} : index
// BATCH:   %[[AT:.*]] = arith.addi %[[BASE]], %[[E4]] : index
// BATCH:   memref.store %{{.*}}, %[[MAXP]][%[[AT]]] : memref<?xf32>
// BATCH: gpu.return
// Kernel 2: the max partials combined in CTA order (8 CTAs' partials a step) into this
// CTA's copy, which CTA 0 writes out.
// BATCH: gpu.func @batch_large_k2(
// BATCH: %[[CTA2:.*]] = gpu.block_id x
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<?xi8>
// BATCH: %[[MAXP2:.*]] = memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<8xf32>
// BATCH: memref.view {{.*}} : memref<?xi8> to memref<8xi8>
// BATCH: %[[MINE:.*]] = memref.view {{.*}} : memref<?xi8> to memref<8xf32>
// BATCH: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c8{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// BATCH:   memref.load %[[MAXP2]]
// BATCH:   arith.maximumf
// BATCH: memref.store %{{.*}}, %[[MINE]][%{{.*}}] : memref<8xf32>
// BATCH: arith.cmpi eq, %[[CTA2]], %c0
// BATCH: memref.load %[[MINE]]
// BATCH: memref.store %{{.*}}, %{{.*}} : memref<8xf32>
// BATCH: gpu.return
moe.router @batch(%p: tensor<?x8xf32>)
    -> (mass: tensor<8xf32>, warm: !moe.set<8>, peak: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  %k0 = arith.constant 1 : i64
  %mass = moe.batch_reduce sum %p : tensor<?x8xf32> -> tensor<8xf32>
  %warm = moe.union_topk %p, %k0 : tensor<?x8xf32> -> !moe.set<8>
  %peak = moe.batch_reduce max %p : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %mass, %warm, %peak : tensor<8xf32>, !moe.set<8>, tensor<8xf32>
}

// SET-LABEL: gpu.func @set(
// SET-SAME: %[[MASS:[a-z0-9]+]]: memref<8xf32>, %[[A:[a-z0-9]+]]: memref<8xi8>, %{{.*}}: memref<8xi32>, %[[L2P:[a-z0-9]+]]: memref<8x1xi32>,
// SET-SAME: %[[SEL:[a-z0-9]+]]: memref<8xi8>, %[[HOT:[a-z0-9]+]]: memref<8xi8>, %[[PD:[a-z0-9]+]]: memref<8xi8>, %[[KNOBS:[a-z0-9]+]]: memref<?xi8>, %[[WS:[a-z0-9]+]]: memref<?xi8>)
// The knobs: budget (i64 at 0), theta (f32 at 8).
// SET: %[[BUDGET:.*]] = scf.if %{{.*}} -> (i64) {
// SET: %[[THETA:.*]] = scf.if %{{.*}} -> (f32) {
// SET: %[[TID:.*]] = gpu.thread_id x
// SET: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// The fill's result is a workspace temporary; thread 0 copies the initial set into it.
// SET: %[[FILL:.*]] = memref.view %[[WS]][%c0{{.*}}][] {moe.workspace_temporary} : memref<?xi8> to memref<8xi8>
// SET: %[[T0:.*]] = arith.cmpi eq, %[[TID]], %c0{{.*}} : index
// SET: scf.if %[[T0]] {
// SET:   memref.load %[[A]]
// SET:   memref.store %{{.*}}, %[[FILL]]
// SET-NOT: gpu.barrier
// SET: nvvm.bar.warp.sync
// The budget's rounds on warp 0: lane-strided packed keys of the experts not yet in
// the set, a butterfly max, lane 0 marks the winner.
// SET: %[[CLAMPED:.*]] = arith.minui %{{.*}}, %c8_i64 : i64
// SET: %[[K:.*]] = arith.index_cast %[[CLAMPED]] : i64 to index
// SET: %[[W0:.*]] = arith.cmpi ult, %[[TID]], %c32{{.*}} : index
// SET: scf.if %[[W0]] {
// SET:   scf.for %{{.*}} = %c0{{.*}} to %[[K]] step %c1 iter_args(%{{.*}} = %c-1_i64) -> (i64) {
// SET:     scf.for %{{.*}} = %{{.*}} to %c8{{.*}} step %{{.*}} iter_args(%{{.*}} = %c0_i64) -> (i64) {
// SET:       memref.load %[[MASS]]
// SET:       arith.shli %{{.*}}, %c32_i64 : i64
// SET:       memref.load %[[FILL]]
// SET:       arith.maxui
// SET:     gpu.shuffle xor %{{.*}}, %c16_i32
// SET:     gpu.shuffle xor %{{.*}}, %c1_i32
// SET:     nvvm.bar.warp.sync
// SET:     arith.cmpi eq, %[[LANE]]
// SET:     memref.store %c1_i8, %[[FILL]]
// SET-NOT: gpu.barrier
// SET: nvvm.bar.warp.sync
// threshold_set, union, drop_lowest and fill_per_device's setup on thread 0.
// SET: %[[T0B:.*]] = arith.cmpi eq, %[[TID]], %c0{{.*}} : index
// SET: scf.if %[[T0B]] {
// SET:   arith.cmpf oge, %{{.*}}, %[[THETA]] : f32
// SET:   memref.store %{{.*}}, %[[HOT]]
// SET:   memref.load %[[FILL]]
// SET:   arith.ori
// SET:   memref.store %c0_i8, %[[SEL]]
// SET:   memref.store %{{.*}}, %[[PD]]
// SET-NOT: gpu.barrier
// SET: nvvm.bar.warp.sync
// fill_per_device on warp 0: up to 9 rounds; lane 0's state broadcast by shuffle; one
// warp arg-max per device over the experts whose primary slot (log2phy / 4) is there.
// SET: %[[W0B:.*]] = arith.cmpi ult, %[[TID]], %c32{{.*}} : index
// SET: scf.if %[[W0B]] {
// SET:   scf.for %{{.*}} = %c0{{.*}} to %c9 step %c1 {
// SET:     gpu.shuffle idx
// SET:     scf.for %{{.*}} = %c0{{.*}} to %c2 step %c1 iter_args(%{{.*}} = %c0_i64) -> (i64) {
// SET:       scf.for %{{.*}} = %{{.*}} to %c8{{.*}} step %{{.*}} iter_args(%{{.*}} = %c0_i64) -> (i64) {
// SET:         memref.load %[[L2P]]
// SET:         arith.divsi %{{.*}}, %c4_i32 : i32
// SET:       gpu.shuffle xor
// SET:       memref.store %c1_i8, %[[PD]]
// SET-NOT: gpu.barrier
// SET: gpu.return
moe.router @set(%mass: tensor<8xf32>, %a: !moe.set<8>,
                %placement: !moe.placement<experts = 8, devices = 2, slots = 8>)
    -> (selected: !moe.set<8>, hot: !moe.set<8>, per_device: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %budget = moe.knob "budget" = 3 : i64
  %theta = moe.knob "theta" = 1.0 : f32
  %s = moe.fill %a with %mass budget(%budget : i64) : tensor<8xf32> -> !moe.set<8>
  %h = moe.threshold_set %mass, %theta : tensor<8xf32> -> !moe.set<8>
  %u = moe.union %s, %h : !moe.set<8>
  %one = arith.constant 1 : i64
  %d = moe.drop_lowest %u by %mass, %one : tensor<8xf32> -> !moe.set<8>
  %pd = moe.fill_per_device %a with %mass on %placement budget(%one : i64)
      : tensor<8xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<8>
  moe.yield %d, %h, %pd : !moe.set<8>, !moe.set<8>, !moe.set<8>
}

// ROUTE-LABEL: gpu.func @route(
// ROUTE-SAME: %[[T:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?x8xf32>, %[[SEL:[a-z0-9]+]]: memref<8xi8>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>,
// ROUTE-SAME: %[[COUNTS:[a-z0-9]+]]: memref<8xi32>, %[[ACTIVE:[a-z0-9]+]]: memref<8xi32>, %[[NUM:[a-z0-9]+]]: memref<1xi32>, %[[WS:[a-z0-9]+]]: memref<?xi8>)
// ROUTE-SAME: workgroup(%[[SH:.*]] : memref<96xi64, #gpu.address_space<workgroup>>)
// ROUTE: %[[TID:.*]] = gpu.thread_id x
// ROUTE: %[[NT:.*]] = gpu.block_dim x
// ROUTE: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// ROUTE: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// ROUTE: %[[WARPS:.*]] = arith.divui %[[NT]], %c32
// Routing: one warp per token, 2 arg-max rounds over the set's experts, lane 0 writes;
// the renormalization is sequential row code on lane 0.
// ROUTE: %[[TOK0:.*]] = arith.addi %c0{{.*}}, %[[WARP]] : index
// ROUTE: scf.for %[[TOK:.*]] = %[[TOK0]] to %[[T]] step %[[WARPS]] {
// ROUTE:   scf.for %[[J:.*]] = %c0{{.*}} to %c2 step %c1{{.*}} iter_args(%{{.*}} = %c-1_i64) -> (i64) {
// ROUTE:     memref.load %[[SEL]]
// ROUTE:     gpu.shuffle xor
// ROUTE:     %[[L0:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}} : index
// ROUTE:     scf.if %[[L0]] {
// ROUTE:       memref.store %{{.*}}, %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// ROUTE:       memref.store %{{.*}}, %[[W]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// ROUTE:     nvvm.bar.warp.sync
// ROUTE:   %[[L0B:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}} : index
// ROUTE:   scf.if %[[L0B]] {
// ROUTE:     arith.divf
// ROUTE:   nvvm.bar.warp.sync
// ROUTE: }
// ROUTE-NEXT: gpu.barrier
// The counts the compaction reads: a histogram per tile of 8 tokens (one warp per
// tile, lane-strided experts), then each expert's sum over the tiles.
// ROUTE: %[[TILES:.*]] = arith.divui %{{.*}}, %c8 : index
// ROUTE: %[[HIST:.*]] = memref.view %[[WS]][%{{.*}}][%[[TILES]]] {moe.workspace_temporary} : memref<?xi8> to memref<?x8xi32>
// ROUTE: scf.for %[[TILE:.*]] = %{{.*}} to %[[TILES]] step %[[WARPS]] {
// ROUTE:   scf.for %[[E:.*]] = %{{.*}} to %c8 step %{{.*}} {
// ROUTE:     scf.for {{.*}} iter_args(%{{.*}} = %c0_i32) -> (i32) {
// ROUTE:       memref.load %[[IDS]]
// ROUTE:     memref.store %{{.*}}, %[[HIST]][%[[TILE]], %[[E]]] : memref<?x8xi32>
// ROUTE: gpu.barrier
// ROUTE: scf.for %[[E2:.*]] = %{{.*}} to %c8 step %[[NT]] {
// ROUTE:   scf.for %{{.*}} = %c0 to %[[TILES]] step %c1 iter_args
// ROUTE:   memref.store %{{.*}}, %[[COUNTS]][%[[E2]]] : memref<8xi32>
// ROUTE: gpu.barrier
// compact_active: the ordered scatter on thread 0...
// ROUTE: %[[T0:.*]] = arith.cmpi eq, %[[TID]], %c0{{.*}} : index
// ROUTE: scf.if %[[T0]] {
// ROUTE:   memref.store %{{.*}}, %[[ACTIVE]][%{{.*}}] : memref<8xi32>
// ... and its size as a block reduction: block-strided partial counts, a warp
// butterfly, lane 0 of each warp publishes to shared memory, a barrier, every thread
// adds the warps' values in order.
// ROUTE-NOT: gpu.barrier
// ROUTE: %[[PART:.*]] = scf.for %{{.*}} = %{{.*}} to %c8 step %{{.*}} iter_args(%{{.*}} = %c0_i32) -> (i32) {
// ROUTE:   memref.load %[[COUNTS]]
// ROUTE: gpu.shuffle xor %[[PART]], %c16_i32, %c32_i32 : i32
// ROUTE: gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : i32
// ROUTE: %[[WARPSUM:.*]] = arith.addi
// ROUTE: %[[PUB:.*]] = arith.cmpi eq, %[[LANE]], %c0{{.*}} : index
// ROUTE: scf.if %[[PUB]] {
// ROUTE:   %[[SLOT:.*]] = arith.addi %c0{{.*}}, %[[WARP]] : index
// ROUTE:   %[[BITS:.*]] = arith.extui %[[WARPSUM]] : i32 to i64
// ROUTE:   memref.store %[[BITS]], %[[SH]][%[[SLOT]]] : memref<96xi64, #gpu.address_space<workgroup>>
// ROUTE: gpu.barrier
// ROUTE: %[[FOUND:.*]] = scf.for %{{.*}} = %c0{{.*}} to %[[WARPS]] step %c1{{.*}} iter_args(%{{.*}} = %c0_i32) -> (i32) {
// ROUTE:   memref.load %[[SH]]
// ROUTE: scf.for %[[I:.*]] = %{{.*}} to %c8 step %[[NT]] {
// ROUTE:   arith.cmpi sge, %{{.*}}, %[[FOUND]] : i32
// ROUTE:   memref.store %c-1_i32, %[[ACTIVE]][%[[I]]] : memref<8xi32>
// ROUTE: memref.store %[[FOUND]], %[[NUM]][%c0] : memref<1xi32>
// ROUTE-NOT: gpu.barrier
// ROUTE: gpu.return
moe.router @route(%logits: tensor<?x8xf32>, %sel: !moe.set<8>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, expert_counts: tensor<8xi32>,
        active: tensor<8xi32>, num_active: tensor<1xi32>) attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits within %sel k = 2 renormalize
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %a, %n = moe.compact_active %counts : tensor<8xi32> -> tensor<8xi32>, tensor<1xi32>
  moe.yield %ids, %w, %counts, %a, %n
      : tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<8xi32>, tensor<1xi32>
}
