// moe-lower-to-loops: a router becomes func.func @name(%T, inputs..., outputs...) on
// memrefs; a token stage is one scf.parallel over the tokens whose scratch rows are
// private to each token; batch and set ops are loop nests; results are written in place.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s
// The lane-parallel (GPU) form: a token's expert loops are nested scf.parallel loops,
// maxima and sums scf.reduce, a top-k is k rounds of an arg-max over packed i64 keys.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize | FileCheck %s --check-prefix=LANES

// LANES-LABEL: func.func @r(
// LANES: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// LANES:   scf.parallel (%{{.*}}) = (%c0) to (%c16) step (%c1) init (%{{.*}}) -> f32 {
// LANES:     scf.reduce(%{{.*}} : f32) {
// LANES:       arith.maximumf
// LANES:   scf.parallel (%{{.*}}) = (%c0) to (%c16) step (%c1) init (%{{.*}}) -> f32 {
// LANES:     math.exp
// LANES:     scf.reduce(%{{.*}} : f32) {
// LANES:       arith.addf
// The route's rounds: score bits in IEEE total order, +1, above the complemented id;
// each round below the previous round's key (no flags).
// LANES:   scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%[[BOUND:.*]] = %c-1_i64) -> (i64) {
// LANES:     scf.parallel (%{{.*}}) = (%c0) to (%c16) step (%c1) init (%c0_i64) -> i64 {
// LANES:       arith.bitcast %{{.*}} : f32 to i32
// LANES:       %[[KEY:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// LANES:       arith.cmpi ult, %[[KEY]], %[[BOUND]] : i64
// LANES:       scf.reduce(%{{.*}} : i64) {
// LANES:         arith.maxui
// Expert counts only returned: atomic increments.
// LANES:   memref.atomic_rmw addi
// LANES-LABEL: func.func @aligned(
// Expert counts the policy reads (block alignment of the same ids): a histogram per
// tile of 8 tokens (no atomics), the tiles' sums; the alignment scans the tiles per
// expert and places each tile's slots.
// LANES:   %[[TILES:.*]] = arith.divui
// LANES:   scf.parallel (%[[TILE:.*]]) = (%c0) to (%[[TILES]]) step (%c1) {
// LANES:     scf.parallel (%[[E:.*]]) = (%c0) to (%c16) step (%c1) {
// LANES:       scf.for
// LANES:       memref.store %{{.*}}, %[[HIST:.*]][%[[TILE]], %[[E]]] : memref<?x16xi32>
// LANES:   } {moe.token_tiles = 8 : i64}
// LANES:   scf.parallel (%[[E2:.*]]) = (%c0) to (%c16) step (%c1) {
// LANES:     scf.for %{{.*}} = %c0 to %[[TILES]] step %c1 iter_args
// LANES:     memref.store %{{.*}}, %{{.*}}[%[[E2]]] : memref<16xi32>
// LANES:   } {moe.tile_scan}
// LANES:   } {moe.token_tiles = 8 : i64}
// LANES-NOT: memref.atomic_rmw
// LANES: return

// CHECK-LABEL: func.func @r(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[LOGITS:[a-z0-9]+]]: memref<?x16xf32>,
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>,
// CHECK-SAME: %[[SEL:[a-z0-9]+]]: memref<16xi8>, %[[COUNTS:[a-z0-9]+]]: memref<16xi32>,
// Knobs not frozen are run-time parameters after the outputs.
// CHECK-SAME: %[[K0:[a-z0-9]+]]: i64, %[[BUDGET:[a-z0-9]+]]: i64)
// The C ABI description: one entry per parameter, with the size rule of T-sized ones;
// a knob with its default and the rules of the ops that use it.
// CHECK-SAME: moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>,
// CHECK-SAME: #moe.param<name = "logits", role = in, kind = tensor, type = memref<?x16xf32>, size = [1, 0, 1]>
// CHECK-SAME: #moe.param<name = "selected", role = out, kind = set, type = memref<16xi8>>
// CHECK-SAME: #moe.param<name = "budget", role = knob, kind = scalar, type = i64, default_value = 4 : i64, rules = [#moe.rule<text = "budget must be in [0, inf]", op = "moe.fill at {{.*}}", lo = 0>]>]>
// CHECK-NOT: = moe.
// The token stage (softmax): one parallel loop, its result in a temporary buffer.
// CHECK: %[[P:.*]] = memref.alloc(%[[T]]) : memref<?x16xf32>
// CHECK: scf.parallel (%[[t:.*]]) = (%{{.*}}) to (%[[T]])
// CHECK:     math.exp
// CHECK:     memref.store %{{.*}}, %[[P]][%[[t]], %{{.*}}]
// The batch stage: warm-up set and mass, token by token.
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]]
// The select stage writes the `selected` output in place.
// CHECK: memref.store %{{.*}}, %[[SEL]][
// The route stage: a parallel loop writing ids and weights, then the counts.
// CHECK: scf.parallel
// CHECK:   memref.store %{{.*}}, %[[IDS]][
// CHECK:   memref.store %{{.*}}, %[[W]][
// CHECK: memref.store %{{.*}}, %[[COUNTS]][
// CHECK: memref.dealloc %[[P]]
// CHECK: return
moe.router @r(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, selected: !moe.set<16>,
        expert_counts: tensor<16xi32>)
    attributes {experts = 16, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %budget = moe.knob "budget" = 4 : i64
  %p = moe.softmax %logits : tensor<?x16xf32>
  %warm = moe.union_topk %logits, %k0 : tensor<?x16xf32> -> !moe.set<16>
  %mass = moe.batch_reduce sum %p : tensor<?x16xf32> -> tensor<16xf32>
  %sel = moe.fill %warm with %mass budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %ids, %w = moe.route %logits within %sel weights(%p : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  moe.yield %ids, %w, %sel, %counts
      : tensor<?x2xi32>, tensor<?x2xf32>, !moe.set<16>, tensor<16xi32>
}

moe.router @aligned(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, expert_counts: tensor<16xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 16, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 4
      : tensor<?x2xi32>, tensor<16xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %counts, %sorted, %blocks, %padded
      : tensor<?x2xi32>, tensor<16xi32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}

// A phase gate is an scf.if on the token count and the phase, both branches writing
// the shared result buffers (here the outputs themselves).
// CHECK-LABEL: func.func @gate(
// CHECK-SAME: %[[T2:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %[[PHASE:[a-z0-9]+]]: i32
// CHECK: %[[SMALL:.*]] = arith.cmpi ule, %[[T2]], %c16
// CHECK: %[[DECODE:.*]] = arith.cmpi eq, %[[PHASE]], %c1_i32
// CHECK: %[[COND:.*]] = arith.andi %[[SMALL]], %{{.*}}
// CHECK: scf.if %[[COND]] {
// CHECK: } else {
// CHECK:   math.exp
moe.router @gate(%x: tensor<?x8xf32>, %phase: i32)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 16
      phases = [decode] -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %a, %b = moe.route %x k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %p = moe.softmax %x : tensor<?x8xf32>
    %a, %b = moe.route %p k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  }
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
